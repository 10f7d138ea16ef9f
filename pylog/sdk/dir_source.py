"""Reading a topic straight from a pylog data directory and / or its remote tier: the Arrow
segments, no broker. (Remote segments are the same files in an object store, read through
``pylog.sdk.remote_source``; everything below holds for them too.)

Partitions are ``<data_dir>/<topic>-<partition>`` directories opened with
``PartitionLog.open_readonly``, which is safe while a broker appends, rolls or seals them (a torn tail
is ignored; the view is fixed at open). What a reader may see matches a read_committed Kafka fetch:

- The high watermark is the one the broker published beside the partition's segments
  (``high-watermark``, updated before each acknowledgement, see storage/published_hw.py), else
  the one in Kafka's ``replication-offset-checkpoint``, else the log end offset of complete
  batches; never above that log end.
- The last stable offset is the first offset of the earliest transaction without a marker below the
  high watermark; ``latest`` means that offset.
- Control batches never become rows, and a transactional batch is dropped when its producer's next
  marker is an ABORT.

Only batch metadata is read to plan (``PartitionLog.batch_metadata``: binary searches of the ``.batches``
side files, no record data): for the last stable offset, the transactional and control batches below
the high watermark (one vectorised pass); for a range, its LogAppendTime batches and its transactional
batches with their markers. Rows are zero-copy slices of whole Arrow messages (``PartitionLog.scan``),
filtered only where a dropped batch lies; only runs of tiny messages (a producer sending one record
per batch) are concatenated, so a topic read right after it was produced costs what reading its
segments with pyarrow costs. `read_tables` (what ``to_arrow`` uses) chooses the columns once per
range rather than once per message; unrequested columns are never touched. Format 2 segments hold
``key``, ``value`` and header values as views into the records sections the producers sent; they
are read as stored and only the chosen columns are copied into the public binary types, once per
range (per batch for a stream); an output that takes views (Polars, DuckDB) copies nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pylog.model import CONTROL_MASK, HEADERS_TYPE, RECORD_SCHEMA, TIMESTAMP_TYPE_MASK, TRANSACTIONAL_MASK
from pylog.protocol.records import parse_control_record
from pylog.sdk.constant import ConstantPool
from pylog.sdk.offsets import PartitionRange, UnknownTopicError
from pylog.sdk.schema import source_schema
from pylog.storage import PartitionLog, list_partitions
from pylog.storage import onecopy as oc
from pylog.storage.checkpoint import HIGH_WATERMARK_FILE, read_offset_checkpoint
from pylog.storage.published_hw import read_published_high_watermark
from pylog.storage.tiered_log import ReadableLog, TieredLog

if TYPE_CHECKING:
    from pylog.sdk.remote_source import RemoteStorageSpec
    from pylog.storage.remote_segment import RemoteLog

HW_CHECKPOINT = HIGH_WATERMARK_FILE
# Runs of messages with fewer rows are concatenated into batches of about COALESCED_ROWS; larger
# messages stay zero-copy slices of the segment. A table (`read_tables`, to_arrow) coalesces only
# tiny messages, a producer's one-record batches: its chunks are handed over as they are, and a
# consumer wanting contiguous memory copies once anyway. A stream of batches (`read`: batch readers,
# Spark) coalesces small ones too, since each batch costs its consumer a round of per-batch work.
TINY_MESSAGE_ROWS = 64
SMALL_BATCH_ROWS = 4096
COALESCED_ROWS = 65536
# How often a read reopens a partition whose segment vanished under it before giving up.
REOPEN_ATTEMPTS = 5
T = TypeVar("T")


class RemoteSegments(Protocol):
    """What a `DirTopicSource` reads of a remote tier: ``pylog.sdk.remote_source.RemoteTier`` (the
    store, as a client reads it) or a broker's own view of a partition's remote segments."""

    spec: RemoteStorageSpec

    def partitions(self, topic: str) -> list[int]: ...

    def remote_log(self, topic: str, partition: int) -> RemoteLog | None: ...

    def refresh(self, topic: str, partition: int) -> RemoteLog | None:
        """The partition's remote segments looked up again (the view held may predate an upload)."""
        ...

    def close(self) -> None: ...


