"""A PartitionLog writing format 2 ("one copy", `pylog.segment.format=2`): what producers and
leaders send reads back byte for byte as Kafka batches and record for record as Arrow rows, through
rolls, sealing, reopening, followers, truncation, compaction and format 1 segments before it."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pylog.protocol.records import decode_batch, encode_batch, encode_control_batch
from pylog.storage import RECORD_SCHEMA, LogConfig, PartitionLog
from pylog.storage import onecopy as oc
from storage_helpers import meta_for, open_log, records

from pylog.model import TIMESTAMP_TYPE_MASK
from pylog.onecopy_kafka import rows_from_kafka

HEADERS = RECORD_SCHEMA.field("headers").type
EPOCH = 4
APPEND_TIME = 1_800_000_000_000


def leader_bytes(batch: bytes, base_offset: int, append_time: int | None) -> bytes:
    """The producer's batch as a leader serves it: its base offset and leader epoch set (outside the
    CRC); under LogAppendTime also attribute bit 3 and max timestamp, the CRC signed again."""
    out = bytearray(batch)
    struct.pack_into(">q", out, 0, base_offset)
    struct.pack_into(">i", out, 12, EPOCH)
    if append_time is not None:
        (attributes,) = struct.unpack_from(">h", out, 21)
        struct.pack_into(">h", out, 21, attributes | TIMESTAMP_TYPE_MASK)
        struct.pack_into(">q", out, 35, append_time)
        struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def expected_rows(served: list[bytes]) -> pa.Table:
    """Each served batch decoded by pylog's codec (under LogAppendTime every record has the
    batch's max timestamp)."""
    parts = []
    for b in served:
        got = decode_batch(b)
        rb = got.records
        if got.header.attributes & TIMESTAMP_TYPE_MASK:
            stamps = np.full(rb.num_rows, got.header.max_timestamp, "datetime64[ms]")
            ts = pa.array(stamps, pa.timestamp("ms"))
            rb = rb.set_column(1, RECORD_SCHEMA.field(1), ts)
        parts.append(rb)
    return pa.Table.from_batches(parts, schema=RECORD_SCHEMA)


def append_produced(log: PartitionLog, batch: bytes, now_ms: int) -> int:
    return log.append_rows(rows_from_kafka(batch, base_offset=0, partition_leader_epoch=EPOCH),
                           now_ms=now_ms).base_offset


def pyarrow_alone(directory: Path) -> pa.Table:
    """The partition's records read with pyarrow only (FORMAT.md, "Reading a partition without pylog")."""
    parts = []
    for path in sorted(directory.glob("*.arrow*"), key=lambda p: p.stem):
        with pa.memory_map(str(path)) as source:
            reader = pa.ipc.open_file(source) if path.suffix == ".arrow" else pa.ipc.open_stream(source)
            table = reader.read_all()
        parts += [oc.to_record_schema(b) if table.schema.metadata else b for b in table.to_batches()]
    return pa.Table.from_batches(parts, schema=RECORD_SCHEMA)


record = st.fixed_dictionaries({
    "key": st.none() | st.binary(max_size=20),
    "value": st.none() | st.binary(max_size=120),
    "headers": st.lists(st.fixed_dictionaries({"key": st.text(max_size=14),
                                               "value": st.none() | st.binary(max_size=20)}), max_size=2),
    "ts": st.integers(0, 2**41),
})
batch = st.tuples(st.sampled_from(["plain", "transactional", "commit", "abort"]),
                  st.lists(record, min_size=1, max_size=12), st.sampled_from(["none", "lz4", "zstd"]))


def produced_batch(kind: str, recs: list[dict], codec: str, seq: int) -> bytes:
    if kind in ("commit", "abort"):
        return encode_control_batch(base_offset=0, producer_id=11, producer_epoch=1, commit=kind == "commit",
                                    coordinator_epoch=3, timestamp_ms=recs[0]["ts"])
    rows = pa.RecordBatch.from_arrays(
        [pa.array(range(len(recs)), pa.int64()), pa.array([r["ts"] for r in recs], pa.timestamp("ms")),
         pa.array([r["key"] for r in recs], pa.binary()), pa.array([r["value"] for r in recs], pa.binary()),
         pa.array([r["headers"] for r in recs], HEADERS)], schema=RECORD_SCHEMA)
    txn = kind == "transactional"
    return encode_batch(rows, base_offset=0, compression=codec, producer_id=11 if txn else 5,
                        producer_epoch=1, base_sequence=seq, is_transactional=txn)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(batch, min_size=1, max_size=10), log_append_time=st.booleans(),
       segment_bytes=st.sampled_from([3000, 1 << 20]), seal=st.booleans())
