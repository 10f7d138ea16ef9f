"""Any sequence of produced batches, sent over the Kafka protocol to a broker writing format 2
segments (`pylog.segment.format=2`), reads back identically: as Kafka batches through a fetch (the
producer's bytes for the codecs stored as sent), as rows through pylog.read_topic over the data
directory and over Kafka, and as rows through pyarrow alone opening the segment files as
storage/FORMAT.md describes them. Sealed segments hold few Arrow record batches (small Kafka
batches merged)."""

from __future__ import annotations

import itertools
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from harness import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pylog.protocol.records import RECORD_SCHEMA, decode_batch, encode_batch, iter_batches
from pylog.protocol.records.control import parse_control_record
from pylog.storage.schema import BATCH_DTYPE
from test_produce_fetch import create, fetch, produce
from txn_helpers import add_partitions, end_txn, find_txn_coordinator, init_txn

import pylog
from pylog.sdk import read_topic

pytestmark = pytest.mark.timeout(120)
HEADERS = RECORD_SCHEMA.field("headers").type
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
LZ4, ZSTD = 3, 4
TXN_ID = "format2-property"
SEGMENT_BYTES = 8192


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pylog.LocalBroker]:
    data = tmp_path_factory.mktemp("format2-property") / "data"
    b = pylog.LocalBroker(data, config={"pylog.segment.format": "2", "log.segment.bytes": str(SEGMENT_BYTES)})
    b.start()
    yield b
    b.close()


@pytest.fixture(scope="module")
def client(broker: pylog.LocalBroker) -> Iterator[Client]:
    c = Client((broker.host or "127.0.0.1", broker.port or 0))
    yield c
    c.close()


record = st.fixed_dictionaries({
    "key": st.none() | st.binary(max_size=30),
    "value": st.sampled_from([b""]) | st.binary(max_size=400),
    "headers": st.lists(st.fixed_dictionaries({"key": st.text(max_size=16),
                                               "value": st.none() | st.binary(max_size=24)}), max_size=3),
    "ts": st.integers(0, 1_700_000_000_000),  # in the past: the broker refuses more than an hour ahead
})
# a batch: (records, codec); a transaction: its batches and how it ends
batch = st.tuples(st.lists(record, min_size=1, max_size=40), st.sampled_from(CODECS))
step = st.one_of(st.tuples(st.just("plain"), st.lists(batch, min_size=1, max_size=3)),
                 st.tuples(st.sampled_from(["commit", "abort"]), st.lists(batch, min_size=1, max_size=3)))


def producer_batch(recs: list[dict], codec: str, *, pid: int = -1, epoch: int = -1, seq: int = -1,
                   txn: bool = False) -> bytes:
    rows = pa.RecordBatch.from_arrays(
        [pa.array(range(len(recs)), pa.int64()), pa.array([r["ts"] for r in recs], pa.timestamp("ms")),
         pa.array([r["key"] for r in recs], pa.binary()), pa.array([r["value"] for r in recs], pa.binary()),
         pa.array([r["headers"] for r in recs], HEADERS)], schema=RECORD_SCHEMA)
    return encode_batch(rows, base_offset=0, compression=codec, producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq, is_transactional=txn)


def fetch_all(c: Client, topic: str, end: int) -> list[bytes]:
    """Every batch below `end` through Kafka fetches (read_uncommitted: markers and aborted too)."""
    out: list[bytes] = []
    offset = 0
    while offset < end:
        p: Any = fetch(c, topic, offset)
        assert p.error_code == 0, p
        got = [bytes(b) for _, b in iter_batches(p.records or b"")]
        assert got, f"no batch at {offset} below {end}"
        out += got
        h = decode_batch(got[-1]).header
        offset = h.base_offset + h.last_offset_delta + 1
    return out


def served_rows(b: bytes) -> pa.RecordBatch:
    """A fetched batch's rows as a reader sees them: under LogAppendTime every record has the
    batch's max timestamp."""
    got = decode_batch(b)
    rows = got.records
    if got.header.timestamp_type:
        ts = pa.array(np.full(rows.num_rows, got.header.max_timestamp, "datetime64[ms]"), pa.timestamp("ms"))
        rows = rows.set_column(1, RECORD_SCHEMA.field(1), ts)
    return rows


