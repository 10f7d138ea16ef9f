"""Compacted topics holding transactions, read through the broker: what read_committed and
read_uncommitted consumers get before and after the log cleaner ran, and after a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from groups_helpers import commit
from harness import BrokerThread, Client
from pylog.protocol import records as rec
from pylog.protocol.api import ApiKey
from records_util import make_batch
from test_produce_fetch import create, fetch, produce
from txn_helpers import (
    add_offsets,
    add_partitions,
    end_txn,
    find_txn_coordinator,
    init_txn,
    offset_fetch,
    txn_offset_commit,
)

Row = tuple[int, bytes, bytes]
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "100", "delete.retention.ms": "0"}
NO_BACKGROUND_CLEANER = {"log.cleaner.enable": "false"}


def keyed_txn_batch(pairs: list[tuple[bytes, bytes]], pid: int, epoch: int, seq: int) -> bytes:
    n = len(pairs)
    table = pa.RecordBatch.from_arrays(
        [
            pa.array(range(n), pa.int64()),
            pa.array([1_700_000_000_000] * n, pa.timestamp("ms")),
            pa.array([k for k, _ in pairs], pa.binary()),
            pa.array([v for _, v in pairs], pa.binary()),
            pa.array([[] for _ in range(n)], rec.RECORD_SCHEMA.field("headers").type),
        ],
        schema=rec.RECORD_SCHEMA,
    )
    return rec.encode_batch(
        table, base_offset=0, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
    )


def consume(c: Client, topic: str, *, committed: bool) -> tuple[list[Row], Any]:
    """Fetch from 0 and filter like Kafka's consumer does (aborted transactions list, markers)."""
    p = fetch(c, topic, 0, isolation=1 if committed else 0)
    pending = sorted((a.first_offset, a.producer_id) for a in (p.aborted_transactions or []))
    aborted: set[int] = set()
    out: list[Row] = []
    for header, view in rec.iter_batches(p.records or b""):
        last = header.base_offset + header.last_offset_delta
        batch = rec.decode_batch(view).records
        if committed:
            while pending and pending[0][0] <= last:
                aborted.add(pending.pop(0)[1])
            if header.is_control:
                if batch.num_rows:
                    key, value = batch.column("key")[0].as_py(), batch.column("value")[0].as_py()
                    if rec.parse_control_record(key, value).is_abort:
                        aborted.discard(header.producer_id)
                continue
            if header.is_transactional and header.producer_id in aborted:
                continue
        if header.is_control:
            continue
        out += zip(batch.column("offset").to_pylist(), batch.column("key").to_pylist(),
                   batch.column("value").to_pylist())
    return out, p


def clean(b: BrokerThread, runs: int = 3) -> None:
    """Seal what rolled, then run the log cleaner as its timer would (each run prompts the next)."""
    assert b.broker is not None
    for part in b.broker.replicas.snapshot():
        part.log.seal_pending()
    for _ in range(runs):
        b.broker.maintenance.run_cleaner()


def latest(rows: list[Row]) -> dict[bytes, Row]:
    return {r[1]: r for r in rows}


def begin(c: Client, txn: str) -> tuple[int, int]:
    r = init_txn(c, txn)
    assert r.error_code == 0, r
    return r.producer_id, r.producer_epoch


