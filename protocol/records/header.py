"""The 61-byte RecordBatch v2 header: parse, validate, split a records blob, rewrite the base offset."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from crc32c import crc32c

from pylog.model import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)

from ..errors import CorruptRecordBatch

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER_STRUCT.size  # 61
LOG_OVERHEAD = 12  # baseOffset + length: the bytes not counted by `length`
MAGIC = 2
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers from here to the end of the batch
PARTITION_LEADER_EPOCH_OFFSET = 12
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD


class BatchHeader(NamedTuple):
    """The fixed header of a RecordBatch v2, field for field (Kafka's names, snake_case)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def size_in_bytes(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse and structurally validate the header at ``pos`` (the batch body may be absent)."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordBatch(f"record batch header needs {HEADER_SIZE} bytes, got {len(buf) - pos}")
    header = BatchHeader._make(HEADER_STRUCT.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise CorruptRecordBatch(f"unsupported record batch magic {header.magic} (only v2)")
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordBatch(f"record batch length {header.batch_length} below the header size")
    if header.record_count < 0:
        raise CorruptRecordBatch(f"negative record count {header.record_count}")
    return header


def compute_crc(batch: bytes | bytearray | memoryview) -> int:
    """CRC-32C of attributes..end, as stored in the header's crc field."""
    return crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:])


def verify_crc(header: BatchHeader, batch: bytes | bytearray | memoryview) -> None:
    actual = compute_crc(batch)
    if actual != header.crc:
        raise CorruptRecordBatch(
            f"record batch CRC mismatch: stored {header.crc:#010x}, computed {actual:#010x}"
        )


def iter_batches(buf: bytes | bytearray | memoryview) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Split a records blob into whole batches (header, zero-copy view of the full batch).

    A trailing partial batch (as a fetch response may carry) ends the iteration silently;
    a batch whose header is broken raises CorruptRecordBatch. CRCs are not checked here.
    """
    mv = memoryview(buf).cast("B")
    pos = 0
    total = len(mv)
    while total - pos >= LOG_OVERHEAD:
        (length,) = struct.unpack_from(">i", mv, pos + 8)
        if length < MIN_BATCH_LENGTH:
            raise CorruptRecordBatch(f"record batch length {length} below the header size")
        end = pos + LOG_OVERHEAD + length
        if end > total:
            return
        header = parse_header(mv, pos)
        yield header, mv[pos:end]
        pos = end


def set_base_offset(
    buf: bytes | bytearray | memoryview, base_offset: int, partition_leader_epoch: int | None = None
) -> bytes:
    """Rewrite baseOffset (and optionally partitionLeaderEpoch); neither is covered by the CRC."""
    out = bytearray(buf)
    if len(out) < HEADER_SIZE:
        raise CorruptRecordBatch("record batch shorter than its header")
    struct.pack_into(">q", out, 0, base_offset)
    if partition_leader_epoch is not None:
        struct.pack_into(">i", out, PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
    return bytes(out)
