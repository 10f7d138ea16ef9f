"""A RecordBatch v2 as a partition handles it: its single header, its records decoded at the log
end, a stored batch encoded again, and the producer's bytes patched for the wire cache."""

from __future__ import annotations

import struct
from typing import Any

import pylog.protocol.records as rec
from crc32c import crc32c
from pylog.protocol.errors import CorruptRecordBatch, MalformedRecords

from pylog.broker.datapath.wire_cache import WireBytes
from pylog.model import TIMESTAMP_TYPE_MASK

_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_U = struct.Struct(">I")
_H = struct.Struct(">h")
# byte positions in a RecordBatch v2 header
_PARTITION_LEADER_EPOCH_AT = 12
_CRC_AT = 17
_ATTRIBUTES_AT = 21
_MAX_TIMESTAMP_AT = 35


class InvalidRecordStructure(Exception):
    """Records inside a batch whose CRC holds do not parse (Kafka: InvalidRecordException)."""


def single_batch_header(records: memoryview | bytes) -> Any:
    """The header of ``records`` when they are exactly one well-formed batch (the common case,
    parsed without splitting the blob); None otherwise."""
    if len(records) < rec.HEADER_SIZE or _I.unpack_from(records, 8)[0] + 12 != len(records):
        return None
    try:
        return rec.parse_header(records)
    except CorruptRecordBatch:
        return None


def decode_at(view: memoryview, header: Any, base_offset: int, max_uncompressed_bytes: int) -> Any:
    """``decode_batch`` with offsets counted from ``base_offset`` (the log end offset), so the log
    stores the rows as they are instead of shifting the offset column on every append."""
    if rec.compute_crc(view) != header.crc:
        raise CorruptRecordBatch(f"record batch CRC mismatch (stored {header.crc:#010x})")
    try:
        return rec.decode_section(header.compression, view[rec.HEADER_SIZE :], header.record_count,
                                  base_offset, header.base_timestamp, max_uncompressed_bytes)
    except MalformedRecords as exc:  # the CRC held: the producer wrote malformed records
        raise InvalidRecordStructure(f"Found invalid record structure: {exc}") from None


def encode_stored(meta: Any, records: Any) -> bytes:
    """RecordBatch v2 bytes of a stored batch, reproducing its header fields."""
    return rec.encode_batch(
        records,
        base_offset=meta.base_offset,
        attributes=meta.attributes,
        producer_id=meta.producer_id,
        producer_epoch=meta.producer_epoch,
        base_sequence=meta.base_sequence,
        partition_leader_epoch=meta.partition_leader_epoch,
        max_timestamp=meta.max_timestamp,
        base_timestamp=meta.base_timestamp,
        last_offset_delta=meta.last_offset_delta,
    )


def rewrite_for_wire_cache(
    view: memoryview, base_offset: int, leader_epoch: int, append_time: int
) -> WireBytes:
    """The producer's batch with our base offset and epoch (LogAppendTime re-signs it)."""
    if append_time < 0:
        # baseOffset and partitionLeaderEpoch are outside the CRC: no re-signing. A batch that
        # is most of a writable request frame (a large produce request read into its own
        # buffer) is patched where it lies and kept as a view; otherwise one copy.
        frame = view.obj
        if not view.readonly and len(view) * 2 >= len(frame):  # type: ignore[arg-type]
            _Q.pack_into(view, 0, base_offset)
            _I.pack_into(view, _PARTITION_LEADER_EPOCH_AT, leader_epoch)
            return view
        return b"".join((_Q.pack(base_offset), view[8:12], _I.pack(leader_epoch), view[16:]))
    out = bytearray(view)
    _Q.pack_into(out, 0, base_offset)
    _I.pack_into(out, _PARTITION_LEADER_EPOCH_AT, leader_epoch)
    _H.pack_into(out, _ATTRIBUTES_AT, _H.unpack_from(out, _ATTRIBUTES_AT)[0] | TIMESTAMP_TYPE_MASK)
    _Q.pack_into(out, _MAX_TIMESTAMP_AT, append_time)
    _U.pack_into(out, _CRC_AT, crc32c(memoryview(out)[_ATTRIBUTES_AT:]))
    return bytes(out)