def test_produced_batches_read_back_as_wire_bytes_and_arrow_rows(
        tmp_path: Path, batches: list, log_append_time: bool, segment_bytes: int, seal: bool) -> None:
    cfg = LogConfig(segment_bytes=segment_bytes,
                    message_timestamp_type="LogAppendTime" if log_append_time else "CreateTime")
    d = tmp_path / uuid.uuid4().hex / "t-0"
    log = open_log(2, d, cfg)
    served, seq = [], 0
    for i, (kind, recs, codec) in enumerate(batches):
        b = produced_batch(kind, recs, codec, seq)
        seq += len(recs)
        base = append_produced(log, b, APPEND_TIME + i)
        served.append(leader_bytes(b, base, APPEND_TIME + i if log_append_time else None))
    if seal:
        log.roll()
        log.seal_pending()
    want = expected_rows(served)
    assert [bytes(b) for b in log.read_wire(0, 1 << 30)] == served
    assert log.read_table().equals(want)
    assert pyarrow_alone(d).equals(want)
    follower = open_log(2, d.parent / "t-1", cfg)
    for b in served:  # a follower appends what the leader serves and serves the same bytes
        follower.append_rows(rows_from_kafka(b, base_offset=int.from_bytes(b[:8], "big")), now_ms=0,
                             base_offset=int.from_bytes(b[:8], "big"))
    assert [bytes(b) for b in follower.read_wire(0, 1 << 30)] == served
    assert follower.read_table().equals(want)
    log.close()
    reopened = PartitionLog.open_readonly(d)
    assert reopened.read_table().equals(want)
    assert [bytes(b) for b in reopened.read_wire(0, 1 << 30)] == served
    reopened.close()
    follower.close()


def _produce(log: PartitionLog, n: int, codec: str = "lz4", *, now_ms: int = 0,
             key: bytes | None = None) -> bytes:
    rb = records(n, value_size=300, keys=None if key is None else [key] * n)
    b = encode_batch(rb, base_offset=0, compression=codec, producer_id=1, producer_epoch=0, base_sequence=0)
    base = append_produced(log, b, now_ms)
    return leader_bytes(b, base, None)


def test_format_1_segments_then_format_2_ones(tmp_path: Path) -> None:
    """A log written in format 1 and reopened with format 2 keeps its old segments as they are and
    writes new ones in format 2; reads, fetches, sealing and a switch back all see every record."""
    d = tmp_path / "t-0"
    old = open_log(1, d, LogConfig(segment_bytes=6000))
    for _ in range(8):
        rb = records(10, value_size=100)
        old.append(rb, meta_for(rb), now_ms=0)
    old.seal_pending()
    before = old.read_table()
    old.close()
    log = open_log(2, d, LogConfig(segment_bytes=6000))
    start = log.log_end_offset
    served = [_produce(log, 5) for _ in range(6)]
    assert {s.fmt for s in log._segments[:-1]} >= {1} and log._segments[-1].fmt == 2
    got = log.read_wire(start, 1 << 30)
    assert [bytes(b) for b in got] == served
    log.roll()
    log.seal_pending()
    assert [seg.fmt for seg in log._segments if seg.sealed][:2] == [1, 1]
    assert {seg.fmt for seg in log._segments if seg.base_offset >= start and seg.batch_count} == {2}
    table = log.read_table()
    assert table.slice(0, start).equals(before)
    assert table.slice(start).equals(expected_rows(served))
    assert [bytes(b) for b in log.read_wire(start, 1 << 30)] == served
    log.close()
    back = open_log(1, d, LogConfig(segment_bytes=6000))  # and back: format 1 after format 2
    rb = records(3)
    back.append(rb, meta_for(rb), now_ms=0)
    assert back._segments[-1].fmt == 1
    assert back.read_table().num_rows == table.num_rows + 3
    assert PartitionLog.open_readonly(d).read_table().equals(back.read_table())
    back.close()


def test_follower_truncation_inside_a_sealed_segment(tmp_path: Path) -> None:
    log = open_log(2, tmp_path / "t-0", LogConfig(segment_bytes=1 << 20))
    served = [_produce(log, 4, codec) for codec in ("none", "lz4", "lz4", "none", "zstd", "zstd")]
    log.roll()
    log.seal_pending()
    assert log._segments[0].sealed and len(log._segments[0].files()[1]) < 6  # batches merged
    log.truncate_to(13)  # inside the 4th batch (12..15): it goes whole
    assert log.log_end_offset == 13
    assert [bytes(b) for b in log.read_wire(0, 1 << 30)] == served[:3]
    assert log.read_table().equals(expected_rows(served[:3]))
    again = _produce(log, 2)  # appends continue at 13
    assert int.from_bytes(again[:8], "big") == 13
    log.close()
    reopened = open_log(2, tmp_path / "t-0")
    assert [bytes(b) for b in reopened.read_wire(0, 1 << 30)] == [*served[:3], again]
    reopened.close()


@pytest.mark.parametrize("codec,stored", [("gzip", 0), ("snappy", 0)])
def test_gzip_and_snappy_are_served_as_stored(tmp_path: Path, codec: str, stored: int) -> None:
    log = open_log(2, tmp_path / "t-0")
    rb = records(20, value_size=200)
    b = encode_batch(rb, base_offset=0, compression=codec, producer_id=1, producer_epoch=0, base_sequence=0)
    append_produced(log, b, 0)
    (sent,) = log.read_wire(0, 1 << 30)
    got = decode_batch(bytes(sent))  # a valid batch (CRC checked), stored plain
    assert got.header.attributes & 7 == stored
    assert got.records.equals(decode_batch(b).records)
    assert log.read_table().to_batches()[0].equals(got.records)
    log.close()