def _gap(remote: RemoteLog | None, local: PartitionLog) -> bool:
    """Whether offsets lie between the remote segments' end and the local log's first offset
    (with nothing remote: whether the local log has lost any history at all)."""
    start = local.local_log_start_offset
    if remote is None or remote.log_end_offset <= remote.log_start_offset:
        return start > 0
    return start > remote.log_end_offset


def read_hw_checkpoint(data_dir: Path) -> dict[tuple[str, int], int]:
    """Kafka's ``replication-offset-checkpoint`` (version, count, then ``topic partition offset``)."""
    return read_offset_checkpoint(data_dir / HW_CHECKPOINT)


class DirTopicSource:
    """`OffsetSource` + reader over a data directory and / or a remote tier; each partition is opened
    once per source, so one source (one scan) sees one consistent view. With a remote tier, a
    partition's remote segments (the manifest pinned at first use) come first and the local log
    serves the offsets after them; without a data directory the store alone is read."""

    def __init__(self, data_dir: str | os.PathLike[str] | None, *, remote: RemoteSegments | None = None,
                 read_committed: bool = True, only: Iterable[tuple[str, int]] | None = None) -> None:
        """``only``: the (topic, partition)s this source reads; their directories are looked up by
        name instead of listing the data directory (a broker's Flight read of a few of its many)."""
        if data_dir is None and remote is None:
            raise ValueError("a data directory or a remote store is needed")
        self.root = Path(data_dir) if data_dir is not None else None
        if self.root is not None and not self.root.is_dir():
            raise FileNotFoundError(f"data_dir {str(self.root)!r} is not a directory")
        self.remote = remote
        # False: read_uncommitted, as a consumer with that isolation level (up to the high
        # watermark, open and aborted transactions included; control batches still not rows)
        self.read_committed = read_committed
        self._dirs = _partition_dirs(self.root, only) if self.root is not None else {}
        self._hw: dict[tuple[str, int], int] | None = None  # the checkpoint, read when first needed
        self._open: dict[tuple[str, int], _Partition] = {}

    def __enter__(self) -> DirTopicSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for part in self._open.values():
            part.log.close()
        self._open.clear()
        if self.remote is not None:
            self.remote.close()

    @property
    def _where(self) -> str:
        names = [repr(str(self.root))] if self.root is not None else []
        if self.remote is not None:
            names.append(repr(self.remote.spec.uri))
        return " and ".join(names)

    def partitions(self, topic: str) -> list[int]:
        found = {p for (t, p) in self._dirs if t == topic}
        if self.remote is not None:
            found.update(self.remote.partitions(topic))
        if not found:
            topics = sorted({t for (t, _p) in self._dirs if not t.startswith("__")})
            raise UnknownTopicError(f"unknown topic {topic!r}: {self._where} holds "
                                    + (", ".join(map(repr, topics)) if topics else
                                       "no partition of it" if self.root is None else "no topics"))
        return sorted(found)

    def _partition(self, topic: str, partition: int, *, reopen: bool = False) -> _Partition:
        part = self._open.get((topic, partition))
        if part is not None and reopen:
            part.log.close()
            del self._open[(topic, partition)]
            part = None
        if part is None:
            path = self._dirs.get((topic, partition))
            # the local log first, then the remote segments: a segment leaves the local log only
            # once the store holds it, so a manifest read after the local log was opened reaches
            # at least its start (the other way round, an upload and a local deletion between the
            # two would leave a gap)
            local = PartitionLog.open_readonly(path) if path is not None else None
            remote = self.remote.remote_log(topic, partition) if self.remote is not None else None
            if self.remote is not None and local is not None and _gap(remote, local):
                # the remote view was taken earlier (a plan pins it): segments uploaded and
                # deleted locally since then lie between the two; look it up again
                remote = self.remote.refresh(topic, partition)
            if local is None and remote is None:
                raise UnknownTopicError(f"topic {topic!r} has no partition {partition} in {self._where}")
            log: ReadableLog = local if remote is None else TieredLog(remote, local)  # type: ignore[assignment]
            hw = None
            if path is not None:  # what the broker published lately, else its last checkpoint
                hw = read_published_high_watermark(path)
                if hw is None:
                    if self._hw is None:
                        self._hw = read_hw_checkpoint(self.root) if self.root is not None else {}
                    hw = self._hw.get((topic, partition))
            part = self._open[(topic, partition)] = _Partition(log, hw, self.read_committed)
        return part

    def _reopening(self, topic: str, partition: int, fn: Callable[[_Partition], T]) -> T:
        """``fn`` of the partition's view; when a file of the view vanished under it (the broker
        sealed, compacted or deleted a segment after the view was opened), again on a fresh view."""
        for attempt in range(REOPEN_ATTEMPTS - 1):
            try:
                return fn(self._partition(topic, partition, reopen=attempt > 0))
            except FileNotFoundError:
                continue
        return fn(self._partition(topic, partition, reopen=True))  # the last try: its error is raised

    def offset_bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        return {p: self._reopening(topic, p, lambda part: (part.log_start, part.last_stable))
                for p in partitions}

    def offsets_for_times(self, topic: str, times: dict[int, int]) -> dict[int, int | None]:
        return {p: self._reopening(topic, p, partial(_offset_at, ts=ts)) for p, ts in times.items()}

    def reads_as_stored(self, r: PartitionRange) -> bool:
        """Whether a committed read of ``r`` returns its records exactly as stored: no control
        batch, aborted transaction or LogAppendTime batch lies in it (batch metadata only). A
        planner that checked this lets a reader elsewhere use `stored_rows` without the metadata."""
        def as_stored(part: _Partition) -> bool:
            drop_first, _, lat_first, _, _ = _special(part, r, ("timestamp",))
            return not len(drop_first) and not len(lat_first)

        return self._reopening(r.topic, r.partition, as_stored)

    def read(self, ranges: list[PartitionRange], columns: Sequence[str], *, views: bool = False
             ) -> Iterator[tuple[PartitionRange, pa.RecordBatch]]:
        """The batches of each range (`views`: format 2 ones keep their view columns)."""
        for r in ranges:
            if r.count <= 0:
                continue
            for batch in _coalesced(self._resumed_messages(r, columns, views), SMALL_BATCH_ROWS):
                yield r, batch

    def read_tables(self, ranges: list[PartitionRange], columns: Sequence[str], *, views: bool = False
                    ) -> Iterator[tuple[PartitionRange, pa.Table]]:
        """One table of the requested source columns per non-empty range, in range order; with
        `views`, a range read from format 2 segments alone keeps their view columns (binary_view,
        headers of string_view / binary_view: `record_types` makes them the source schema's)."""
        schema = source_schema(columns)
        for r in ranges:
            if r.count > 0:
                read = partial(_table, r=r, columns=columns, schema=schema, views=views)
                yield r, self._reopening(r.topic, r.partition, read)

    def _resumed_messages(self, r: PartitionRange, columns: Sequence[str], views: bool = False
                          ) -> Iterator[pa.RecordBatch]:
        """`_messages` of ``r``; when a segment of the view vanished under the reader (the broker
        sealed, compacted or deleted it after the view was opened), the partition is reopened and
        the read resumes after the last offset already returned."""
        start = r.start
        for attempt in range(REOPEN_ATTEMPTS):
            try:
                part = self._partition(r.topic, r.partition, reopen=attempt > 0)
                for rows, last in _messages(part, replace(r, start=start), columns, views):
                    start = last + 1
                    yield rows
                return
            except FileNotFoundError:
                if attempt == REOPEN_ATTEMPTS - 1:
                    raise


