"""Compaction of logs holding transactions, against a model: a batch-by-batch reference of Kafka's
LogCleaner rules (CleanedTransactionMetadata), plus the properties a reader relies on."""

from __future__ import annotations

import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

import hypothesis.strategies as st
import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from pylog.storage import LogConfig, PartitionLog
from pylog.storage.transactions import ABORT, COMMIT, UNKNOWN_MARKER, control_types
from storage_helpers import CONTROL, TRANSACTIONAL, meta_for, open_log, records

RETENTION = 50  # delete.retention.ms
CONFIG = LogConfig(segment_bytes=700, cleanup_policy="compact", delete_retention_ms=RETENTION)
PRODUCERS = (1, 2, 3)
IDEMPOTENT = 9

Row = tuple[int, bytes, bytes | None]


def marker_key(kind: int) -> bytes:
    return struct.pack(">hh", 0, kind)


@dataclass
class Txn:
    pid: int
    outcome: int | None = None  # COMMIT / ABORT once its marker is written


@dataclass
class Batch:
    base: int
    last: int
    pid: int
    rows: list[Row]
    txn: Txn | None = None  # the transaction of a data batch, or the one a marker ends
    control: bool = False
    horizon: int = -1

    @property
    def transactional(self) -> bool:
        return self.txn is not None and not self.control


