"""Kafka batches -> format 2 ("one copy") rows: the codec work `pylog.storage.onecopy` leaves out.

A producer's lz4 or zstd section is stored as it came (decompressed once, to find the records'
byte positions; never recompressed), or plain under `pylog.segment.compression=none` (the bytes
that decompression gave); a plain section as it came. gzip and snappy have no Arrow
IPC buffer codec: such a section is decompressed once and stored as the topic's
`pylog.segment.compression` says ("producer" and "none": plain, which every client reads; "lz4" /
"zstd": that codec), the batch's codec bits and CRC following, as Kafka's own broker does when a
topic's `compression.type` differs from the producer's. The records are walked once for their
fields' views (`walk_views`: no copies of keys or values). A section whose varints are
not minimal (legal, written by no known client) is re-encoded canonically with its batch's codec.
"""

from __future__ import annotations

from typing import Any

from pylog.model import COMPRESSION_MASK, TIMESTAMP_TYPE_MASK
from pylog.protocol.records import DEFAULT_MAX_UNCOMPRESSED_BYTES, decode_records, encode_batch, parse_header
from pylog.protocol.records.batch import walk_views
from pylog.protocol.records.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress, decompress_records
from pylog.protocol.records.header import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, verify_crc
from pylog.storage.onecopy import Rows, batch_crc, rows_from_section
from pylog.storage.schema import BatchMeta

# "producer": plain, which every client reads (a gzip-only consumer, e.g. kafkajs without codec
# plugins, cannot read the zstd or lz4 an Arrow codec would need)
_STORED_CODEC = {"producer": {GZIP: NONE, SNAPPY: NONE},
                 "none": {GZIP: NONE, SNAPPY: NONE, LZ4: NONE, ZSTD: NONE},
                 "lz4": {GZIP: LZ4, SNAPPY: LZ4}, "zstd": {GZIP: ZSTD, SNAPPY: ZSTD}}


def rows_from_kafka(batch: bytes | bytearray | memoryview, *, base_offset: int,
                    partition_leader_epoch: int | None = None, log_append_time: int | None = None,
                    segment_compression: str = "producer",
                    max_uncompressed_bytes: int = DEFAULT_MAX_UNCOMPRESSED_BYTES,
                    verify: bool = True, header: BatchHeader | None = None) -> Rows:
    """Format 2 rows for one RecordBatch v2 as a producer sent it, stored at `base_offset` (and
    `partition_leader_epoch`, when given); `log_append_time` marks it LogAppendTime at that time.
    `header` is the batch's parsed header when the caller has it (`iter_batches`). Bad input
    raises the codec's CorruptRecordBatch / MalformedRecords."""
    mv = batch if type(batch) is memoryview and batch.format == "B" else memoryview(batch).cast("B")
    h = parse_header(mv) if header is None else header
    if len(mv) != LOG_OVERHEAD + h.batch_length:
        mv = mv[:LOG_OVERHEAD + h.batch_length]
    if verify:
        verify_crc(h, mv)
    section: Any = mv[HEADER_SIZE:]
    codec = h.attributes & COMPRESSION_MASK
    attributes, crc, max_ts = h.attributes, h.crc, h.max_timestamp
    raw = decompress_records(codec, section, max_uncompressed_bytes) if codec else section
    stored = _STORED_CODEC[segment_compression].get(codec, codec)
    if stored != codec:
        section = compress(stored, raw) if stored else raw
        attributes = (attributes & ~COMPRESSION_MASK) | stored
        crc = -1
    if log_append_time is not None:
        attributes |= TIMESTAMP_TYPE_MASK
        max_ts, crc = log_append_time, -1
    epoch = h.partition_leader_epoch if partition_leader_epoch is None else partition_leader_epoch
    meta = BatchMeta(base_offset, h.last_offset_delta, h.record_count, h.base_timestamp, max_ts,
                     h.producer_id, h.producer_epoch, h.base_sequence, attributes, epoch)
    if crc == -1:
        crc = batch_crc(meta, section)
    walk = walk_views(raw, h.record_count, base_offset, h.base_timestamp)
    if walk.canonical:
        return rows_from_section(meta, crc, section, len(raw), walk, log_append_time=log_append_time)
    records = decode_records(raw, h.record_count, base_offset, h.base_timestamp)
    again = encode_batch(records, base_offset=base_offset, attributes=attributes & ~TIMESTAMP_TYPE_MASK,
                         producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                         base_sequence=h.base_sequence, partition_leader_epoch=epoch,
                         base_timestamp=h.base_timestamp, max_timestamp=h.max_timestamp,
                         last_offset_delta=h.last_offset_delta)
    return rows_from_kafka(again, base_offset=base_offset, partition_leader_epoch=epoch,
                           log_append_time=log_append_time, segment_compression=segment_compression,
                           max_uncompressed_bytes=max_uncompressed_bytes, verify=False)
