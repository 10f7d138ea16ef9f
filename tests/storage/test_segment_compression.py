"""Segment body compression (`pylog.segment.compression`): compressed batches stay compressed on
disk as Arrow IPC buffer compression, and every reader still sees the same rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from pylog.storage import LogConfig, PartitionLog, read_segments
from pylog.storage.ipc import MIN_COMPRESSED_BODY, block_kafka_codec, body_codec
from pylog.storage.schema import BATCH_DTYPE
from storage_helpers import meta_for, records

LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
ZSTD_FRAME_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4


def _big(n: int = 2000) -> pa.RecordBatch:
    return records(n, values=[(b"pylog record %08d " % i) * 40 for i in range(n)])


def _log(path: Path, policy: str = "producer") -> PartitionLog:
    return PartitionLog.open(path, LogConfig(segment_compression=policy), now_ms=0)


def _data(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(path.iterdir()) if p.suffix in (".arrows", ".arrow"))


def test_the_body_codec_follows_the_producer_and_the_policy() -> None:
    big = MIN_COMPRESSED_BODY
    assert [body_codec("producer", c, big) for c in range(5)] == [None, "zstd", "lz4", "lz4", "zstd"]
    assert body_codec("producer", LZ4 | 0x10, big) == "lz4"  # other attribute bits do not matter
    assert body_codec("producer", LZ4, big - 1) is None  # small bodies stay plain
    assert body_codec("none", LZ4, big) is None
    assert body_codec("zstd", 0, big) == "zstd" and body_codec("lz4", ZSTD, big) == "lz4"


def test_a_block_takes_the_codec_of_most_of_its_records() -> None:
    e = np.zeros(3, BATCH_DTYPE)
    e["attributes"] = [LZ4, 0, ZSTD]
    e["record_count"] = [5, 3, 10]
    assert block_kafka_codec(e) == ZSTD
    assert block_kafka_codec(e[:2]) == LZ4
    assert block_kafka_codec(e[:0]) == 0


@pytest.mark.parametrize(("attributes", "magic"), [(LZ4, LZ4_FRAME_MAGIC), (GZIP, ZSTD_FRAME_MAGIC)])
def test_compressed_batches_are_stored_compressed_and_read_back_unchanged(
    tmp_path: Path, attributes: int, magic: bytes
) -> None:
    path = tmp_path / "t-0"
    log = _log(path)
    rb = _big()
    log.append(rb, meta_for(rb, attributes=attributes), now_ms=0)
    plain = rb.get_total_buffer_size()
    stored = _data(path)
    assert len(stored) < plain // 5 and magic in stored
    got = log.read(0, 1 << 30)
    assert len(got) == 1 and got[0].meta.compression == attributes
    assert got[0].records.column("value").equals(rb.column("value"))
    # Any Arrow reader opens the active segment as a stream.
    with ipc.open_stream(next(path.glob("*.arrows")).read_bytes()) as reader:
        assert reader.read_all().column("value").to_pylist() == rb.column("value").to_pylist()
    log.close()


def test_sealed_segments_stay_compressed_and_open_in_pyarrow_and_polars(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = _log(path)
    rb = _big()
    for _ in range(3):
        log.append(rb, meta_for(rb, attributes=LZ4), now_ms=0)
    log.roll()
    assert log.seal_pending() == 1
    sealed = next(path.glob("*.arrow"))
    assert sealed.stat().st_size < 3 * rb.get_total_buffer_size() // 5
    assert LZ4_FRAME_MAGIC in sealed.read_bytes()
    table = ipc.open_file(sealed.read_bytes()).read_all()
    assert table.num_rows == 3 * rb.num_rows
    assert table.column("offset").to_pylist() == list(range(3 * rb.num_rows))
    frame = pl.read_ipc(sealed)
    assert frame.height == 3 * rb.num_rows and frame["value"][0] == rb.column("value")[0].as_py()
    assert read_segments(path).column("value").equals(table.column("value"))
    assert [b.meta.base_offset for b in log.read(0, 1 << 30)] == [0, 2000, 4000]
    log.close()


def test_policy_none_and_small_batches_store_plain_bodies(tmp_path: Path) -> None:
    rb = _big()
    plain_log = _log(tmp_path / "a-0", "none")
    plain_log.append(rb, meta_for(rb, attributes=LZ4), now_ms=0)
    assert len(_data(tmp_path / "a-0")) > rb.get_total_buffer_size()
    plain_log.close()

    small = records(3)
    small_log = _log(tmp_path / "b-0")
    small_log.append(small, meta_for(small, attributes=LZ4), now_ms=0)
    assert LZ4_FRAME_MAGIC not in _data(tmp_path / "b-0")
    small_log.close()

    forced = _log(tmp_path / "c-0", "zstd")
    forced.append(rb, meta_for(rb), now_ms=0)  # an uncompressed batch, compressed by topic policy
    stored = _data(tmp_path / "c-0")
    assert ZSTD_FRAME_MAGIC in stored and len(stored) < rb.get_total_buffer_size() // 5
    assert forced.read_table().column("value").to_pylist() == rb.column("value").to_pylist()
    forced.close()


def test_a_compressed_log_reopens_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = _log(path)
    rb = _big()
    for _ in range(2):
        log.append(rb, meta_for(rb, attributes=ZSTD), now_ms=0)
    log.close()
    for side in path.glob("*.index"):
        side.unlink()  # rebuilt from the compressed data on open
    again = _log(path)
    assert again.log_end_offset == 2 * rb.num_rows
    assert again.read_table().column("value").to_pylist() == rb.column("value").to_pylist() * 2
    again.close()


def test_the_topic_config_is_validated() -> None:
    with pytest.raises(ValueError, match=r"pylog\.segment\.compression"):
        LogConfig.from_kafka({"pylog.segment.compression": "brotli"})
    assert LogConfig.from_kafka({"pylog.segment.compression": "lz4"}).segment_compression == "lz4"
