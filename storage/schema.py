"""The record schema, the batch metadata a Kafka fetch must reproduce, and the on-disk entry layouts.

Every fixed-width file beside a segment is a flat array of little-endian records described by one
numpy dtype here; FORMAT.md documents the same layouts byte by byte.
"""

from __future__ import annotations

import operator
import struct
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from pylog.model import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    NO_PRODUCER_ID,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)


class BatchMeta(NamedTuple):
    """Header fields of one Kafka batch that the Arrow rows do not carry."""

    base_offset: int
    last_offset_delta: int
    record_count: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = -1
    base_sequence: int = -1
    attributes: int = 0
    partition_leader_epoch: int = -1

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


class StoredBatch(NamedTuple):
    """One Kafka batch as stored: its metadata and its rows (a zero-copy slice of a segment)."""

    meta: BatchMeta
    records: pa.RecordBatch


# `<base>.batches`: one entry per Kafka batch, in offset order (80 bytes).
BATCH_DTYPE = np.dtype(
    [
        ("base_offset", "<i8"),
        ("base_timestamp", "<i8"),
        ("max_timestamp", "<i8"),
        ("producer_id", "<i8"),
        ("append_time", "<i8"),
        ("delete_horizon", "<i8"),
        ("last_offset_delta", "<i4"),
        ("record_count", "<i4"),
        ("base_sequence", "<i4"),
        ("partition_leader_epoch", "<i4"),
        ("producer_epoch", "<i2"),
        ("attributes", "<i2"),
        ("message", "<i4"),
        ("row", "<i4"),
        ("size", "<i4"),
    ]
)
assert BATCH_DTYPE.itemsize == 80

# `<base>.index`: one entry per Arrow record batch message in the data file (32 bytes).
INDEX_DTYPE = np.dtype([("offset", "<i8"), ("position", "<i8"), ("length", "<i8"), ("batch", "<i8")])

# `<base>.timeindex`: one entry per Arrow record batch message (16 bytes); `timestamp` is the
# largest record timestamp in this and all earlier messages of the segment, so it never decreases.
TIME_DTYPE = np.dtype([("timestamp", "<i8"), ("offset", "<i8")])

META_FIELDS = BatchMeta._fields


def metas_from_entries(entries: np.ndarray) -> list[BatchMeta]:
    """Build BatchMetas for a slice of BATCH_DTYPE entries (column-wise, not field-by-field)."""
    cols = [entries[f].tolist() for f in META_FIELDS]
    return [BatchMeta(*row) for row in zip(*cols)]


def meta_of_entry(entries: np.ndarray, i: int = 0) -> BatchMeta:
    """The BatchMeta of one BATCH_DTYPE entry: its fields read as one tuple (an append's one
    batch costs one `item`, not a `tolist` per field)."""
    if entries.dtype != BATCH_DTYPE:
        return metas_from_entries(entries[i : i + 1])[0]
    return BatchMeta._make(_META_OF_ROW(entries[i].item()))


_BATCH_FIELDS: tuple[str, ...] = BATCH_DTYPE.names or ()
_META_OF_ROW = operator.itemgetter(*(_BATCH_FIELDS.index(f) for f in META_FIELDS))

BATCH_STRUCT = struct.Struct("<6q4i2h3i")
INDEX_STRUCT = struct.Struct("<4q")
TIME_STRUCT = struct.Struct("<2q")
assert BATCH_STRUCT.size == BATCH_DTYPE.itemsize
assert INDEX_STRUCT.size == INDEX_DTYPE.itemsize and TIME_STRUCT.size == TIME_DTYPE.itemsize


def pack_entry(m: BatchMeta, *, append_time: int, message: int, row: int, size: int,
               delete_horizon: int = -1) -> bytes:
    """One BATCH_DTYPE entry as bytes, for a batch about to be stored."""
    return BATCH_STRUCT.pack(
        m.base_offset, m.base_timestamp, m.max_timestamp, m.producer_id, append_time, delete_horizon,
        m.last_offset_delta, m.record_count, m.base_sequence, m.partition_leader_epoch,
        m.producer_epoch, m.attributes, message, row, size,
    )