class TxnLogMachine(RuleBasedStateMachine):
    FORMAT = 1  # the segment format the log writes

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="pylog-txn-model-"))
        self.dir = self.tmp / "t-0"
        self.log = open_log(self.FORMAT, self.dir, CONFIG, now_ms=0)
        self.batches: list[Batch] = []
        self.open: dict[int, Txn] = {}
        self.first_offset: dict[int, int] = {}  # producer -> first offset of its open transaction
        self.seq: dict[int, int] = {}
        self.leo = 0
        self.now = 0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- appends -------------------------------------------------------------------------------

    def _append(self, keys: list[bytes], values: list[bytes | None], pid: int = -1, *,
                txn: Txn | None = None, control: bool = False) -> None:
        n = len(keys)
        rb = records(n, keys=keys, values=values, ts=self.now)  # type: ignore[arg-type]
        attrs = (TRANSACTIONAL if txn is not None else 0) | (CONTROL if control else 0)
        seq = -1
        if pid >= 0 and not control:
            seq = self.seq.get(pid, 0)
            self.seq[pid] = seq + n
        meta = meta_for(rb, producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq,
                        attributes=attrs)
        stored = self.log.append(rb, meta, now_ms=self.now)
        assert stored.base_offset == self.leo
        rows = [(self.leo + i, keys[i], values[i]) for i in range(n)]
        self.batches.append(Batch(self.leo, self.leo + n - 1, pid, rows, txn, control))
        self.leo += n

    @rule(n=st.integers(1, 4), keyspace=st.integers(1, 5), tombstone=st.booleans(), idempotent=st.booleans())
    def plain(self, n: int, keyspace: int, tombstone: bool, idempotent: bool) -> None:
        self.now += 1
        keys = [b"k%d" % ((self.leo + i) % keyspace) for i in range(n)]
        values: list[bytes | None] = [b"p%d" % (self.leo + i) for i in range(n)]
        if tombstone:
            values[-1] = None
        self._append(keys, values, IDEMPOTENT if idempotent else -1)

    @rule(pid=st.sampled_from(PRODUCERS), n=st.integers(1, 3), keyspace=st.integers(1, 5))
    def txn_data(self, pid: int, n: int, keyspace: int) -> None:
        self.now += 1
        txn = self.open.get(pid)
        if txn is None:
            txn = self.open[pid] = Txn(pid)
            self.first_offset[pid] = self.leo
        keys = [b"k%d" % ((self.leo * 7 + i) % keyspace) for i in range(n)]
        self._append(keys, [b"t%d" % (self.leo + i) for i in range(n)], pid, txn=txn)

    @rule(pid=st.sampled_from(PRODUCERS), commit=st.booleans())
    def end_txn(self, pid: int, commit: bool) -> None:
        txn = self.open.pop(pid, None)
        if txn is None:
            return
        del self.first_offset[pid]
        self.now += 1
        txn.outcome = COMMIT if commit else ABORT
        self._append([marker_key(txn.outcome)], [b"\x00\x00\x00\x00\x00\x00"], pid, txn=txn, control=True)

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @precondition(lambda self: self.leo > 0)
    @rule()
    def reopen(self) -> None:
        self.log.close()
        self.log = open_log(self.FORMAT, self.dir, CONFIG, now_ms=self.now)

    # -- compaction ----------------------------------------------------------------------------

    @rule(step=st.sampled_from([0, 1, 30, 60]))
    def compact(self, step: int) -> None:
        self.now += step
        lso = min(self.first_offset.values(), default=self.leo)
        bases = self.log.segment_base_offsets()
        k = 0
        while k < len(bases) - 1 and bases[k + 1] <= lso:
            k += 1
        before = self.committed_view()
        result = self.log.compact(self.now, max_offset=lso, force=True)
        if k == 0:
            assert result.segments == 0
            return
        expected_cleared = self.clean(bases[k])
        assert sorted(result.cleared_aborts) == expected_cleared
        after = self.committed_view()
        assert set(after) <= set(before)
        assert latest_per_key(after) == latest_per_key(before)
        assert not [b for b in self.batches if b.base < bases[k] and b.rows and b.transactional
                    and b.txn.outcome == ABORT]  # type: ignore[union-attr]

    def clean(self, end: int) -> list[int]:
        """Kafka's cleaner, batch by batch, over the model batches below `end`; returns the ABORT
        markers found without data (pylog reports them to the aborted-transactions index)."""
        run = [b for b in self.batches if b.base < end]
        latest: dict[bytes, int] = {}
        for b in run:
            if not b.control and not (b.transactional and b.txn.outcome != COMMIT):  # type: ignore[union-attr]
                for off, key, _ in b.rows:
                    latest[key] = off
        last_of: dict[int, Batch] = {b.pid: b for b in self.batches if b.pid >= 0}
        observed: set[int] = set()
        cleared: list[int] = []
        kept_batches: list[Batch] = []
        for b in run:
            if b.control:
                discardable = not b.rows or b.pid not in observed
                observed.discard(b.pid)
                if discardable and b.rows and b.txn.outcome == ABORT:  # type: ignore[union-attr]
                    cleared.append(b.base)
                if discardable and 0 <= b.horizon <= self.now:
                    b.rows = []
                elif discardable and b.rows and b.horizon < 0:
                    b.horizon = self.now + RETENTION
            elif b.transactional:
                observed.add(b.pid)
                if b.txn.outcome == ABORT:  # type: ignore[union-attr]
                    b.rows = []
            if not b.control and not (b.transactional and b.txn.outcome is None):  # type: ignore[union-attr]
                rows = []
                for off, key, value in b.rows:
                    if latest.get(key) != off:
                        continue
                    if value is None and 0 <= b.horizon <= self.now:
                        continue
                    rows.append((off, key, value))
                b.rows = rows
                if any(v is None for _, _, v in rows) and b.horizon < 0:
                    b.horizon = self.now + RETENTION
            if b.rows or (b.pid >= 0 and last_of[b.pid] is b):
                kept_batches.append(b)
        self.batches = kept_batches + [b for b in self.batches if b.base >= end]
        return cleared

    # -- views ---------------------------------------------------------------------------------

    def committed_view(self) -> list[Row]:
        """What a read_committed consumer gets below the last stable offset."""
        lso = min(self.first_offset.values(), default=self.leo)
        return [r for b in self.batches if not b.control and b.base < lso
                and not (b.transactional and b.txn.outcome == ABORT)  # type: ignore[union-attr]
                for r in b.rows]

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def log_matches_model(self) -> None:
        entries = self.log.batch_metadata()
        got = list(zip(entries["base_offset"].tolist(),
                       (entries["base_offset"] + entries["last_offset_delta"]).tolist(),
                       entries["record_count"].tolist(), entries["delete_horizon"].tolist()))
        assert got == [(b.base, b.last, len(b.rows), b.horizon) for b in self.batches]
        t = self.log.read_table()
        rows = list(zip(*(t.column(c).to_pylist() for c in ("offset", "key", "value"))))
        assert rows == [r for b in self.batches for r in b.rows]

    @invariant()
    def decided_data_keeps_its_marker(self) -> None:
        """A reader (or a restart rebuilding producer state) needs the marker of every
        transactional batch still in the log."""
        markers = {id(b.txn) for b in self.batches if b.control}
        for b in self.batches:
            if b.transactional and b.txn.outcome is not None:  # type: ignore[union-attr]
                assert id(b.txn) in markers


def latest_per_key(rows: list[Row]) -> dict[bytes, Row]:
    """The latest record of every key, keys deleted by a tombstone left out."""
    latest = {key: (off, key, value) for off, key, value in rows}
    return {k: r for k, r in latest.items() if r[2] is not None}


TxnLogMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=60, deadline=None,
                                           suppress_health_check=[HealthCheck.too_slow])
TestTxnCompaction = TxnLogMachine.TestCase


def _put(log: PartitionLog, keys: list[bytes], values: list[bytes | None], pid: int = -1, attrs: int = 0,
         now_ms: int = 0) -> None:
    rb = records(len(keys), keys=keys, values=values)  # type: ignore[arg-type]
    log.append(rb, meta_for(rb, producer_id=pid, producer_epoch=0 if pid >= 0 else -1, attributes=attrs),
               now_ms=now_ms)


