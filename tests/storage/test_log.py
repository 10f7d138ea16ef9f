"""PartitionLog contracts: append, read, lookups, truncation, retention, epochs, configs."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from pylog.storage import (
    RECORD_SCHEMA,
    BatchMeta,
    InvalidAppend,
    InvalidRecord,
    LogConfig,
    OffsetOutOfRange,
    PartitionLog,
    ReadOnlyLog,
    list_partitions,
    read_segments,
)
from storage_helpers import CONTROL, meta_for, open_log, records


def _append(log: PartitionLog, n: int, *, now_ms: int = 0, **kw: object) -> BatchMeta:
    rb = records(n, **kw)  # type: ignore[arg-type]
    return log.append(rb, meta_for(rb), now_ms=now_ms)


def _offsets(log: PartitionLog) -> list[int]:
    return log.read_table().column("offset").to_pylist()


def test_schema_matches_protocol() -> None:
    from pylog.protocol.records import RECORD_SCHEMA as PROTOCOL_SCHEMA

    assert RECORD_SCHEMA.equals(PROTOCOL_SCHEMA)


def test_append_assigns_offsets_and_read_returns_whole_batches(tmp_path: Path, fmt: int) -> None:
    log = open_log(fmt, tmp_path / "t-0", now_ms=0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    m1 = _append(log, 3)
    m2 = log.append(records(2), BatchMeta(0, 1, 2, 5, 6, 42, 3, 17, 0x10, 7), now_ms=0)
    assert (m1.base_offset, m1.last_offset, m2.base_offset, m2.last_offset) == (0, 2, 3, 4)
    assert (m2.producer_id, m2.producer_epoch, m2.base_sequence, m2.is_transactional) == (42, 3, 17, True)
    assert log.log_end_offset == 5
    got = log.read(4, 1 << 20)
    assert [b.meta for b in got] == [m2]
    assert got[0].records.column("offset").to_pylist() == [3, 4]
    assert [b.meta.base_offset for b in log.read(0, 1 << 20)] == [0, 3]
    assert log.read(5, 100) == []
    with pytest.raises(OffsetOutOfRange):
        log.read(6, 100)
    assert [b.meta.base_offset for b in log.read(0, 1 << 20, max_offset=4)] == [0]
    assert log.read(0, 1 << 20, max_offset=2) == []  # the first batch is not wholly below 2


def test_read_budget_returns_at_least_one_batch(tmp_path: Path, fmt: int) -> None:
    log = open_log(fmt, tmp_path / "t-0", now_ms=0)
    for _ in range(10):
        _append(log, 10, value_size=100)
    one = log.read(0, 1)
    assert len(one) == 1
    size = log.read(0, 1 << 30)
    assert len(size) == 10
    two = log.read(0, 3 * size[0].records.nbytes)
    assert 1 < len(two) < 10


def test_read_is_zero_copy_over_the_mapped_segment(tmp_path: Path, fmt: int) -> None:
    log = open_log(fmt, tmp_path / "t-0", LogConfig(segment_bytes=50_000), now_ms=0)
    for _ in range(20):
        _append(log, 100, value_size=100)
    log.seal_pending()
    seg = log._segments[0]
    assert seg.sealed
    # format 1: the rows a fetch reads; format 2: the segment's own view columns (read() copies
    # their values out as RECORD_SCHEMA), whose data buffers are the stored records sections
    batch = log.read(0, 1)[0].records if fmt == 1 else seg.message(0)
    buf = seg.buffer()
    values = batch.column("value").buffers()[2]
    assert buf.address <= values.address < buf.address + buf.size


def test_follower_append_keeps_offsets_and_allows_gaps(tmp_path: Path, fmt: int) -> None:
    log = open_log(fmt, tmp_path / "t-0", now_ms=0)
    rb = records(3)
    stored = log.append(rb, meta_for(rb), now_ms=0, base_offset=10)
    assert stored.base_offset == 10 and log.log_end_offset == 13
    assert _offsets(log) == [10, 11, 12]
    with pytest.raises(InvalidAppend):
        log.append(rb, meta_for(rb), now_ms=0, base_offset=12)
    leader_batch = records(2).set_column(0, "offset", pa.array([20, 21], pa.int64()))
    log.append(leader_batch, BatchMeta(20, 1, 2, 1000, 1001), now_ms=0, base_offset=20)
    assert _offsets(log) == [10, 11, 12, 20, 21]
    assert [b.meta.base_offset for b in log.read(14, 1 << 20)] == [20]


def test_invalid_appends(tmp_path: Path, fmt: int) -> None:
    log = open_log(fmt, tmp_path / "t-0", LogConfig(cleanup_policy="compact"), now_ms=0)
    with pytest.raises(InvalidAppend):
        log.append(records(0), BatchMeta(0, 0, 0, 0, 0), now_ms=0)
    with pytest.raises(InvalidAppend):
        log.append(records(3), BatchMeta(0, 1, 3, 0, 0), now_ms=0)
    with pytest.raises(InvalidRecord):
        rb = records(2, keys=[b"a", None])
        log.append(rb, meta_for(rb), now_ms=0)
    rb = records(1, keys=[None])
    log.append(rb, meta_for(rb, attributes=CONTROL), now_ms=0)  # control records are exempt
    wrong = pa.record_batch({"x": [1]})
    with pytest.raises(InvalidAppend):
        log.append(wrong, BatchMeta(0, 0, 1, 0, 0), now_ms=0)
    assert log.log_end_offset == 1


def test_log_append_time(tmp_path: Path, fmt: int) -> None:
    log = open_log(fmt, tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"), now_ms=0)
    stored = _append(log, 3, now_ms=777)
    assert stored.timestamp_type == 1 and stored.max_timestamp == 777
    assert log.read_table().column("timestamp").cast(pa.int64()).to_pylist() == [777] * 3


def test_offset_for_timestamp_and_max_timestamp(tmp_path: Path, fmt: int) -> None:
    log = open_log(fmt, tmp_path / "t-0", LogConfig(segment_bytes=1200), now_ms=0)
    _append(log, 3, timestamps=[100, 300, 200])
    _append(log, 3, timestamps=[150, 500, 120])
    _append(log, 3, timestamps=[400, 400, 90])
    assert log.segment_count > 1
    for sealed in (False, True):
        if sealed:
            log.seal_pending()
        assert log.offset_for_timestamp(0) == (0, 100)
        assert log.offset_for_timestamp(250) == (1, 300)
        assert log.offset_for_timestamp(301) == (4, 500)
        assert log.offset_for_timestamp(501) is None
        assert log.offset_for_timestamp(450, max_offset=4) is None
        assert log.max_timestamp_and_offset() == (500, 4)
    log.delete_records_before(2)
    assert log.offset_for_timestamp(250) == (4, 500)


def test_truncate_to_batch_boundaries(tmp_path: Path, fmt: int) -> None:
    log = open_log(fmt, tmp_path / "t-0", LogConfig(segment_bytes=3000), now_ms=0)
    for _ in range(10):
        _append(log, 5)
    log.seal_pending()
    assert log.segment_count > 2
    log.truncate_to(100)
    assert log.log_end_offset == 50
    log.truncate_to(37)  # inside batch 35..39: the whole batch goes, 35 and 36 become a gap
    assert log.log_end_offset == 37 and _offsets(log) == list(range(35))
    assert _append(log, 1).base_offset == 37
    log.truncate_to(35)
    assert log.log_end_offset == 35 and _offsets(log) == list(range(35))
    log.truncate_to(10)
    assert log.log_end_offset == 10 and _offsets(log) == list(range(10))
    assert _append(log, 2).base_offset == 10
    log.close()
    log = open_log(fmt, tmp_path / "t-0", LogConfig(segment_bytes=3000), now_ms=0)
    assert _offsets(log) == list(range(12))


def test_truncate_fully(tmp_path: Path, fmt: int) -> None:
    log = open_log(fmt, tmp_path / "t-0", now_ms=0)
    _append(log, 5)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.segment_count) == (100, 100, 1)
    assert _append(log, 1).base_offset == 100
    log.close()
    log = open_log(fmt, tmp_path / "t-0", now_ms=0)
    assert (log.log_start_offset, log.log_end_offset) == (100, 101)


def test_delete_records_is_checkpointed(tmp_path: Path, fmt: int) -> None:
    cfg = LogConfig(segment_bytes=3000)
    log = open_log(fmt, tmp_path / "t-0", cfg, now_ms=0)
    for _ in range(10):
        _append(log, 5)
    segments = log.segment_count
    assert log.delete_records_before(22) == 22
    assert log.segment_count < segments
    with pytest.raises(OffsetOutOfRange):
        log.read(21, 100)
    assert log.read(22, 1)[0].meta.base_offset == 20
    assert log.read_table().column("offset").to_pylist()[0] == 22
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(51)
    assert log.delete_records_before(5) == 22
    log.close()
    log = open_log(fmt, tmp_path / "t-0", cfg, now_ms=0)
    assert log.log_start_offset == 22
    assert log.delete_records_before(50) == 50
    assert log.read(50, 100) == []


def test_retention_by_time_size_and_high_watermark(tmp_path: Path, fmt: int) -> None:
    cfg = LogConfig(segment_bytes=3000, retention_ms=1000, retention_bytes=-1)
    log = open_log(fmt, tmp_path / "t-0", cfg, now_ms=0)
    for i in range(10):
        _append(log, 5, ts=i * 100)
    n = log.segment_count
    assert log.apply_retention(now_ms=500) == 0
    assert log.apply_retention(now_ms=10_000, max_offset=0) == 0  # nothing wholly below the HW
    deleted = log.apply_retention(now_ms=10_000)
    assert deleted == n - 1 and log.segment_count == 1  # never the active segment
    assert log.log_start_offset == log._segments[0].base_offset

    log2 = open_log(fmt, tmp_path / "t-1", LogConfig(segment_bytes=3000, retention_bytes=5000), now_ms=0)
    for _ in range(20):
        _append(log2, 5)
    log2.apply_retention(now_ms=0)
    assert log2.size_bytes - log2._segments[0].data_size < 5000 <= log2.size_bytes or log2.segment_count == 1
    compact_only = open_log(fmt, tmp_path / "t-2", LogConfig(segment_bytes=3000, retention_ms=1,
                                                                 cleanup_policy="compact"), now_ms=0)
    for _ in range(10):
        _append(compact_only, 5)
    assert compact_only.apply_retention(now_ms=10**9) == 0


def test_leader_epochs(tmp_path: Path, fmt: int) -> None:
    log = open_log(fmt, tmp_path / "t-0", now_ms=0)
    rb = records(5)
    log.append(rb, meta_for(rb, leader_epoch=1), now_ms=0)
    log.assign_leader_epoch(3, 5)
    log.append(rb, meta_for(rb, leader_epoch=3), now_ms=0)
    log.append(rb, meta_for(rb, leader_epoch=4), now_ms=0)
    assert log.epoch_entries() == [(1, 0), (3, 5), (4, 10)]
    assert log.end_offset_for_epoch(1) == (1, 5)
    assert log.end_offset_for_epoch(2) == (1, 5)
    assert log.end_offset_for_epoch(3) == (3, 10)
    assert log.end_offset_for_epoch(4) == (4, 15)
    assert log.end_offset_for_epoch(0) == (0, 0)
    assert log.end_offset_for_epoch(9) == (-1, -1)
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    log.truncate_to(10)
    assert log.epoch_entries() == [(1, 0), (3, 5)]
    log.close()
    log = open_log(fmt, tmp_path / "t-0", now_ms=0)
    assert log.epoch_entries() == [(1, 0), (3, 5)]
    log.delete_records_before(7)
    assert log.epoch_entries() == [(3, 7)]
    log.assign_leader_epoch(2, 20)  # older epoch: later entries are dropped (Kafka's rule)
    assert log.epoch_entries() == [(2, 20)]


def test_flush_policies(tmp_path: Path, fmt: int) -> None:
    log = open_log(fmt, tmp_path / "t-0", LogConfig(flush_messages=4), now_ms=0)
    _append(log, 3)
    assert log._unflushed == 3
    _append(log, 3)
    assert log._unflushed == 0
    log2 = open_log(fmt, tmp_path / "t-1", LogConfig(flush_ms=100), now_ms=0)
    _append(log2, 1, now_ms=50)
    assert not log2.maybe_flush(99) and log2.maybe_flush(100)


def test_config_from_kafka() -> None:
    cfg = LogConfig.from_kafka({"segment.bytes": "1024", "cleanup.policy": "compact, delete",
                                "retention.ms": "-1", "message.timestamp.type": "LogAppendTime", "x.y": "1"})
    assert (cfg.segment_bytes, cfg.retention_ms, cfg.compact, cfg.delete) == (1024, -1, True, True)
    assert cfg.to_kafka()["segment.bytes"] == "1024"
    with pytest.raises(ValueError):
        LogConfig.from_kafka({"cleanup.policy": "nope"})
    with pytest.raises(ValueError):
        LogConfig.from_kafka({"x.y": "1"}, strict=True)
    with pytest.raises(ValueError):
        LogConfig.from_kafka({"segment.bytes": "many"})


def test_readonly_reader_and_helpers(tmp_path: Path, fmt: int) -> None:
    log = open_log(fmt, tmp_path / "my-topic-3", LogConfig(segment_bytes=3000), now_ms=0)
    (tmp_path / "not-a-partition").mkdir()
    (tmp_path / "file-1").write_text("x")
    for _ in range(8):
        _append(log, 5)
    log.seal_pending()
    assert [(p.topic, p.partition) for p in list_partitions(tmp_path)] == [("my-topic", 3)]
    files = sorted(os.listdir(tmp_path / "my-topic-3"))
    ro = PartitionLog.open_readonly(tmp_path / "my-topic-3")
    assert ro.log_end_offset == 40 and ro.read_table().equals(log.read_table())
    with pytest.raises(ReadOnlyLog):
        ro.append(records(1), BatchMeta(0, 0, 1, 0, 0), now_ms=0)
    assert read_segments(tmp_path / "my-topic-3", 7, 30, max_offset=25).column("offset").to_pylist() == \
        list(range(7, 25))
    assert sorted(os.listdir(tmp_path / "my-topic-3")) == files


def test_rolls_on_size_age_and_index_size(tmp_path: Path, fmt: int) -> None:
    by_age = open_log(fmt, tmp_path / "t-0", LogConfig(segment_ms=1000), now_ms=0)
    _append(by_age, 2, now_ms=0)
    _append(by_age, 2, now_ms=999)
    assert by_age.segment_count == 1
    _append(by_age, 2, now_ms=1000)  # the active segment's first append was 1000 ms ago
    assert by_age.segment_base_offsets() == [0, 4]
    by_age.close()
    reopened = open_log(fmt, tmp_path / "t-0", LogConfig(segment_ms=1000), now_ms=5000)
    _append(reopened, 1, now_ms=1999)  # the age survives a restart (append times are stored)
    assert reopened.segment_count == 2
    _append(reopened, 1, now_ms=2000)
    assert reopened.segment_count == 3
    by_index = open_log(fmt, tmp_path / "t-1", LogConfig(segment_index_bytes=4 * 80), now_ms=0)
    for _ in range(9):
        _append(by_index, 1)
    assert by_index.segment_base_offsets() == [0, 4, 8]


def test_wire_size_drives_the_fetch_budget(tmp_path: Path, fmt: int) -> None:
    log = open_log(fmt, tmp_path / "t-0", now_ms=0)
    for _ in range(10):
        rb = records(5)
        log.append(rb, meta_for(rb), now_ms=0, wire_size=100)
    if fmt == 2:  # a format 2 batch counts exactly the bytes a fetch sends, whatever the hint
        size = len(log.read_wire(0, 1)[0])
        assert size != 100 and len(log.read(0, 3 * size)) == 3 and len(log.read_wire(0, 3 * size - 1)) == 2
        return
    assert len(log.read(0, 350)) == 3
    assert len(log.read(0, 99)) == 1
