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

from typing import Any, NamedTuple

import numpy as np

from pylog.model import COMPRESSION_MASK, TIMESTAMP_TYPE_MASK
from pylog.protocol.errors import CorruptRecordBatch, MalformedRecords
from pylog.protocol.records import DEFAULT_MAX_UNCOMPRESSED_BYTES, decode_records, encode_batch, parse_header
from pylog.protocol.records.batch import walk_views, walk_views_many
from pylog.protocol.records.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress, decompress_records
from pylog.protocol.records.header import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, iter_batches, verify_crc
from pylog.storage.onecopy import KAFKA_HEADER_SIZE, Rows, batch_crc, rows_from_section
from pylog.storage.schema import BATCH_DTYPE, BatchMeta

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


# a run's batches' uncompressed records (held until it is walked) stay within this much, unless one
# batch alone is larger; the log still merges consecutive runs into messages of about
# SEALED_MESSAGE_BYTES of sections
_RUN_RAW_BYTES = 1 << 20


class FetchedRun(NamedTuple):
    """Consecutive batches of a fetch as one Rows (one Arrow message), with each batch's header
    and bytes."""

    rows: Rows
    batches: list[tuple[BatchHeader, memoryview]]


def rows_from_fetch(records: memoryview, *, log_end_offset: int, segment_compression: str = "producer",
                    max_uncompressed_bytes: int = DEFAULT_MAX_UNCOMPRESSED_BYTES,
                    ) -> tuple[list[FetchedRun], CorruptRecordBatch | None]:
    """A follower's fetched batches (those not wholly below `log_end_offset`) as format 2 rows:
    runs of plain, lz4 or zstd batches stored as they came are walked together (one C walk per
    run, no per-batch Rows), a run ending before `_RUN_RAW_BYTES` of uncompressed records or
    where lz4 and zstd would meet; a control batch, a section stored in another codec, or a run
    with a non-minimal varint goes through `rows_from_kafka` on its own. Returns the runs and the
    error of the first corrupt batch (the runs hold the batches before it)."""
    runs: list[FetchedRun] = []
    pending: list[tuple[BatchHeader, memoryview, memoryview, Any]] = []
    codecs = _STORED_CODEC[segment_compression]
    size, codec_of_run = 0, 0
    error: CorruptRecordBatch | None = None

    def single(header: BatchHeader, batch: memoryview) -> None:
        try:
            rows = rows_from_kafka(batch, base_offset=header.base_offset,
                                   segment_compression=segment_compression,
                                   max_uncompressed_bytes=max_uncompressed_bytes, header=header)
        except ValueError as exc:
            raise CorruptRecordBatch(f"batch at offset {header.base_offset}: {exc}") from exc
        runs.append(FetchedRun(rows, [(header, batch)]))

    def flush() -> None:
        nonlocal size, codec_of_run
        if pending:
            batch = list(pending)
            pending.clear()
            size, codec_of_run = 0, 0
            _walk_run(batch, runs, single)

    try:
        for header, batch in iter_batches(records):
            if header.base_offset + header.last_offset_delta < log_end_offset:
                continue
            codec = header.attributes & COMPRESSION_MASK
            if header.is_control or codecs.get(codec, codec) != codec:
                flush()
                single(header, batch)
                continue
            try:
                verify_crc(header, batch)
                section = batch[HEADER_SIZE:]
                raw = decompress_records(codec, section, max_uncompressed_bytes) if codec else section
            except CorruptRecordBatch:
                flush()  # the batches before it are appended
                raise
            except ValueError as exc:
                flush()
                raise CorruptRecordBatch(f"batch at offset {header.base_offset}: {exc}") from exc
            other_codec = bool(codec and codec_of_run and codec != codec_of_run)
            if pending and (size + len(raw) > _RUN_RAW_BYTES or other_codec):
                flush()
            pending.append((header, batch, section, raw))
            size += len(raw)
            codec_of_run = codec_of_run or codec
        flush()
    except CorruptRecordBatch as exc:
        error = exc
    return runs, error


def _walk_run(batches: list[tuple[BatchHeader, memoryview, memoryview, Any]], runs: list[FetchedRun],
              single: Any) -> None:
    """One Rows of consecutive batches stored as they came (their sections untouched)."""
    headers = [b[0] for b in batches]
    walk, canonical, error = walk_views_many([b[3] for b in batches], [h.record_count for h in headers],
                                             [h.base_offset for h in headers],
                                             [h.base_timestamp for h in headers])
    done = len(canonical)
    if not all(canonical):  # written by no known client: each batch on its own (re-encoded)
        for header, batch, _section, _raw in batches[:done]:
            single(header, batch)
    elif done:
        counts = [h.record_count for h in headers[:done]]
        starts = np.cumsum([0, *counts[:-1]]).tolist()
        entries = np.array([(h.base_offset, h.base_timestamp, h.max_timestamp, h.producer_id, -1, -1,
                             h.last_offset_delta, h.record_count, h.base_sequence, h.partition_leader_epoch,
                             h.producer_epoch, h.attributes, 0, row, KAFKA_HEADER_SIZE + len(b[2]))
                            for h, b, row in zip(headers, batches, starts)], BATCH_DTYPE)
        rows = Rows(
            entries=entries,
            crcs=np.array([h.crc for h in headers[:done]], np.uint32),
            sections=[b[2] for b in batches[:done]],
            raw_sizes=np.array([len(b[3]) if h.attributes & COMPRESSION_MASK else -1
                                for h, b in zip(headers, batches[:done])], np.int64),
            offset=walk.offset, timestamp=walk.timestamp, key=walk.key, key_valid=walk.key_valid,
            value=walk.value, value_valid=walk.value_valid, header_offsets=walk.header_offsets,
            header_key=walk.header_key, header_value=walk.header_value,
            header_value_valid=walk.header_value_valid)
        runs.append(FetchedRun(rows, [(b[0], b[1]) for b in batches[:done]]))
    if error is not None:
        raise MalformedRecords(error)