def test_cleaner_drops_aborted_records_and_keeps_kafkas_answers(tmp_path: Path) -> None:
    b = BrokerThread(tmp_path / "data", NO_BACKGROUND_CLEANER).start()
    try:
        c = Client(b.address)
        create(c, "cc", configs=COMPACTED)
        find_txn_coordinator(c, "p")
        pid, epoch = begin(c, "p")
        qid, qepoch = begin(c, "q")
        seq = {pid: 0, qid: 0}

        def txn(producer: str, p: int, e: int, pairs: list[tuple[bytes, bytes]], commit: bool) -> None:
            assert add_partitions(c, producer, p, e, {"cc": [0]}) == {("cc", 0): 0}
            assert produce(c, "cc", keyed_txn_batch(pairs, p, e, seq[p])).error_code == 0
            seq[p] += len(pairs)
            assert end_txn(c, producer, p, e, commit) == 0

        produce(c, "cc", make_batch([b"a0", b"b0"], keys=[b"a", b"b"]))
        txn("p", pid, epoch, [(b"a", b"a1"), (b"c", b"c1")], True)
        produce(c, "cc", make_batch([b"b1"], keys=[b"b"]))
        txn("p", pid, epoch, [(b"a", b"a2"), (b"b", b"b2")], False)
        txn("q", qid, qepoch, [(b"c", b"c3")], False)
        produce(c, "cc", make_batch([b"d0"], keys=[b"d"]))
        txn("p", pid, epoch, [(b"d", b"d4")], True)
        produce(c, "cc", make_batch([b"e0"], keys=[b"e"]))

        committed_before, p = consume(c, "cc", committed=True)
        uncommitted_before, _ = consume(c, "cc", committed=False)
        assert {v for _, _, v in uncommitted_before} - {v for _, _, v in committed_before} == {
            b"a2", b"b2", b"c3"}
        assert len(p.aborted_transactions) == 2
        hw = p.high_watermark

        clean(b)
        assert b.broker is not None
        part = b.broker.replicas.get("cc", 0)
        assert part is not None and part.producers.aborted == []  # their records are gone
        active = part.log.segment_base_offsets()[-1]
        committed_after, p = consume(c, "cc", committed=True)
        uncommitted_after, _ = consume(c, "cc", committed=False)
        # Kafka's answer: in the cleaned segments the latest committed record of every key,
        # whichever isolation level; the active segment untouched
        want = sorted(latest([r for r in committed_before if r[0] < active]).values())
        want += [r for r in committed_before if r[0] >= active]
        assert committed_after == uncommitted_after == want
        assert [v for _, _, v in want] == [b"a1", b"c1", b"b1", b"d4", b"e0"]
        assert (p.high_watermark, p.last_stable_offset, list(p.aborted_transactions)) == (hw, hw, [])
        markers = part.log.batch_metadata(0, active, attributes=0x20)
        # p's first commit marker stays with its records, q's abort marker (q's last batch) is
        # kept empty, p's abort marker is gone, p's last commit marker stays with its records
        assert markers["record_count"].tolist() == [1, 0, 1]
        c.close()
    finally:
        b.stop()
    b = BrokerThread(tmp_path / "data", NO_BACKGROUND_CLEANER).start()
    try:
        c = Client(b.address)
        rows, p = consume(c, "cc", committed=True)
        assert rows == want and p.last_stable_offset == p.high_watermark == hw
        assert consume(c, "cc", committed=False)[0] == want
        c.close()
    finally:
        b.stop()


def test_aborted_txn_offset_commit_does_not_hide_the_committed_offset(tmp_path: Path) -> None:
    config = {**NO_BACKGROUND_CLEANER, "offsets.topic.num.partitions": "1",
              "offsets.topic.segment.bytes": "100"}
    b = BrokerThread(tmp_path / "data", config).start()
    group, tp = "g", ("t", 0)
    try:
        c = Client(b.address)
        create(c, "t")
        c.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        find_txn_coordinator(c, "p")
        assert commit(c, group, {tp: 5}) == {tp: 0}
        pid, epoch = begin(c, "p")
        assert add_offsets(c, "p", pid, epoch, group) == 0
        assert txn_offset_commit(c, "p", group, pid, epoch, {tp: 9}) == {tp: 0}
        assert end_txn(c, "p", pid, epoch, False) == 0
        assert commit(c, "other", {tp: 1}) == {tp: 0}  # rolls past the marker
        assert offset_fetch(c, group, [tp], stable=True) == {tp: 5}
        clean(b)
        c.close()
    finally:
        b.stop()
    b = BrokerThread(tmp_path / "data", config).start()
    try:
        c = Client(b.address)
        assert offset_fetch(c, group, [tp], stable=True) == {tp: 5}
        c.close()
    finally:
        b.stop()


def test_plain_commit_after_a_txn_offset_commit_wins_at_the_marker(tmp_path: Path) -> None:
    config = {**NO_BACKGROUND_CLEANER, "offsets.topic.num.partitions": "1",
              "offsets.topic.segment.bytes": "100"}
    group, tp = "g", ("t", 0)
    b = BrokerThread(tmp_path / "data", config).start()
    try:
        c = Client(b.address)
        create(c, "t")
        c.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        find_txn_coordinator(c, "p")
        pid, epoch = begin(c, "p")
        assert add_offsets(c, "p", pid, epoch, group) == 0
        assert txn_offset_commit(c, "p", group, pid, epoch, {tp: 9}) == {tp: 0}
        assert commit(c, group, {tp: 5}) == {tp: 0}  # appended after the transactional record
        assert end_txn(c, "p", pid, epoch, True) == 0
        assert offset_fetch(c, group, [tp], stable=True) == {tp: 5}
        c.close()
    finally:
        b.stop()
    for cleaned in (False, True):
        b = BrokerThread(tmp_path / "data", config).start()
        try:
            c = Client(b.address)
            assert offset_fetch(c, group, [tp], stable=True) == {tp: 5}
            if not cleaned:
                assert commit(c, "other", {tp: 1}) == {tp: 0}  # rolls past the marker
                clean(b)
            c.close()
        finally:
            b.stop()