def pyarrow_alone(part: Path) -> tuple[pa.Table, dict[str, tuple[int, list[int]]]]:
    """The partition's rows read with pyarrow only (FORMAT.md, "Reading a partition without pylog"):
    data files by base offset, view columns cast to format 1 types; and per sealed file its Arrow
    record batches and the stored codecs of its Kafka batches (`.batches` attributes)."""
    v1 = pa.schema([f.remove_metadata() for f in RECORD_SCHEMA])
    for _ in range(100):  # a segment sealed while listing: list again (FORMAT.md, crash safety)
        try:
            files = sorted(part.glob("*.arrow*"), key=lambda p: p.stem)
            if {p.stem for p in files} != {p.stem for p in part.glob("*.batches")}:
                raise FileNotFoundError("a swap half done: side files without their data file")
            tables, sealed = [], {}
            for path in files:
                if path.suffix == ".arrow":
                    reader: Any = pa.ipc.open_file(path)
                    table = reader.read_all()
                    entries = np.fromfile(path.with_suffix(".batches"), BATCH_DTYPE)
                    sealed[path.name] = (reader.num_record_batches, (entries["attributes"] & 7).tolist())
                else:
                    table = pa.ipc.open_stream(path.read_bytes()).read_all()
                assert table.schema.metadata == {b"pylog.format": b"2"}, path
                tables.append(table.cast(v1))
            return pa.concat_tables(tables) if tables else v1.empty_table(), sealed
        except FileNotFoundError:
            time.sleep(0.05)
    raise AssertionError(f"{part} kept changing")


def merged_groups(codecs: list[int]) -> int:
    """Arrow messages a sealed segment of small batches gets: one per run of batches whose
    compressed codecs agree (plain joins either; lz4 and zstd never share a message)."""
    compressed = [c for c in codecs if c in (LZ4, ZSTD)]
    return 1 + sum(a != b for a, b in itertools.pairwise(compressed))


def wait_sealed(part: Path) -> None:
    """Rolled segments are sealed by the broker's maintenance thread soon after the roll."""
    deadline = time.monotonic() + 20
    while len(list(part.glob("*.arrows"))) > 1:
        assert time.monotonic() < deadline, f"{part}: rolled segments not sealed"
        time.sleep(0.02)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=st.lists(step, min_size=1, max_size=6), log_append_time=st.booleans())