def _marker(log: PartitionLog, pid: int, kind: int) -> None:
    _put(log, [marker_key(kind)], [b"\x00" * 6], pid, CONTROL | TRANSACTIONAL)


def _rows(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    t = log.read_table()
    return list(zip(*(t.column(c).to_pylist() for c in ("offset", "key", "value"))))


def test_aborted_offset_commit_does_not_hide_the_committed_one(tmp_path: Path, fmt: int) -> None:
    """The __consumer_offsets case: a plain commit, then an aborted TxnOffsetCommit of the key."""
    log = open_log(fmt, tmp_path / "t-0", CONFIG, now_ms=0)
    _put(log, [b"g/t/0"], [b"offset 5"])
    _put(log, [b"g/t/0"], [b"offset 9"], pid=4, attrs=TRANSACTIONAL)
    _marker(log, 4, ABORT)
    _put(log, [b"other"], [b"x"])
    log.roll()
    _put(log, [b"tail"], [b"y"])
    result = log.compact(now_ms=0, force=True)
    assert _rows(log)[:2] == [(0, b"g/t/0", b"offset 5"), (2, marker_key(ABORT), b"\x00" * 6)]
    assert result.cleared_aborts == ()  # its batch was still there in this run
    result = log.compact(now_ms=10)  # prompted: the marker now has no data
    assert result.cleared_aborts == (2,)
    assert log.batch_metadata(2, 3)["delete_horizon"].tolist() == [10 + RETENTION]
    log.compact(now_ms=10 + RETENTION - 1)
    assert (2, marker_key(ABORT), b"\x00" * 6) in _rows(log)
    log.compact(now_ms=10 + RETENTION)
    # the marker is producer 4's last batch: kept empty for its epoch
    meta = log.batch_metadata(2, 3)
    assert (meta["record_count"].tolist(), meta["producer_id"].tolist()) == ([0], [4])
    assert [r[0] for r in _rows(log)] == [0, 3, 4]


def test_marker_after_the_run_decides_its_transaction(tmp_path: Path, fmt: int) -> None:
    log = open_log(fmt, tmp_path / "t-0", CONFIG, now_ms=0)
    _put(log, [b"a", b"b"], [b"plain", b"plain"])
    _put(log, [b"a"], [b"committed"], pid=1, attrs=TRANSACTIONAL)
    _put(log, [b"b"], [b"aborted"], pid=2, attrs=TRANSACTIONAL)
    _put(log, [b"c"], [b"open"], pid=3, attrs=TRANSACTIONAL)
    _put(log, [b"c"], [b"plain"])
    log.roll()
    _marker(log, 1, COMMIT)
    _marker(log, 2, ABORT)
    log.compact(now_ms=0, force=True)  # no bound: producer 3's transaction is open
    assert _rows(log)[:4] == [(1, b"b", b"plain"), (2, b"a", b"committed"), (4, b"c", b"open"),
                              (5, b"c", b"plain")]


def test_commit_marker_goes_after_its_records_are_superseded(tmp_path: Path, fmt: int) -> None:
    log = open_log(fmt, tmp_path / "t-0", CONFIG, now_ms=0)
    _put(log, [b"a"], [b"t"], pid=1, attrs=TRANSACTIONAL)
    _marker(log, 1, COMMIT)
    _put(log, [b"a"], [b"later"], pid=1, attrs=TRANSACTIONAL)
    _marker(log, 1, COMMIT)
    log.roll()
    _put(log, [b"z"], [b"z"])
    log.compact(now_ms=0, force=True)
    assert log.batch_metadata(1, 2)["delete_horizon"].tolist() == [-1]  # its batch was seen
    log.compact(now_ms=0)
    assert log.batch_metadata(1, 2)["delete_horizon"].tolist() == [RETENTION]
    log.compact(now_ms=RETENTION)
    assert [r[0] for r in _rows(log)] == [2, 3, 4]  # the second transaction and its marker stay


def test_control_types_parses_keys() -> None:
    keys = pa.array([marker_key(ABORT), marker_key(COMMIT), b"\x00\x01\x00\x01", b"\x00", None,
                     b"\xff\xff\x00\x01"], pa.binary())
    assert control_types(keys).tolist() == [ABORT, COMMIT, COMMIT, UNKNOWN_MARKER, UNKNOWN_MARKER,
                                            UNKNOWN_MARKER]
    chunked = pa.chunked_array([keys.slice(1, 2), keys.slice(0, 1)])
    assert np.array_equal(control_types(chunked), [COMMIT, COMMIT, ABORT])


class TxnLogMachineFormat2(TxnLogMachine):
    FORMAT = 2


TxnLogMachineFormat2.TestCase.settings = settings(max_examples=8, stateful_step_count=60, deadline=None,
                                         suppress_health_check=[HealthCheck.too_slow])
TestTxnCompactionFormat2 = TxnLogMachineFormat2.TestCase
