"""Record batches and metadata for storage tests."""

from __future__ import annotations

import dataclasses
import os

import pyarrow as pa
from pylog.storage import RECORD_SCHEMA, BatchMeta, LogConfig, PartitionLog
from pylog.storage.onecopy import Rows

CONTROL = 0x20
TRANSACTIONAL = 0x10


def records(n: int, *, ts: int = 1_000, keys: list[bytes | None] | None = None,
            values: list[bytes | None] | None = None, value_size: int = 10,
            timestamps: list[int] | None = None, headers: bool = True) -> pa.RecordBatch:
    """`n` records with offsets 0..n-1 (a producer's batch before the log assigns offsets)."""
    keys = keys if keys is not None else [b"k%d" % i for i in range(n)]
    values = values if values is not None else [bytes([65 + i % 26]) * value_size for i in range(n)]
    timestamps = timestamps if timestamps is not None else [ts + i for i in range(n)]
    hdrs = [[{"key": "h", "value": b"%d" % i}] if headers else [] for i in range(n)]
    return pa.RecordBatch.from_arrays(
        [pa.array(range(n), pa.int64()), pa.array(timestamps, pa.timestamp("ms")),
         pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
         pa.array(hdrs, RECORD_SCHEMA.field("headers").type)],
        schema=RECORD_SCHEMA)


def meta_for(rb: pa.RecordBatch, *, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
             attributes: int = 0, leader_epoch: int = -1) -> BatchMeta:
    """Metadata a producer's batch header would carry for `rb` (base offset 0)."""
    ts = rb.column(1).cast(pa.int64()).to_pylist()
    n = rb.num_rows
    return BatchMeta(0, n - 1, n, ts[0], max(ts), producer_id, producer_epoch, base_sequence, attributes,
                     leader_epoch)


FORMATS = (1, 2)


def encode_stored(meta: BatchMeta, rows: pa.RecordBatch) -> bytes:
    """RecordBatch v2 bytes of a stored batch (what the broker gives a log as its `wire_encoder`)."""
    from pylog.protocol.records import encode_batch

    return encode_batch(rows, base_offset=meta.base_offset, attributes=meta.attributes,
                        producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
                        base_sequence=meta.base_sequence, partition_leader_epoch=meta.partition_leader_epoch,
                        max_timestamp=meta.max_timestamp, base_timestamp=meta.base_timestamp,
                        last_offset_delta=meta.last_offset_delta)


def decode_rows(batch: bytes | bytearray | memoryview, segment_compression: str) -> Rows:
    """Format 2 rows of a RecordBatch v2 at its own base offset (the broker's `rows_decoder`)."""
    from pylog.onecopy_kafka import rows_from_kafka

    base = int.from_bytes(bytes(batch[:8]), "big", signed=True)
    return rows_from_kafka(batch, base_offset=base, segment_compression=segment_compression)


def open_log(fmt: int, path: str | os.PathLike[str], config: LogConfig | None = None, *,
             now_ms: int = 0) -> PartitionLog:
    """`PartitionLog.open` writing segments in format `fmt`, with the Kafka codec a broker gives it."""
    config = dataclasses.replace(config or LogConfig(), segment_format=fmt)
    log = PartitionLog.open(path, config, now_ms=now_ms)
    log.wire_encoder = encode_stored
    log.rows_decoder = decode_rows
    return log