def test_compaction_keeps_untouched_sections_and_re_encodes_the_others(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=4000, cleanup_policy="compact")
    log = open_log(2, tmp_path / "t-0", cfg)
    served = []
    for i in range(12):
        served.append(_produce(log, 2, key=b"k%d" % (i % 3)) if i < 9 else _produce(log, 1, key=b"u%d" % i))
    log.roll()
    result = log.compact(now_ms=0, force=True)
    assert result.records_after < result.records_before
    sent = {int.from_bytes(bytes(b)[:8], "big"): bytes(b) for b in log.read_wire(0, 1 << 30)}
    for b in served[9:]:  # the unique keys' batches kept every record: the stored bytes are the producer's
        assert sent[int.from_bytes(b[:8], "big")] == b
    for b in sent.values():
        decode_batch(b)  # every batch a fetch returns is whole (CRC checked)
    keys = log.read_table().column("key").to_pylist()
    assert sorted(keys) == sorted({*keys}) and len(keys) == 3 + 3
    log.close()


def test_append_rows_refuses_what_cannot_be_stored(tmp_path: Path) -> None:
    log = open_log(2, tmp_path / "t-0", LogConfig(cleanup_policy="compact"))
    rb = records(3, keys=[b"a", None, b"c"])
    b = encode_batch(rb, base_offset=0, producer_id=1, producer_epoch=0, base_sequence=0)
    with pytest.raises(Exception, match="must have a key"):
        append_produced(log, b, 0)
    two = oc.concat_rows([rows_from_kafka(b, base_offset=0), rows_from_kafka(b, base_offset=3)])
    with pytest.raises(Exception, match="one Kafka batch"):
        log.append_rows(two, now_ms=0)
    assert log.log_end_offset == 0
    log.close()


def test_a_log_without_a_kafka_decoder_appends_arrow_rows_in_format_1(tmp_path: Path) -> None:
    """Format 2 cannot be built from Arrow rows alone: such a writer keeps format 1 segments, and
    its Kafka batches (`append_rows`) still go to format 2 ones."""
    bare = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_format=2), now_ms=0)
    rb = records(3)
    bare.append(rb, meta_for(rb), now_ms=0)
    assert bare._segments[-1].fmt == 1
    served = _produce(bare, 2)
    assert bare._segments[-1].fmt == 2 and bare.segment_count == 2
    assert bytes(bare.read_wire(3, 1 << 20)[0]) == served
    assert bare.read_table().column("offset").to_pylist() == [0, 1, 2, 3, 4]
    bare.close()


def test_arrow_rows_without_a_decoder_roll_into_format_1_segments(tmp_path: Path) -> None:
    """A segment rolled by size under such a writer starts in the format the append writes (1),
    not the topic's (2), so every segment reads back."""
    bare = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_format=2, segment_bytes=2048), now_ms=0)
    for _ in range(8):
        rb = records(10, value_size=100)
        bare.append(rb, meta_for(rb), now_ms=0)
    assert bare.segment_count > 2 and {s.fmt for s in bare._segments} == {1}
    bare.close()
    again = PartitionLog.open_readonly(tmp_path / "t-0")
    assert again.read_table().column("offset").to_pylist() == list(range(80))
    again.close()


def test_format_2_segments_read_from_the_remote_tier(tmp_path: Path) -> None:
    """Sealed format 2 segments copied to an object store read back as the local log reads them:
    the same rows (a fetch's and a whole-segment scan's) and the same Kafka bytes."""
    from pylog.storage.remote_cache import RemoteReadCache
    from pylog.storage.remote_segment import RemoteLog
    from pylog.storage.remote_store import open_remote_store

    from tests.tiered.tiered_helpers import upload

    log = open_log(2, tmp_path / "events-0", LogConfig(segment_bytes=40_000))
    served = [_produce(log, 8, codec) for codec in ("none", "lz4", "zstd") * 10]
    log.roll()
    log.seal_pending()
    store = open_remote_store(f"file://{tmp_path}/tier")
    manifest = upload(log.dir, store, "events", uuid.UUID(int=7), 0)
    assert len(manifest.segments) >= 2
    with RemoteReadCache(256 << 10, chunk_bytes=16 << 10, readahead=2) as cache:
        remote = RemoteLog.from_manifest(store, manifest, cache)
        end = remote.log_end_offset
        assert remote.read_table().equals(log.read_table(0, end))
        for lo, hi in ((0, end), (5, end - 3)):  # whole segments in one pass; parts by message
            assert pa.Table.from_batches(list(remote.scan(lo, hi))).equals(log.read_table(lo, hi))
        got = [bytes(b) for b in remote.read_wire(0, 1 << 30, max_offset=end)]
        assert got == [b for b in served if int.from_bytes(b[:8], "big") < end]
        assert [bytes(b) for b in remote.read_wire(13, 3000, max_offset=end)] == [
            bytes(b) for b in log.read_wire(13, 3000, max_offset=end)]
    log.close()
