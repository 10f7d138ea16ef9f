"""PartitionLog: the segments of one partition directory behind Kafka's log operations.

Theory of operation. The last segment is active (an appendable IPC stream); every other segment is
immutable. Appends write to the active segment only (data, then side files) and roll it by size,
age or index size; a rolled stream stays readable as is until a background job (`seal_pending`)
rewrites it as an IPC file. Background jobs (sealing, compaction) go through one segment-rewrite
API, `rewrite` (log_jobs.py): they claim segments (marked busy, snapshotted under the lock of the
log's `SegmentSet`), build new files without any lock and swap them in through the set after it
checked that their segment is still current (`retired` tells them it was truncated or deleted
meanwhile). Reads, appends and structural changes (roll, truncation, retention) take the same
lock, so a reader sees each segment either before or after a swap, never in between. The log
end offset lives in memory and is rebuilt from the data on open; the log start offset and the
leader epoch cache are checkpointed. Each segment is in format 1 (Arrow columns, `.wire`) or 2 (one
copy: views into the producers' records sections, `onecopy.py`); `pylog.segment.format` chooses
the format of new segments, and reads serve both (FORMAT.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from pylog.model import CONTROL_MASK, LONG_MAX, RECORD_SCHEMA, TIMESTAMP_TYPE_MASK

from . import onecopy as oc
from .checkpoint import (
    LEADER_EPOCH_FILE,
    LOG_START_OFFSET_FILE,
    LeaderEpochCache,
    read_log_start_offset,
    write_log_start_offset,
)
from .compaction import CompactionResult, compact_log
from .config import LogConfig
from .errors import InvalidAppend, InvalidRecord, OffsetOutOfRange, ReadOnlyLog
from .files import fsync_dir
from .ipc import body_codec
from .log_jobs import SegmentJobs, SegmentRewrite
from .partition_dir import PARTITION_RE, load_segments
from .rewrite import Block, recover_swaps, write_rows_segment, write_segment
from .schema import BATCH_DTYPE, BatchMeta, StoredBatch, meta_of_entry, metas_from_entries
from .segment import SIDE_EXTS, Segment, SegmentSnapshot
from .segment_set import SegmentSet
from .wire import WireEncoder, WireSource

READ_CHUNK = 4096  # batch entries examined at a time by read()
READONLY_LIST_ATTEMPTS = 5  # listings retried by open_readonly while a writer seals or deletes


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """A segment's offsets ``[base_offset, next_offset)``, size, largest timestamp and files
    (data, index, time index, batches; the data file is the ``.arrow`` one once sealed)."""

    base_offset: int
    next_offset: int
    size_bytes: int
    max_timestamp: int
    sealed: bool
    files: tuple[Path, ...]


class PartitionLog:
    """The log of one partition; see the module docstring."""

    def __init__(self, directory: Path, config: LogConfig, *, readonly: bool) -> None:
        self.dir = directory
        self.config = config
        self.readonly = readonly
        m = PARTITION_RE.match(directory.name)
        self.topic: str | None = m.group(1) if m else None
        self.partition: int | None = int(m.group(2)) if m else None
        self._set = SegmentSet()
        self._lock = self._set.lock
        self._jobs = SegmentJobs(self, self._set)
        self._log_start_offset = 0
        self._log_end_offset = 0
        self._unflushed = 0
        self._last_flush_ms = 0
        self._dir_dirty = False
        # compaction's: the earliest delete horizon of a tombstone or marker it kept (a run is due
        # once it passes); known in memory only, like which segments are clean
        self.clean_horizon_ms = LONG_MAX
        self._epochs = LeaderEpochCache(directory / LEADER_EPOCH_FILE, readonly=readonly)
        # Encodes a stored batch to RecordBatch v2 (the owner's codec); when set, segments sealed
        # or compacted get a `.wire` file that `read_wire` serves without encoding (see wire.py).
        self.wire_encoder: WireEncoder | None = None
        # Format 2 (`pylog.segment.format`): Rows of a RecordBatch v2 (the owner's Kafka codec);
        # `append` of Arrow rows and compaction of a batch that loses records need it with
        # `wire_encoder` (appends of the producer's batch go through `append_rows`, which does not)
        self.rows_decoder: oc.RowsDecoder | None = None

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str], config: LogConfig | None = None, *,
             now_ms: int) -> PartitionLog:
        """Open (creating if missing) a partition directory for writing; recovers an interrupted
        swap and a torn active segment. Reads no record data of sealed segments."""
        directory = Path(path)
        directory.mkdir(parents=True, exist_ok=True)
        log = cls(directory, config or LogConfig(), readonly=False)
        recover_swaps(directory)
        fmt = log.config.segment_format
        segments = load_segments(directory, readonly=False, default_format=fmt)
        lso = read_log_start_offset(directory)
        if not segments:
            segments = [Segment.create(directory, lso, fmt)]
            log._dir_dirty = True
        elif segments[-1].sealed:
            segments.append(Segment.create(directory, max(segments[-1].next_offset, lso), fmt))
            log._dir_dirty = True
        if lso > segments[-1].next_offset:  # an interrupted truncation below the log start offset
            segments[-1].close()
            segments.append(Segment.create(directory, lso, fmt))
            log._dir_dirty = True
        log._set_segments(segments)
        log._log_end_offset = segments[-1].next_offset
        if log.config.remote_storage_enable and (directory / LOG_START_OFFSET_FILE).exists():
            # the remote tier holds what lies below the local segments: the checkpoint is the start
            log._log_start_offset = lso
        else:
            log._log_start_offset = max(lso, segments[0].base_offset)
        log._last_flush_ms = now_ms
        # not written now (redone at every open): the next change of the cache or close writes it
        log._epochs.truncate_from_end(log._log_end_offset, defer=True)
        log._epochs.truncate_from_start(log._log_start_offset, defer=True)
        return log

    @classmethod
    def open_readonly(cls, path: str | os.PathLike[str], config: LogConfig | None = None) -> PartitionLog:
        """Open a partition directory another process may be writing, for reading only: never
        writes, truncates or deletes; ignores a torn tail and side entries past the data. The view
        is fixed at open (reopen to see newer data)."""
        directory = Path(path)
        if not directory.is_dir():
            raise FileNotFoundError(directory)
        log = cls(directory, config or LogConfig(), readonly=True)
        for attempt in range(READONLY_LIST_ATTEMPTS):  # a file listed may be sealed or deleted at once
            try:
                segments = load_segments(directory, readonly=True)
                break
            except FileNotFoundError:
                if attempt == READONLY_LIST_ATTEMPTS - 1 or not directory.is_dir():
                    raise
        lso = read_log_start_offset(directory)
        log._set_segments(segments)
        log._log_end_offset = segments[-1].next_offset if segments else lso
        log._log_start_offset = max(lso, segments[0].base_offset) if segments else lso
        return log

    @property
    def _segments(self) -> tuple[Segment, ...]:
        return self._set.segments

    def _set_segments(self, segments: list[Segment] | tuple[Segment, ...]) -> None:
        self._set.set(segments)

    def _check_writable(self) -> None:
        if self.readonly:
            raise ReadOnlyLog(str(self.dir))

    # -- properties ----------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def local_log_start_offset(self) -> int:
        """The first offset held on local disk; above the log start offset once the remote tier
        holds the oldest segments (the same offset otherwise)."""
        segs = self._segments
        return max(self._log_start_offset, segs[0].base_offset) if segs else self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.data_size for s in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def latest_epoch(self) -> int:
        return self._epochs.latest_epoch

    def epoch_entries(self) -> list[tuple[int, int]]:
        return self._epochs.entries()

    def segment_base_offsets(self) -> list[int]:
        return list(self._set.bases)

    # -- appending -----------------------------------------------------------------------------

    def append(self, records: pa.RecordBatch, meta: BatchMeta, *, now_ms: int,
               base_offset: int | None = None, wire_size: int | None = None,
               wire: WireSource | None = None) -> BatchMeta:
        """Append one Kafka batch. As leader (`base_offset` None) it is assigned the log end offset
        and, under LogAppendTime, the append time; a follower passes the leader's base offset
        (>= the log end offset; gaps allowed). The `offset` column is shifted by the same amount
        as the base offset. `wire_size` (the producer's batch size in bytes) is what fetch budgets
        count for this batch; without it the Arrow size of the records is used. `wire` gives the
        batch's RecordBatch v2 bytes for its stored metadata (called once, under the log lock);
        with `pylog.segment.wire` they go to the active segment's `.wire`, which sealing keeps
        instead of encoding every batch again (wire.py). Returns the stored
        metadata. On return the bytes are in the kernel (fsync follows flush.messages / flush.ms).
        Under format 2 the batch's bytes (`wire`, else `wire_encoder`) are decoded with
        `rows_decoder` and appended with `append_rows`; a log without `rows_decoder` (or without
        any source of the bytes) cannot build format 2 from Arrow rows and writes format 1."""
        self._check_writable()
        n = records.num_rows
        if n == 0:
            raise InvalidAppend("empty batch")
        if not records.schema.equals(RECORD_SCHEMA):
            try:
                records = records.cast(RECORD_SCHEMA)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
                raise InvalidAppend(f"records do not match RECORD_SCHEMA: {exc}") from exc
        if meta.last_offset_delta < n - 1:
            raise InvalidAppend(f"{n} records but last offset delta {meta.last_offset_delta}")
        offset_col, ts_col = records.column(0), records.column(1)
        offsets = _int64_values(offset_col)
        first, last = int(offsets[0]), int(offsets[-1])
        if offset_col.null_count or first < meta.base_offset or last > meta.last_offset:
            raise InvalidAppend(f"offsets {first}..{last} outside the batch's {meta.base_offset}.."
                                f"{meta.last_offset}")
        if self.config.compact and not meta.is_control and records.column(2).null_count:
            raise InvalidRecord("compacted topic: records must have a key")
        if self.config.segment_format == 2 and self.rows_decoder is not None and (
                wire is not None or self.wire_encoder is not None):
            return self._append_encoded(records, meta, now_ms, base_offset, wire)
        with self._lock:
            leo = self._log_end_offset
            base = leo if base_offset is None else base_offset
            if base < leo:
                raise InvalidAppend(f"base offset {base} is below the log end offset {leo}")
            if base != meta.base_offset:
                moved = pa.py_buffer(offsets + (base - meta.base_offset))
                shifted = pa.Array.from_buffers(pa.int64(), n, [None, moved])
                records = records.set_column(0, RECORD_SCHEMA.field(0), shifted)
            attributes, base_ts, max_ts = meta.attributes, meta.base_timestamp, meta.max_timestamp
            if base_offset is None and self.config.message_timestamp_type == "LogAppendTime":
                ts = pa.array(np.full(n, now_ms, dtype="datetime64[ms]"), RECORD_SCHEMA.field(1).type)
                records = records.set_column(1, RECORD_SCHEMA.field(1), ts)
                attributes |= TIMESTAMP_TYPE_MASK
                base_ts = max_ts = now_ms
            elif ts_col.null_count == 0:
                ts = _int64_values(ts_col)
                max_ts = max(max_ts, int(ts[0] if n == 1 else ts.max()))
            stored = BatchMeta(base, meta.last_offset_delta, n, base_ts, max_ts, meta.producer_id,
                               meta.producer_epoch, meta.base_sequence, attributes,
                               meta.partition_leader_epoch)
            buffer_size = records.get_total_buffer_size()
            self._maybe_roll(buffer_size, now_ms, 1)
            size = buffer_size if wire_size is None else wire_size
            codec = body_codec(self.config.segment_compression, attributes, buffer_size)
            sent = wire(stored) if wire is not None else None
            if sent is not None:
                size = len(sent)  # exactly what a fetch sends
            if not self.config.segment_wire:
                sent = None
            self._segments[-1].append(records, stored, now_ms, size, codec, sent)
            self._appended(stored, n, now_ms)
        return stored

    def _append_encoded(self, records: pa.RecordBatch, meta: BatchMeta, now_ms: int,
                        base_offset: int | None, wire: WireSource | None) -> BatchMeta:
        """Format 2 `append` of Arrow rows: their RecordBatch v2 bytes decoded to Rows."""
        decode = self.rows_decoder
        assert decode is not None
        raw = wire(meta) if wire is not None else self.wire_encoder(meta, records)  # type: ignore[misc]
        try:
            rows = decode(raw, self.config.segment_compression)
        except ValueError as exc:
            raise InvalidAppend(f"batch cannot be stored: {exc}") from exc
        return self.append_rows(rows, now_ms=now_ms, base_offset=base_offset, owned=True)

    def append_rows(
        self, rows: oc.Rows, *, now_ms: int, base_offset: int | None = None, owned: bool = False
    ) -> BatchMeta:
        """Append one Kafka batch given as format 2 Rows (`pylog.onecopy_kafka.rows_from_kafka` of
        the producer's or the leader's RecordBatch v2: decompressed once, never recompressed). As
        leader (`base_offset` None) it is assigned the log end offset and, under LogAppendTime, the
        append time (the CRC is signed again); a follower passes the leader's base offset. The
        leader epoch is the one the Rows carry. A format 2 log writes the section once; a format 1
        log stores Arrow columns (and the batch's bytes in `.wire`). Returns the stored metadata.
        `owned`: the caller hands the Rows over (made for this append, not read again), so the
        segment writes their batch entries in place instead of a copy."""
        self._check_writable()
        if len(rows.entries) != 1:
            raise InvalidAppend(f"append_rows takes one Kafka batch, not {len(rows.entries)}")
        n = rows.num_rows
        if n == 0:
            raise InvalidAppend("empty batch")
        e0 = rows.entries[0]
        if int(e0["last_offset_delta"]) < n - 1 or int(rows.offset[-1]) - int(rows.offset[0]) > int(
                e0["last_offset_delta"]):
            raise InvalidAppend(f"{n} records but last offset delta {int(e0['last_offset_delta'])}")
        control = bool(int(e0["attributes"]) & CONTROL_MASK)
        if (self.config.compact and not control and rows.key_valid is not None
                and not rows.key_valid.all()):
            raise InvalidRecord("compacted topic: records must have a key")
        if self.config.segment_format != 2:
            return self._append_rows_as_arrow(rows, now_ms, base_offset)
        with self._lock:
            leo = self._log_end_offset
            base = leo if base_offset is None else base_offset
            if base < leo:
                raise InvalidAppend(f"base offset {base} is below the log end offset {leo}")
            rows = oc.at_base_offset(rows, base)
            if base_offset is None and self.config.message_timestamp_type == "LogAppendTime":
                rows = oc.at_append_time(rows, now_ms)
            else:
                rows = oc.with_header_timestamps(rows)
            if not owned:
                rows = dataclasses.replace(rows, entries=rows.entries.copy())
            self._maybe_roll(int(rows.entries["size"][0]), now_ms, 2)
            self._segments[-1].append_rows(rows, now_ms)
            stored = meta_of_entry(rows.entries)
            self._appended(stored, n, now_ms)
        return stored

    def append_replicated_rows(self, parts: Sequence[oc.Rows], *, now_ms: int) -> list[BatchMeta]:
        """A follower's append of the leader's batches as format 2 Rows of one or more consecutive
        batches each (`pylog.onecopy_kafka.rows_from_fetch`) at the leader's base offsets and
        epochs (in offset order, the first at or past the log end): under format 2 consecutive
        batches share one Arrow message of about `SEALED_MESSAGE_BYTES` (one write per fetched
        run, not per batch); under format 1 each batch goes through `append_rows`. Returns the
        stored metadata of each batch."""
        self._check_writable()
        if self.config.segment_format != 2:
            return [self.append_rows(one, now_ms=now_ms, base_offset=int(one.entries["base_offset"][0]))
                    for rows in parts for one in oc.split_batches(rows)]
        if not parts:
            return []
        e = parts[0].entries if len(parts) == 1 else np.frombuffer(  # not np.concatenate: field promotion
            b"".join([r.entries.tobytes() for r in parts]), BATCH_DTYPE)
        counts = e["record_count"]
        if (not len(e) or int(counts.min()) <= 0 or bool((e["last_offset_delta"] < counts - 1).any())
                or sum(r.num_rows for r in parts) != int(counts.sum())):
            raise InvalidAppend("each part must be non-empty Kafka batches")
        last = e["base_offset"] + e["last_offset_delta"]
        if len(e) > 1 and bool((e["base_offset"][1:] <= last[:-1]).any()):
            raise InvalidAppend("batches out of offset order")
        stored: list[BatchMeta] = []
        with self._lock:
            leo = self._log_end_offset
            if int(parts[0].entries["base_offset"][0]) < leo:
                raise InvalidAppend(f"base offset {int(parts[0].entries['base_offset'][0])} is below the "
                                    f"log end offset {leo}")
            ready = [oc.with_header_timestamps(r) for r in parts]
            for group in oc.group_for_message(ready, oc.SEALED_MESSAGE_BYTES):
                group = dataclasses.replace(group, entries=group.entries.copy())
                self._maybe_roll(int(group.entries["size"].sum()), now_ms, 2)
                self._segments[-1].append_rows(group, now_ms)
                for meta in metas_from_entries(group.entries):
                    self._appended(meta, meta.record_count, now_ms)
                    stored.append(meta)
        return stored

    def _append_rows_as_arrow(self, rows: oc.Rows, now_ms: int, base_offset: int | None) -> BatchMeta:
        """Format 1 `append_rows`: the Rows' Arrow columns and, for `.wire`, their batch's bytes."""
        message = oc.encode_message(rows)
        raw = b"".join(message.chunks)
        records = oc.to_record_schema(pa.ipc.read_record_batch(pa.py_buffer(raw), oc.SCHEMA_V2))
        meta = metas_from_entries(rows.entries)[0]
        section = rows.sections[0]
        crc = int(rows.crcs[0])

        def wire(stored: BatchMeta) -> bytes:
            same = (stored.attributes, stored.max_timestamp) == (meta.attributes, meta.max_timestamp)
            return oc.kafka_batch(stored, crc if same else oc.batch_crc(stored, section), section)

        return self.append(records, meta, now_ms=now_ms, base_offset=base_offset,
                           wire_size=int(rows.entries["size"][0]), wire=wire)

    def _appended(self, stored: BatchMeta, n: int, now_ms: int) -> None:
        """After an append (under the lock): log end offset, leader epoch, flush policy."""
        self._log_end_offset = stored.next_offset
        epoch = stored.partition_leader_epoch
        if epoch >= 0 and epoch != self._epochs.latest_epoch:
            self._epochs.assign(epoch, stored.base_offset)
        self._unflushed += n
        flush_ms = self.config.flush_ms
        if self._unflushed >= self.config.flush_messages or (
                flush_ms != LONG_MAX and now_ms - self._last_flush_ms >= flush_ms):
            self.flush(now_ms)

    def _maybe_roll(self, size: int, now_ms: int, fmt: int) -> None:
        """Roll before appending `size` more bytes when the active segment is due by size, age or
        index size (an empty segment never rolls), or is in another format than `fmt`, the one
        the append writes (an empty one is started again in that format)."""
        active = self._segments[-1]
        count = active.batch_count
        if active.fmt != fmt:
            if count:
                self.roll(fmt)
            else:
                active.delete_files()
                self._set_segments((*self._segments[:-1], Segment.create(self.dir, active.base_offset, fmt)))
                self._dir_dirty = True
            return
        if count == 0:
            return
        c = self.config
        if (active.data_size + size > c.segment_bytes
                or now_ms - active.first_append_time >= c.segment_ms
                or (count + 1) * BATCH_DTYPE.itemsize > c.segment_index_bytes):
            self.roll(fmt)

    def roll(self, fmt: int | None = None) -> None:
        """Start a new active segment at the log end offset (no-op if the active one is empty), in
        format `fmt` (default `pylog.segment.format`): an append rolls to the format it writes, so
        Arrow rows appended without `rows_decoder` start format 1 segments under format 2."""
        self._check_writable()
        with self._lock:
            active = self._segments[-1]
            if active.batch_count == 0:
                return
            if self.config.flush_messages != LONG_MAX or self.config.flush_ms != LONG_MAX:
                active.fsync()
            active.close()
            self._set_segments((*self._segments, Segment.create(
                self.dir, self._log_end_offset, self.config.segment_format if fmt is None else fmt)))
            self._dir_dirty = True

    def assign_leader_epoch(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` begins at `start_offset` (a new leader calls it with its log end offset)."""
        self._check_writable()
        with self._lock:
            self._epochs.assign(epoch, start_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (epoch, end offset), or (-1, -1) when unknown."""
        with self._lock:
            return self._epochs.end_offset_for(epoch, self._log_end_offset)

    # -- reading -------------------------------------------------------------------------------

    def _check_offset(self, offset: int) -> None:
        if offset < self.local_log_start_offset or offset > self._log_end_offset:
            raise OffsetOutOfRange(offset, self._log_start_offset, self._log_end_offset)

    def read(self, start_offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one: bool = True) -> list[StoredBatch]:
        """Whole batches from the one holding `start_offset`, in order, while their stored sizes fit
        `max_bytes` (with `min_one` the first batch comes even if larger, as Kafka's minOneMessage).
        With `max_offset` (e.g. the high watermark) only batches wholly below it. Records are
        zero-copy slices of the mapped segment. Raises OffsetOutOfRange outside [log start, log
        end]."""
        return self._read(start_offset, max_bytes, max_offset, min_one, wire=False)  # type: ignore[return-value]

    def read_wire(self, start_offset: int, max_bytes: int, *, max_offset: int | None = None,
                  min_one: bool = True) -> list[StoredBatch | memoryview]:
        """`read`, except that batches of sealed segments with a `.wire` file come as their
        RecordBatch v2 bytes (slices of the mapped file, sized exactly by `.batches`), and so do
        those of format 2 segments (the stored header fields and section); the others come as
        StoredBatch, for the caller to encode."""
        return self._read(start_offset, max_bytes, max_offset, min_one, wire=True)

    def _read(self, start_offset: int, max_bytes: int, max_offset: int | None, min_one: bool, *,
              wire: bool) -> list[StoredBatch | memoryview]:
        with self._lock:
            self._check_offset(start_offset)
            limit = self._log_end_offset if max_offset is None else min(max_offset, self._log_end_offset)
            out: list[StoredBatch | memoryview] = []
            if start_offset >= limit:
                return out
            budget = max_bytes
            si = self._set.holding(start_offset)
            for seg in self._segments[si:]:
                if seg.base_offset >= limit:
                    break
                i = seg.find_batch(start_offset) if seg is self._segments[si] else 0
                stop = seg.find_batch(limit)
                batches = seg.files()[0]
                while i < stop:
                    entries = batches.entries(i, min(stop, i + READ_CHUNK))
                    sizes = np.cumsum(entries["size"], dtype=np.int64)
                    take = int(np.searchsorted(sizes, budget, side="right"))
                    if not out and take == 0 and min_one:
                        take = 1
                    if take:
                        sent = (None if not wire else seg.kafka_batches(i, i + take) if seg.fmt == 2
                                else seg.wire_batches(i, i + take) if seg.sealed else None)
                        out.extend(sent if sent is not None else seg.stored_batches(entries[:take]))
                        budget -= int(sizes[take - 1])
                    if take < len(entries):
                        return out
                    i += take
            return out

    def batch_metadata(self, start_offset: int | None = None, end_offset: int | None = None, *,
                       attributes: int = 0) -> np.ndarray:
        """The `.batches` entries (BATCH_DTYPE, FORMAT.md; a copy) of every batch holding an offset in
        [start, end), clipped to [log start, log end), in offset order; with `attributes`, only
        batches with any of those attribute bits set (e.g. TRANSACTIONAL_MASK | CONTROL_MASK). Reads
        the mapped side files alone (a binary search per segment), so its cost follows the range,
        not the partition (a filter on `attributes` looks at every entry in the range)."""
        first = self.local_log_start_offset
        start = first if start_offset is None else max(start_offset, first)
        end = self._log_end_offset if end_offset is None else min(end_offset, self._log_end_offset)
        parts: list[np.ndarray] = []
        with self._lock:
            si = self._set.holding(start)
            for seg in self._segments[si:] if start < end else ():
                if seg.base_offset >= end:
                    break
                batches = seg.files()[0]
                i = seg.find_batch(start) if seg.base_offset < start else 0
                entries = batches.entries(i, batches.search("base_offset", end, "left"))
                if attributes:
                    entries = entries[(entries["attributes"] & attributes) != 0]
                parts.append(np.array(entries))  # copied under the lock: the caller may keep it
        return np.concatenate(parts) if len(parts) > 1 else parts[0] if parts else np.zeros(0, BATCH_DTYPE)

    def scan(self, start_offset: int | None = None, end_offset: int | None = None, *,
             views: bool = False) -> Iterator[pa.RecordBatch]:
        """Record batches (RECORD_SCHEMA) holding exactly the records with start <= offset < end
        (format 1: zero-copy slices of whole Arrow messages; format 2: their view columns cast, the
        values copied; control records included), for analysts rather than Kafka fetches. With
        `views`, format 2 batches come as stored (SCHEMA_V2, zero-copy): a reader that selects
        columns first casts only those (`onecopy.to_record_type`), one whose output takes views
        none."""
        first = self.local_log_start_offset
        start = first if start_offset is None else max(start_offset, first)
        end = self._log_end_offset if end_offset is None else min(end_offset, self._log_end_offset)
        with self._lock:
            segments = self._segments
        for k, seg in enumerate(segments):
            seg_end = segments[k + 1].base_offset if k + 1 < len(segments) else self._log_end_offset
            if seg_end <= start or seg.base_offset >= end:
                continue
            with self._lock:
                if seg.retired:
                    continue
                index = seg.files()[1]
                m0 = max(0, index.search("offset", start, "right") - 1)
                count, parts = seg.message_run(m0, index.search("offset", end, "left"), views=views)
            last = count - 1  # each message decoded as it is reached, outside the lock
            for j, rb in enumerate(parts):
                if j == 0 or j == last:  # messages between the first and the last lie inside the range
                    offs = rb.column(0).to_numpy()
                    a, b = np.searchsorted(offs, [start, end])
                    rb = rb.slice(int(a), int(b - a))
                if rb.num_rows:
                    yield rb

    def read_table(self, start_offset: int | None = None, end_offset: int | None = None) -> pa.Table:
        return pa.Table.from_batches(list(self.scan(start_offset, end_offset)), schema=RECORD_SCHEMA)

    def offset_for_timestamp(self, timestamp_ms: int, *,
                             max_offset: int | None = None) -> tuple[int, int] | None:
        """ListOffsets by time: (offset, timestamp) of the first record at or after the log start
        offset whose timestamp is >= `timestamp_ms`, or None (also when that offset is not below
        `max_offset`)."""
        with self._lock:
            lso = self.local_log_start_offset
            for seg in self._segments:
                if seg.max_timestamp < timestamp_ms:
                    continue
                index, times = seg.files()[1], seg.files()[2]
                for m in range(times.search("timestamp", timestamp_ms, "left"), len(index)):
                    rb = seg.message(m)
                    offs = rb.column(0).to_numpy()
                    ts = rb.column(1).cast(pa.int64()).to_numpy()
                    hits = np.flatnonzero((ts >= timestamp_ms) & (offs >= lso))
                    if len(hits):
                        off = int(offs[hits[0]])
                        if max_offset is not None and off >= max_offset:
                            return None
                        return off, int(ts[hits[0]])
            return None

    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """(largest timestamp, offset of the first record carrying it), or None when empty."""
        with self._lock:
            best = max((s.max_timestamp for s in self._segments), default=-1)
            for seg in self._segments:
                if seg.batch_count == 0 or seg.max_timestamp != best:
                    continue
                index, times = seg.files()[1], seg.files()[2]
                for m in range(times.search("timestamp", best, "left"), len(index)):
                    rb = seg.message(m)
                    ts = rb.column(1).cast(pa.int64()).to_numpy()
                    hits = np.flatnonzero(ts == best)
                    if len(hits):
                        return best, int(rb.column(0)[int(hits[0])].as_py())
            return None

    # -- truncation and deletion ---------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every batch whose last offset is >= `offset` (replication); the log end offset
        becomes `offset` (as in Kafka, a batch straddling it goes whole, leaving a gap below it),
        and the log start offset at most `offset`. Leader epochs starting at or past the new log
        end go too, also when no record does."""
        self._check_writable()
        with self._lock:
            if offset >= self._log_end_offset:
                # No record goes, but an epoch this replica began as leader without appending
                # anything may sit at the log end; the new leader's log does not have it (as Kafka).
                self._epochs.truncate_from_end(self._log_end_offset)
                return
            if offset < self._segments[0].base_offset:
                self.truncate_fully_and_start_at(offset)
                return
            si = self._set.holding(offset)
            for seg in reversed(self._segments[si + 1:]):
                seg.delete_files()
            seg = self._segments[si]
            nb = seg.find_batch(offset)
            if nb < seg.batch_count or (seg.sealed and seg.batch_count == 0 and seg.base_offset == offset):
                if seg.fmt == 2:
                    written = write_rows_segment(self.dir, seg.base_offset, _kept_rows(seg.snapshot(), nb),
                                                 sealed=False)
                else:
                    written = write_segment(self.dir, seg.base_offset, _kept_blocks(seg.snapshot(), nb),
                                            sealed=False, compression=self.config.segment_compression)
                written.commit()
                seg.close()
                seg.retired = True
                seg = Segment(self.dir, seg.base_offset, sealed=False, data_size=written.data_size,
                              readonly=False)
            segments = [*self._segments[:si], seg]
            if seg.sealed or seg.next_offset < offset:
                seg.close()
                segments.append(Segment.create(self.dir, offset, self.config.segment_format))
            self._set_segments(segments)
            self._dir_dirty = True
            self._log_end_offset = offset
            if offset < self._log_start_offset:
                self._set_log_start_offset(offset)
            self._epochs.truncate_from_end(self._log_end_offset)

    def truncate_fully_and_start_at(self, offset: int, *, log_start_offset: int | None = None) -> None:
        """Delete every segment and start empty at `offset` (a follower behind the leader's log start,
        or below the leader's local log start: then `log_start_offset` is the leader's, whose
        offsets below `offset` the remote tier holds)."""
        self._check_writable()
        with self._lock:
            for seg in reversed(self._segments):
                seg.delete_files()
            self._set_segments([Segment.create(self.dir, offset, self.config.segment_format)])
            self._dir_dirty = True
            self._log_end_offset = offset
            self._epochs.clear()
            start = offset if log_start_offset is None else min(offset, log_start_offset)
            self._set_log_start_offset(start, force=True)

    def _set_log_start_offset(self, offset: int, *, force: bool = False) -> None:
        if offset != self._log_start_offset or force:
            self._log_start_offset = offset
            write_log_start_offset(self.dir, offset)
            self._epochs.truncate_from_start(offset)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: advance the log start offset to `offset` (checkpointed before returning)
        and delete segments wholly below it. Returns the new log start offset (low watermark)."""
        self._check_writable()
        with self._lock:
            if offset > self._log_end_offset or offset < 0:
                raise OffsetOutOfRange(offset, self._log_start_offset, self._log_end_offset)
            if offset > self._log_start_offset:
                self._set_log_start_offset(offset)
                self._delete_prefix(lambda seg, next_base: next_base <= offset)
            return self._log_start_offset

    def apply_retention(self, now_ms: int, *, max_offset: int | None = None) -> int:
        """Delete the oldest sealed or rolled segments that are past `retention.ms` (by their
        largest timestamp) or over `retention.bytes` (cleanup.policy delete), or wholly below the
        log start offset; never the active segment, nor one reaching `max_offset` (pass the high
        watermark). With `remote.storage.enable` only the last rule applies: the remote tier's
        manager deletes local segments once they are remote and past local retention
        (`delete_local_segments`), and expires the log by retention. Returns the number of
        segments deleted."""
        self._check_writable()
        c = self.config
        with self._lock:
            total = self.size_bytes
            lso = self._log_start_offset
            by_retention = c.delete and not c.remote_storage_enable

            def expired(seg: Segment, next_base: int) -> bool:
                nonlocal total
                if max_offset is not None and next_base > max_offset:
                    return False
                gone = next_base <= lso or (by_retention and (
                    (c.retention_ms >= 0 and now_ms - seg.max_timestamp > c.retention_ms)
                    or (c.retention_bytes >= 0 and total - seg.data_size >= c.retention_bytes)))
                if gone:
                    total -= seg.data_size
                return gone

            return self._delete_prefix(expired)

    def _delete_prefix(self, should_delete: Callable[[Segment, int], bool], *,
                       keep_start: bool = False) -> int:
        segs = self._segments
        n = 0
        while n < len(segs) - 1 and should_delete(segs[n], segs[n + 1].base_offset):
            n += 1
        if n:
            for seg in segs[:n]:
                seg.delete_files()
            self._set_segments(segs[n:])
            self._dir_dirty = True
            if segs[n].base_offset > self._log_start_offset and not keep_start:
                self._set_log_start_offset(segs[n].base_offset)
        return n

    def delete_local_segments(self, up_to: int) -> int:
        """Delete the oldest segments wholly below `up_to` (never the active one) without moving
        the log start offset: the remote tier holds their offsets (only the local log start
        moves). Returns the number deleted."""
        self._check_writable()
        with self._lock:
            segs = self._segments
            if len(segs) > 1 and segs[1].base_offset <= up_to:
                # first: from now on the checkpoint, not the first segment, says where the log starts
                write_log_start_offset(self.dir, self._log_start_offset)
            return self._delete_prefix(lambda seg, next_base: next_base <= up_to, keep_start=True)

    def segment_infos(self) -> list[SegmentInfo]:
        """Every segment, oldest first and the active one last, as the remote tier's manager sees
        them (the files of a sealed segment no longer change)."""
        with self._lock:
            return [SegmentInfo(s.base_offset, s.next_offset, s.data_size, s.max_timestamp, s.sealed,
                                (s.data_path, *(s.path(ext) for ext in SIDE_EXTS), *s.wire_paths()))
                    for s in self._segments]

    # -- background jobs (log_jobs.py): sealing and compaction ----------------------------------

    def rewrite(self, choose: Callable[[tuple[Segment, ...]], list[Segment]], *,
                entries_after: bool = False) -> contextlib.AbstractContextManager[SegmentRewrite | None]:
        """Claim segments for a background rewrite; see `SegmentJobs.rewrite`."""
        return self._jobs.rewrite(choose, entries_after=entries_after)

    def seal_pending(self, limit: int | None = None) -> int:
        """Rewrite rolled IPC-stream segments as IPC files; see `SegmentJobs.seal_pending`."""
        return self._jobs.seal_pending(limit)

    def upgrade_format(self, limit: int | None = None) -> int:
        """Rewrite sealed format 1 segments as format 2; see `SegmentJobs.upgrade_format`."""
        return self._jobs.upgrade_format(limit)

    def compact(self, now_ms: int, *, max_offset: int | None = None, force: bool = False) -> CompactionResult:
        """Log compaction of the segments before the active one (and below `max_offset`, e.g. the
        last stable offset) when a run is due by Kafka's cleaner rules, or always with `force`; see
        `compaction.py`. Safe on a background thread; cheap when nothing is due."""
        return compact_log(self, now_ms, max_offset, force)

    # -- durability and lifetime ---------------------------------------------------------------

    def flush(self, now_ms: int | None = None) -> None:
        """fsync everything written so far (data, side files, directory)."""
        if self.readonly:
            return
        with self._lock:
            for seg in self._segments:
                seg.fsync()
            if self._dir_dirty:
                fsync_dir(self.dir)
                self._dir_dirty = False
            self._unflushed = 0
            if now_ms is not None:
                self._last_flush_ms = now_ms

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Hold the log still (no append, truncation, retention or segment swap): a copy of its files
        taken inside is the whole log (moving it between log dirs)."""
        with self._lock:
            yield

    def maybe_flush(self, now_ms: int) -> bool:
        """fsync if `flush.ms` has passed since the last flush and something is unflushed."""
        if self._unflushed and now_ms - self._last_flush_ms >= self.config.flush_ms:
            self.flush(now_ms)
            return True
        return False

    def close(self) -> None:
        """Release descriptors; a background job still running discards its work."""
        with self._lock:
            self._set.closed = True
            for seg in self._segments:
                seg.close()
                seg.unmap()  # record batches handed out keep their maps alive
            with contextlib.suppress(OSError):  # a deleted partition's directory may be gone
                self._epochs.write_pending()

    def __enter__(self) -> PartitionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"PartitionLog({str(self.dir)!r}, start={self._log_start_offset}, "
                f"end={self._log_end_offset}, segments={len(self._segments)})")


def _int64_values(col: pa.Array) -> np.ndarray:
    """The values of an int64-backed column without a copy."""
    return np.frombuffer(col.buffers()[1], np.int64, len(col), col.offset * 8)


def _kept_blocks(snap: SegmentSnapshot, nb: int) -> list[Block]:
    """Blocks of the first `nb` batches of a segment (the last block cut at a batch boundary)."""
    out: list[Block] = []
    for rb, e in snap.blocks():
        if not len(e) or nb <= 0:
            break
        if len(e) <= nb:
            out.append((rb, e))
        else:
            kept = e[:nb]
            rows = int(kept["row"][-1]) + int(kept["record_count"][-1])
            out.append((rb.slice(0, rows), kept))
        nb -= len(e)
    return out


def _kept_rows(snap: SegmentSnapshot, nb: int) -> list[oc.Rows]:
    """Format 2 `_kept_blocks`: the messages of the first `nb` batches (the last one cut)."""
    out: list[oc.Rows] = []
    for rows in snap.rows():
        k = len(rows.entries)
        if not k or nb <= 0:
            break
        out.append(rows if k <= nb else oc.take_batches(rows, 0, nb))
        nb -= k
    return out


def read_segments(path: str | os.PathLike[str], start_offset: int | None = None,
                  end_offset: int | None = None, *, max_offset: int | None = None) -> pa.Table:
    """Records with start <= offset < end (and < `max_offset`, e.g. the high watermark) of a
    partition directory, read-only and safe while a broker writes it."""
    log = PartitionLog.open_readonly(path)
    try:
        if max_offset is not None:
            end_offset = max_offset if end_offset is None else min(end_offset, max_offset)
        return log.read_table(start_offset, end_offset)
    finally:
        log.close()
