"""Build producer-style record batches for tests."""

from __future__ import annotations

import pyarrow as pa
from pylog.protocol import records as rec


def make_batch(
    values: list[bytes],
    *,
    keys: list[bytes | None] | None = None,
    timestamp: int = 1_700_000_000_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: int = 0,
) -> bytes:
    n = len(values)
    table = pa.RecordBatch.from_arrays(
        [
            pa.array(range(n), pa.int64()),
            pa.array([timestamp + i for i in range(n)], pa.timestamp("ms")),
            pa.array(keys if keys is not None else [None] * n, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array([[] for _ in range(n)], rec.RECORD_SCHEMA.field("headers").type),
        ],
        schema=rec.RECORD_SCHEMA,
    )
    return rec.encode_batch(
        table,
        base_offset=0,
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


def values_of(records: bytes | memoryview | None) -> list[bytes]:
    if not records:
        return []
    out: list[bytes] = []
    for _, view in rec.iter_batches(records):
        batch = rec.decode_batch(view).records
        out += [v for v in batch.column("value").to_pylist()]
    return out


def offsets_of(records: bytes | memoryview | None) -> list[int]:
    if not records:
        return []
    out: list[int] = []
    for _, view in rec.iter_batches(records):
        out += rec.decode_batch(view).records.column("offset").to_pylist()
    return out