def test_produced_batches_read_back_identically(broker: pylog.LocalBroker, client: Client, steps: list,
                                                log_append_time: bool) -> None:
    topic = f"p-{uuid.uuid4().hex[:12]}"
    ts_type = "LogAppendTime" if log_append_time else "CreateTime"
    create(client, topic, configs={"message.timestamp.type": ts_type})
    find_txn_coordinator(client, TXN_ID)
    sent: list[tuple[bytes, int, str]] = []  # (producer's batch, assigned base offset, outcome)
    markers: list[str] = []
    started = int(time.time() * 1000)
    for outcome, batches in steps:
        txn = outcome != "plain"
        pid = epoch = -1
        if txn:
            r = init_txn(client, TXN_ID)
            assert r.error_code == 0, r
            pid, epoch = r.producer_id, r.producer_epoch
            assert add_partitions(client, TXN_ID, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
        seq = 0
        for recs, codec in batches:
            b = producer_batch(recs, codec, pid=pid, epoch=epoch, seq=seq if txn else -1, txn=txn)
            seq += len(recs)
            resp: Any = produce(client, topic, b)
            assert resp.error_code == 0, resp
            sent.append((b, resp.base_offset, outcome))
        if txn:
            assert end_txn(client, TXN_ID, pid, epoch, outcome == "commit") == 0
            markers.append(outcome)
    end: int = fetch(client, topic, 0).high_watermark  # type: ignore[attr-defined]
    finished = int(time.time() * 1000)

    # (a) a Kafka fetch: the producer's batches at their offsets, each transaction's marker after it
    fetched = fetch_all(client, topic, end)
    data = [b for b in fetched if not decode_batch(b).header.is_control]
    control = [decode_batch(b) for b in fetched if decode_batch(b).header.is_control]
    assert len(data) == len(sent)
    for got, (b, base, _) in zip(data, sent):
        head, want = decode_batch(got).header, decode_batch(b).header
        assert head.base_offset == base
        assert (head.producer_id, head.producer_epoch, head.base_sequence, head.record_count,
                head.last_offset_delta, head.is_transactional) == (
            want.producer_id, want.producer_epoch, want.base_sequence, want.record_count,
            want.last_offset_delta, want.is_transactional)
        assert bool(head.timestamp_type) == log_append_time
        if log_append_time:
            assert started <= head.max_timestamp <= finished
        if want.compression in (0, LZ4, ZSTD):  # stored as sent: the same section, CRC and all
            assert got[61:] == b[61:]
            if not log_append_time:
                assert got[:12] + got[16:] == struct.pack(">q", base) + b[8:12] + b[16:]
        else:  # gzip, snappy: stored (and served) plain, the same records
            assert head.compression == 0
        mine = decode_batch(b).records
        theirs = decode_batch(got).records
        assert theirs.drop_columns(["offset"]).equals(mine.drop_columns(["offset"]))
        assert theirs["offset"].to_pylist() == [base + o for o in mine["offset"].to_pylist()]
    assert [parse_control_record(*(r.as_py() for r in (c.records["key"][0], c.records["value"][0]))).is_commit
            for c in control] == [m == "commit" for m in markers]

    everything = pa.Table.from_batches([served_rows(b) for b in fetched], schema=RECORD_SCHEMA)
    visible = pa.Table.from_batches([served_rows(got) for got, (_, _, outcome) in zip(data, sent)
                                     if outcome != "abort"], schema=RECORD_SCHEMA)

    # (b) read_topic over the data directory and over Kafka: the committed records
    for table in (read_topic(topic, data_dir=broker.data_dir, include_headers=True),
                  read_topic(topic, bootstrap_servers=broker.bootstrap_servers, include_headers=True)):
        assert table["offset"].to_pylist() == visible["offset"].to_pylist()
        for column in ("key", "value", "headers"):
            assert table[column].to_pylist() == visible[column].to_pylist(), column
        stamps = table["timestamp"].cast(pa.int64()).to_pylist()
        assert stamps == visible["timestamp"].cast(pa.int64()).to_pylist()
        assert set(table["timestampType"].to_pylist()) <= {int(log_append_time)}

    # (c) pyarrow alone over the segment files: every stored row, markers and aborted records too
    part = broker.data_dir / f"{topic}-0"
    wait_sealed(part)
    rows, sealed = pyarrow_alone(part)
    assert rows.equals(everything)
    assert not list(part.glob("*.wire"))
    for name, (messages, codecs) in sealed.items():
        assert messages == merged_groups(codecs), (name, messages, codecs)


def test_sealed_segments_merge_small_batches(broker: pylog.LocalBroker, client: Client) -> None:
    """FORMAT.md: sealing merges small batches into large Arrow record batches (one records
    section per variadic buffer): hundreds of lz4 batches, a handful of messages."""
    create(client, "merged", configs={"segment.bytes": "65536"})
    for i in range(300):
        recs = [{"key": b"k%d" % i, "value": b"value %d " % i * 8, "headers": [], "ts": i}] * 3
        assert produce(client, "merged", producer_batch(recs, "lz4")).error_code == 0  # type: ignore[attr-defined]
    part = broker.data_dir / "merged-0"
    wait_sealed(part)
    _, sealed = pyarrow_alone(part)
    assert len(sealed) >= 2
    for name, (messages, codecs) in sealed.items():
        assert messages == 1 and len(codecs) > 10, (name, messages, len(codecs))
    reader = pa.ipc.open_file(part / min(sealed))
    value = reader.get_batch(0).column("value")
    assert len(value.buffers()) == 2 + len(sealed[min(sealed)][1])  # validity, views, one per section