def _partition_dirs(root: Path, only: Iterable[tuple[str, int]] | None) -> dict[tuple[str, int], Path]:
    """{(topic, partition): directory} of the data directory: listed, or of ``only`` those that exist."""
    if only is None:
        return {(p.topic, p.partition): p.path for p in list_partitions(root)}
    named = {(topic, partition): root / f"{topic}-{partition}" for topic, partition in only}
    return {key: path for key, path in named.items() if path.is_dir()}


def _offset_at(part: _Partition, ts: int) -> int | None:
    """The first offset with a timestamp at or after ``ts`` that a committed reader may see."""
    found = part.log.offset_for_timestamp(ts, max_offset=part.last_stable)
    return None if found is None else found[0]


class _Partition:
    """A partition's read-only log and what a committed reader may see of it. The last stable offset
    needs every transactional / control batch below the high watermark (one filtered pass over the
    `.batches` side files, made only when asked); reading a range needs only those from the range
    on, up to the markers of its transactions."""

    def __init__(self, log: ReadableLog, hw_checkpoint: int | None, read_committed: bool = True) -> None:
        self.log = log
        self.read_committed = read_committed
        self.log_start = log.log_start_offset
        self.high_watermark = log.log_end_offset if hw_checkpoint is None else \
            min(hw_checkpoint, log.log_end_offset)
        self._all: _Transactions | None = None
        self._last_stable: int | None = None

    def _special(self, start: int, end: int) -> np.ndarray:
        return self.log.batch_metadata(start, end, attributes=TRANSACTIONAL_MASK | CONTROL_MASK)

    @property
    def last_stable(self) -> int:
        if not self.read_committed:  # an uncommitted reader reads to the high watermark
            return self.high_watermark
        if self._last_stable is None:
            self._all = _Transactions(self.log, self._special(self.log_start, self.high_watermark))
            first_open = self._all.first_open
            hw = self.high_watermark
            self._last_stable = hw if first_open is None else min(hw, first_open)
        return self._last_stable

    def dropped(self, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """(first, last) offsets of the batches in [start, end) the reader skips: control batches,
        and for a committed reader aborted and open transactions."""
        if not self.read_committed:
            control = self.log.batch_metadata(start, end, attributes=CONTROL_MASK)
            first = control["base_offset"]
            return first, first + control["last_offset_delta"]
        txn = self._all
        if txn is None:
            found = [self._special(start, end)]
            txn = _Transactions(self.log, found[0])
            hi, step = end, max(end - start, 1 << 16)
            while hi < self.high_watermark and txn.open_before(end):  # look for their markers
                stop = min(self.high_watermark, hi + step)
                more = self._special(hi, stop)
                found.append(more[more["base_offset"] >= hi])
                txn = _Transactions(self.log, np.concatenate(found))
                hi, step = stop, 2 * step
        return txn.dropped(start, end)


class _Transactions:
    """The transactional and control batches of a partition (offset order): the marker ending each
    transactional batch's transaction, found for all of them at once, and where the earliest
    transaction without a marker begins. Whether a marker is an ABORT is read from its record
    only when a read reaches one of its batches."""

    def __init__(self, log: ReadableLog, special: np.ndarray) -> None:
        self.log = log
        self.first = special["base_offset"]
        self.last = self.first + special["last_offset_delta"]
        self.control = (special["attributes"] & CONTROL_MASK) != 0
        n = len(special)
        pid = special["producer_id"]
        order = np.argsort(pid, kind="stable")  # by producer, in offset order within one
        sorted_pid = pid[order]
        pos = np.where(self.control[order], np.arange(n), n)
        nxt = np.minimum.accumulate(pos[::-1])[::-1]  # the next control batch, in that order
        found = nxt < n
        found[found] = sorted_pid[nxt[found]] == sorted_pid[found]  # ... of the same producer
        self.marker = np.full(n, -1, np.int64)  # per batch: index of its marker, -1 while open
        self.marker[order[found]] = order[nxt[found]]
        self._open = ~self.control & (self.marker < 0)
        self.first_open: int | None = int(self.first[self._open].min()) if self._open.any() else None
        self._abort: dict[int, bool] = {}

    def open_before(self, offset: int) -> bool:
        """Whether a transactional batch below `offset` has no marker among these batches."""
        return self.first_open is not None and self.first_open < offset

    def _is_abort(self, m: int) -> bool:
        if m not in self._abort:
            rows = self.log.read(int(self.first[m]), 1)[0].records
            self._abort[m] = bool(rows.num_rows) and parse_control_record(
                rows.column(2)[0].as_py(), rows.column(3)[0].as_py()).is_abort
        return self._abort[m]

    def dropped(self, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """(first, last) offsets of the batches in [start, end) a committed reader skips: control
        batches, and transactional batches whose marker is an ABORT (or that have none yet)."""
        hit = np.flatnonzero((self.last >= start) & (self.first < end))
        markers = self.marker[hit]
        drop = self.control[hit] | (markers < 0)
        for m in np.unique(markers[~drop]).tolist():
            if self._is_abort(m):
                drop |= markers == m
        hit = hit[drop]
        return self.first[hit], self.last[hit]


def _covered(offsets: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Per offset: whether it lies in one of the sorted, disjoint intervals [first, last]."""
    i = np.searchsorted(first, offsets, "right") - 1
    return (i >= 0) & (offsets <= last[np.maximum(i, 0)])


def _special(part: _Partition, r: PartitionRange, columns: Sequence[str]
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The batches of [start, end) a committed reader skips (first, last offsets) and, when the
    timestamp columns are read, its LogAppendTime batches (first, last offsets, broker time)."""
    drop_first, drop_last = part.dropped(r.start, r.end)
    lat_first = lat_last = lat_ts = _NONE
    if "timestampType" in columns or "timestamp" in columns:
        lat = part.log.batch_metadata(r.start, r.end, attributes=TIMESTAMP_TYPE_MASK)
        lat_first, lat_ts = lat["base_offset"], lat["max_timestamp"]
        lat_last = lat_first + lat["last_offset_delta"]
    return drop_first, drop_last, lat_first, lat_last, lat_ts


def _table(part: _Partition, r: PartitionRange, columns: Sequence[str], schema: pa.Schema,
           views: bool = False) -> pa.Table:
    """The committed rows of [start, end) as a table: when no batch is skipped or stamped by the broker,
    the range's messages as they are on disk (tiny ones coalesced), columns chosen once and format 2
    view columns cast once per column (kept with `views`)."""
    drop_first, _, lat_first, _, _ = _special(part, r, columns)
    if len(drop_first) or len(lat_first):
        return pa.Table.from_batches(list(_rows(part, r, columns, small_rows=TINY_MESSAGE_ROWS)),
                                     schema=schema)
    stored = [c for c in columns if c != "timestampType"]
    messages = list(_coalesced(part.log.scan(r.start, r.end, views=True), TINY_MESSAGE_ROWS))
    if any(not m.schema.equals(messages[0].schema) for m in messages):  # format 1 and 2 segments
        messages = [oc.to_record_schema(m) if m.schema.metadata else m for m in messages]
    table = pa.Table.from_batches(messages, schema=messages[0].schema if messages else RECORD_SCHEMA)
    table = table.select(stored)
    if not views:
        table = record_types(table)
    if "timestampType" in columns:  # CreateTime everywhere
        zeros = ConstantPool().chunks(0, table.num_rows)
        table = table.append_column("timestampType", pa.chunked_array(zeros, pa.int32()))
    if table.schema.equals(schema):
        return table
    return pa.Table.from_arrays(table.columns, schema=_typed_as(schema, table.schema))


def record_types(table: pa.Table) -> pa.Table:
    """`table` with its format 2 view columns as their RECORD_SCHEMA types (one cast per column;
    `onecopy.to_record_type`), any other column as it is."""
    for i, field in enumerate(table.schema):
        if field.type not in _VIEW_TYPES:
            continue
        column = table.column(i)
        cast = column.cast(pa.binary()) if field.type == pa.binary_view() else pa.chunked_array(
            [oc.to_record_type(c) for c in column.chunks], HEADERS_TYPE)
        table = table.set_column(i, pa.field(field.name, cast.type, field.nullable, field.metadata), cast)
    return table


_VIEW_TYPES = (pa.binary_view(), oc.HEADERS_V2_TYPE)


def _typed_as(schema: pa.Schema, stored: pa.Schema) -> pa.Schema:
    """`schema` with the view types of `stored` where it holds them."""
    return pa.schema([f.with_type(s.type) if s.type in _VIEW_TYPES else f for f, s in zip(schema, stored)],
                     metadata=schema.metadata)


def _coalesced(messages: Iterator[pa.RecordBatch], small_rows: int) -> Iterator[pa.RecordBatch]:
    """`messages` as they are, except runs of ones under `small_rows` rows, which become one batch
    of about COALESCED_ROWS each."""
    run: list[pa.RecordBatch] = []
    run_rows = 0
    for rows in messages:
        if run and not rows.schema.equals(run[0].schema):  # a format 1 message after format 2 ones
            yield _concat(run)
            run, run_rows = [], 0
        if rows.num_rows >= small_rows:
            if run:
                yield _concat(run)
                run, run_rows = [], 0
            yield rows
            continue
        run.append(rows)
        run_rows += rows.num_rows
        if run_rows >= COALESCED_ROWS:
            yield _concat(run)
            run, run_rows = [], 0
    if run:
        yield _concat(run)


def _rows(part: _Partition, r: PartitionRange, columns: Sequence[str], *,
          small_rows: int = SMALL_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """The committed data rows of [start, end) as zero-copy slices of the mapped segments' messages
    (filtered only where a skipped batch lies); runs of messages under `small_rows` rows become one
    batch."""
    return _coalesced((rows for rows, _last in _messages(part, r, columns)), small_rows)


def stored_rows(log: ReadableLog, r: PartitionRange, columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
    """The rows of [start, end) as stored (runs of small messages coalesced, as `read` does), for
    a range the caller knows `reads_as_stored`: no batch metadata is read."""
    zeros = ConstantPool()
    rows = (_columns(rows, columns, zeros) for rows in log.scan(r.start, r.end, views=True) if rows.num_rows)
    return _coalesced(rows, SMALL_BATCH_ROWS)


def _columns(rows: pa.RecordBatch, columns: Sequence[str], zeros: ConstantPool,
             ts_type: pa.Array | None = None, views: bool = False) -> pa.RecordBatch:
    """The requested columns of stored rows (format 2 view columns cast unless `views`: only those
    chosen); timestampType is CreateTime (0) unless given."""
    out = rows.select([c for c in columns if c != "timestampType"])
    if rows.schema.metadata and not views:  # format 2
        out = pa.RecordBatch.from_arrays([oc.to_record_type(c) for c in out.columns],
                                         schema=_record_schema(tuple(out.schema.names)))
    if "timestampType" in columns:
        out = out.append_column("timestampType", zeros.take(0, rows.num_rows) if ts_type is None
                                else ts_type)
    return out


def _messages(part: _Partition, r: PartitionRange, columns: Sequence[str], views: bool = False
              ) -> Iterator[tuple[pa.RecordBatch, int]]:
    """Each message's committed rows with the last offset the message covered."""
    drop_first, drop_last, lat_first, lat_last, lat_ts = _special(part, r, columns)
    zeros = ConstantPool()
    special = len(drop_first) or len(lat_first)
    for rows in part.log.scan(r.start, r.end, views=True):
        if not rows.num_rows:
            continue
        ts_type = None
        last = rows.column(0)[-1].as_py()
        if special:
            offsets = rows.column(0).to_numpy()
            lo, hi = int(offsets[0]), int(offsets[-1])
            if _overlaps(drop_first, drop_last, lo, hi):
                if rows.schema.metadata:  # format 2: pyarrow takes no rows of views
                    rows = oc.to_record_schema(rows)
                rows = rows.filter(pa.array(~_covered(offsets, drop_first, drop_last)))
                if not rows.num_rows:
                    continue
            if _overlaps(lat_first, lat_last, lo, hi):
                rows, ts_type = _log_append_time(rows, lat_first, lat_last, lat_ts, "timestamp" in columns)
        yield _columns(rows, columns, zeros, ts_type, views), last


_NONE = np.zeros(0, np.int64)


@cache
def _record_schema(names: tuple[str, ...]) -> pa.Schema:
    """RECORD_SCHEMA's fields `names`."""
    return pa.schema([RECORD_SCHEMA.field(n) for n in names])


def _overlaps(first: np.ndarray, last: np.ndarray, lo: int, hi: int) -> bool:
    """Whether any of the sorted, disjoint intervals [first, last] meets [lo, hi]."""
    i = int(np.searchsorted(last, lo, "left"))
    return i < len(first) and int(first[i]) <= hi


def _log_append_time(rows: pa.RecordBatch, first: np.ndarray, last: np.ndarray, ts: np.ndarray,
                     set_timestamps: bool) -> tuple[pa.RecordBatch, pa.Array]:
    """LogAppendTime batches: the broker's time, kept in max_timestamp, is every record's timestamp;
    returns the rows so corrected and their timestampType column."""
    offsets = rows.column(0).to_numpy()
    hit = _covered(offsets, first, last)
    if set_timestamps:
        at = ts[np.maximum(np.searchsorted(first, offsets, "right") - 1, 0)]
        stamped = pc.if_else(pa.array(hit), pa.array(at, pa.int64()).cast(pa.timestamp("ms")), rows.column(1))
        rows = rows.set_column(1, "timestamp", stamped)
    return rows, pa.array(hit.astype(np.int32))


def _concat(run: list[pa.RecordBatch]) -> pa.RecordBatch:
    return run[0] if len(run) == 1 else pa.concat_batches(run)
