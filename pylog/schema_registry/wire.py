"""The Schema Registry wire format: magic byte 0, a big-endian 4-byte schema id, the payload.

Protobuf payloads carry the message indexes (a zig-zag varint count, then the indexes) between
the id and the message; ``[0]`` is written as a single 0 byte.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MAGIC_BYTE = 0
HEADER_SIZE = 5


def frame(schema_id: int, payload: bytes) -> bytes:
    return bytes([MAGIC_BYTE]) + schema_id.to_bytes(4, "big") + payload


def schema_ids(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(schema id per element, whether the element is in the wire format) for a binary array.

    Vectorised: reads byte 0 and bytes 1-4 of every element through the offsets buffer. Nulls and
    elements shorter than the header are not in the wire format (their id is -1).
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not (pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type)):
        values = values.cast(pa.binary())
    n = len(values)
    if n == 0:
        return np.empty(0, np.int64), np.empty(0, bool)
    width = np.int64 if pa.types.is_large_binary(values.type) else np.int32
    start = values.offset * np.dtype(width).itemsize  # a slice's first offset, in bytes
    offsets = np.frombuffer(values.buffers()[1], width, n + 1, start).astype(np.int64)
    data_buf = values.buffers()[2]
    data = (
        np.frombuffer(data_buf, np.uint8) if data_buf is not None and data_buf.size else np.zeros(1, np.uint8)
    )
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    ok = lengths >= HEADER_SIZE
    if values.null_count:
        ok &= np.asarray(pc.is_valid(values).to_numpy(zero_copy_only=False))
    safe = np.where(ok, starts, 0)
    if data.size < HEADER_SIZE:
        data = np.concatenate([data, np.zeros(HEADER_SIZE, np.uint8)])
    ok &= data[safe] == MAGIC_BYTE
    ids = (
        (data[safe + 1].astype(np.int64) << 24)
        | (data[safe + 2].astype(np.int64) << 16)
        | (data[safe + 3].astype(np.int64) << 8)
        | data[safe + 4].astype(np.int64)
    )
    ids = np.where(ok, ids, -1)
    return ids, ok
