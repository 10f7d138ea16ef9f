"""One segment: an Arrow IPC data file and its three fixed-width side files.

The active segment's data is an IPC *stream* (`<base>.arrows`): the schema message, then one record
batch message per appended Kafka batch, each carrying that batch's metadata entry in its custom
metadata. A sealed segment's data is an IPC *file* (`<base>.arrow`) whose blocks may hold several
Kafka batches. Either way `.index` maps each message to its byte range, `.timeindex` holds the
running maximum timestamp per message and `.batches` one entry per Kafka batch (message and row).
The data file is always written first, so the side files can be rebuilt from it.
"""

from __future__ import annotations

import itertools
import mmap
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from pylog.model import RECORD_SCHEMA

from . import onecopy as oc
from .errors import CorruptSegment, SegmentReplaced
from .files import OPEN_FLAGS, RecordFile, write_file
from .ipc import (
    FILE_PREFIX,
    SCHEMA_MESSAGE,
    MessageInfo,
    encode_message,
    iter_batches,
    parse_message,
    read_batch,
    scan_messages,
    write_all,
)
from .schema import (
    BATCH_DTYPE,
    INDEX_DTYPE,
    INDEX_STRUCT,
    TIME_DTYPE,
    TIME_STRUCT,
    BatchMeta,
    StoredBatch,
    metas_from_entries,
    pack_entry,
)
from .wire import WIRE_EXT, WireBytes, check_wire, map_wire

_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
STREAM_EXT = ".arrows"
FILE_EXT = ".arrow"
INDEX_EXT = ".index"
TIME_EXT = ".timeindex"
BATCHES_EXT = ".batches"
SIDE_EXTS = (INDEX_EXT, TIME_EXT, BATCHES_EXT)
# a data file's format (FORMAT.md) is told by its schema message
SCHEMA_MESSAGES = {1: SCHEMA_MESSAGE, 2: oc.SCHEMA_V2_MESSAGE}
SCHEMAS = {1: RECORD_SCHEMA, 2: oc.SCHEMA_V2}
_HEAD = 8 + max(len(m) for m in SCHEMA_MESSAGES.values())


def data_format(head: bytes, sealed: bool, default: int) -> int:
    """The format of a data file that starts with `head` (`default` when it is too short to tell)."""
    if sealed:
        head = head[8:]
    for fmt, message in SCHEMA_MESSAGES.items():
        if head.startswith(message):
            return fmt
    return default


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class Stats:
    """Process-wide counters (tests use them to prove what was not touched)."""

    data_maps = 0  # data files memory-mapped
    sealed_maps = 0  # of which sealed segments
    index_rebuilds = 0  # side files rebuilt from data
    wire_maps = 0  # `.wire` files mapped and found to match their segment
    wire_rejected = 0  # `.wire` files found stale or torn (the segment is served from Arrow)
    wire_kept = 0  # segments sealed with the `.wire` they kept while active (nothing encoded)


class _MappedSegments:
    """LRU of sealed segments whose data and side files are mapped; evicting drops our references
    (a map lives on while a returned record batch still points into it)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lru: OrderedDict[int, Segment] = OrderedDict()
        self._lock = threading.Lock()

    def touch(self, seg: Segment) -> None:
        with self._lock:
            self._lru[id(seg)] = seg
            self._lru.move_to_end(id(seg))
            victims = []
            while len(self._lru) > self.limit:
                victims.append(self._lru.popitem(last=False)[1])
        for v in victims:
            v.unmap()

    def forget(self, seg: Segment) -> None:
        with self._lock:
            self._lru.pop(id(seg), None)


MAPPED_SEGMENTS = _MappedSegments(256)


def _map_file(path: Path, size: int, inode: int | None = None) -> pa.Buffer:
    """`size` bytes of `path` mapped; with `inode` (a read-only view's), SegmentReplaced when the
    file is no longer the one the view listed or is shorter than it was."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        if inode is not None:
            st = os.fstat(fd)
            if st.st_ino != inode or st.st_size < size:
                raise SegmentReplaced(str(path))
        mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)
    Stats.data_maps += 1
    return pa.py_buffer(mm)


def entries_from_message(info: MessageInfo, ordinal: int, buf: pa.Buffer,
                         schema: pa.Schema = RECORD_SCHEMA) -> np.ndarray:
    """BATCH_DTYPE entries of one message: from its custom metadata, or derived from the rows for
    an IPC message pylog did not write (producer fields unknown)."""
    if info.batches is not None:
        e = np.frombuffer(info.batches, BATCH_DTYPE).copy()
    else:
        rb = read_batch(buf, info.position, info.length, schema)
        e = np.zeros(1, BATCH_DTYPE)
        if rb.num_rows:
            offs = rb.column(0).to_numpy()
            ts = rb.column(1).cast(pa.int64()).to_numpy()
            e["base_offset"], e["last_offset_delta"] = offs[0], offs[-1] - offs[0]
            e["base_timestamp"], e["max_timestamp"] = ts[0], ts.max()
        e["record_count"], e["size"] = rb.num_rows, info.length
        e["producer_id"] = e["producer_epoch"] = e["base_sequence"] = e["partition_leader_epoch"] = -1
        e["append_time"] = e["delete_horizon"] = -1
    e["message"] = ordinal
    return e


def side_entries(blocks: list[tuple[int, int, np.ndarray]], first_batch: int = 0,
                 running_max: int = -1) -> tuple[bytes, bytes]:
    """`.index` and `.timeindex` bytes for messages given as (position, length, batch entries)."""
    n = len(blocks)
    index = np.zeros(n, INDEX_DTYPE)
    times = np.zeros(n, TIME_DTYPE)
    b = first_batch
    for i, (pos, length, e) in enumerate(blocks):
        first = int(e["base_offset"][0])
        index[i] = (first, pos, length, b)
        if len(e):
            running_max = max(running_max, int(e["max_timestamp"].max()))
        times[i] = (running_max, first)
        b += len(e)
    return index.tobytes(), times.tobytes()


class Segment:
    """A segment of a partition log; the owning PartitionLog serialises calls on it."""

    def __init__(self, directory: Path, base_offset: int, *, sealed: bool, data_size: int,
                 readonly: bool, fmt: int | None = None, default_format: int = 1) -> None:
        self.dir = directory
        self._fmt = fmt  # None: read from the data file's schema message when first needed
        self.default_format = default_format  # for a stream whose schema message was torn
        self.base_offset = base_offset
        self.sealed = sealed
        self.data_size = data_size
        self.readonly = readonly
        self.inode: int | None = None  # a read-only view's: the data file it listed
        self.retired = False  # replaced or deleted; background work on it must be discarded
        self.busy = False  # a background job (seal, compaction) is rewriting it
        self.cleaned = False  # written or checked by compaction since this process opened it
        self._files: tuple[RecordFile, RecordFile, RecordFile] | None = None
        self._buf: pa.Buffer | None = None
        self._fd: int | None = None
        self._max_ts: int | None = None
        self._next_offset: int | None = None
        self._first_append: int | None = None
        self._wire: tuple[memoryview, np.ndarray] | None = None  # `.wire` mapped, batch positions
        self._wire_checked = False  # whether `_wire` is known (None then: no usable `.wire`)
        # active segment: `.wire` kept in step with `.batches` (None: not decided since opened)
        self._wire_live: bool | None = None
        self._wire_fd: int | None = None
        self.dirty = False  # written since the last fsync

    # -- files ---------------------------------------------------------------------------------

    def path(self, ext: str) -> Path:
        return self.dir / (segment_name(self.base_offset) + ext)

    @property
    def data_path(self) -> Path:
        return self.path(FILE_EXT if self.sealed else STREAM_EXT)

    @property
    def fmt(self) -> int:
        """The data file's format (FORMAT.md): 1, or 2 (one copy)."""
        if self._fmt is None:
            head = _pread(self.data_path, 0, _HEAD) if self.data_size else b""
            self._fmt = data_format(head, self.sealed, self.default_format)
        return self._fmt

    @property
    def schema_message(self) -> bytes:
        return SCHEMA_MESSAGES[self.fmt]

    @property
    def data_start(self) -> int:
        """Position of the first record batch message."""
        return len(self.schema_message) + (8 if self.sealed else 0)

    @classmethod
    def create(cls, directory: Path, base_offset: int, fmt: int = 1) -> Segment:
        """A new, empty active segment in format `fmt`: the schema message and empty side files."""
        head = SCHEMA_MESSAGES[fmt]
        seg = cls(directory, base_offset, sealed=False, data_size=len(head), readonly=False, fmt=fmt)
        for ext in SIDE_EXTS:
            write_file(seg.path(ext), b"", sync=False)
        write_file(seg.data_path, head, sync=False)
        seg._files = seg._open_files()
        seg._max_ts, seg._next_offset = -1, base_offset
        return seg

    def _open_files(self) -> tuple[RecordFile, RecordFile, RecordFile]:
        copy, ro = self.readonly and not self.sealed, self.readonly
        return (RecordFile(self.path(BATCHES_EXT), BATCH_DTYPE, copy=copy, readonly=ro),
                RecordFile(self.path(INDEX_EXT), INDEX_DTYPE, copy=copy, readonly=ro),
                RecordFile(self.path(TIME_EXT), TIME_DTYPE, copy=copy, readonly=ro))

    def files(self) -> tuple[RecordFile, RecordFile, RecordFile]:
        """(batches, index, timeindex), opened on first use; a sealed segment's are checked against
        its data then and rebuilt if they do not match."""
        if self._files is None:
            files = self._open_files()
            if self.sealed and not self._consistent(files):
                files = self._rebuild(files)
            self._files = files
        return self._files

    def _matches_data(self, entry: np.void) -> bool:
        """Whether the message an index entry names is really there (read-only openers check the
        last one, as a writer may be swapping files under them)."""
        pos, length = int(entry["position"]), int(entry["length"])
        fd = os.open(self.data_path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            head = os.pread(fd, 8, pos)
            meta_len = _I32.unpack(head[4:8])[0] if len(head) == 8 else -1
            raw = head + os.pread(fd, meta_len, pos + 8) if 0 < meta_len < length else b""
        finally:
            os.close(fd)
        info = parse_message(memoryview(raw), 0, end=length) if raw else None
        return (info is not None and info.length == length and info.batches is not None
                and len(info.batches) >= 8 and _I64.unpack(info.batches[:8])[0] == int(entry["offset"]))

    def _consistent(self, files: tuple[RecordFile, RecordFile, RecordFile]) -> bool:
        batches, index, times = files
        if any(_size(f.path) != len(f) * f.dtype.itemsize for f in files):
            return False  # missing, or a torn entry (sealed side files are written whole)
        if len(index) == len(times) == len(batches) == 0:
            return True  # emptied by compaction
        if len(index) != len(times) or len(index) == 0 or len(batches) == 0:
            return False
        last = index[-1]
        return (int(last["position"]) + int(last["length"]) <= self.data_size
                and int(batches[-1]["message"]) == len(index) - 1
                and int(last["batch"]) < len(batches)
                and (not self.readonly or self._matches_data(last)))

    def _rebuild(self, files: tuple[RecordFile, RecordFile, RecordFile]
                 ) -> tuple[RecordFile, RecordFile, RecordFile]:
        """Side files of a sealed segment from its data (custom metadata of every block)."""
        Stats.index_rebuilds += 1
        buf = self.buffer(self.data_size)
        if self.data_size < FILE_PREFIX or bytes(memoryview(buf)[:6]) != b"ARROW1":
            raise CorruptSegment(f"{self.data_path}: not an Arrow IPC file")
        infos = scan_messages(memoryview(buf), self.data_start)
        blocks = [(info.position, info.length, entries_from_message(info, i, buf, SCHEMAS[self.fmt]))
                  for i, info in enumerate(infos)]
        index_raw, times_raw = side_entries(blocks)
        batches_raw = b"".join(e.tobytes() for _, _, e in blocks)
        batches, index, times = files
        if self.readonly:
            return (_memory_file(batches, batches_raw), _memory_file(index, index_raw),
                    _memory_file(times, times_raw))
        for f, raw in ((batches, batches_raw), (index, index_raw), (times, times_raw)):
            f.replace(raw)
        return files

    def buffer(self, need: int = 0) -> pa.Buffer:
        """The data file mapped, covering at least `need` bytes (remapped as the stream grows)."""
        buf = self._buf
        if buf is None or buf.size < need:
            buf = _map_file(self.data_path, self.data_size, self.inode)
            self._buf = buf
            if self.sealed:
                Stats.sealed_maps += 1
        if self.sealed:
            MAPPED_SEGMENTS.touch(self)
        return buf

    def wire(self) -> tuple[memoryview, np.ndarray] | None:
        """A sealed segment's `.wire` file mapped, with each batch's position in it (and the end
        last), if the file exists and matches `.batches`; None otherwise (encode from Arrow)."""
        wire = self._wire
        if wire is None and not self._wire_checked:
            self._wire_checked = True
            view = map_wire(self.path(WIRE_EXT)) if self.sealed and not self.readonly else None
            if view is not None:
                starts = check_wire(np.frombuffer(view, np.uint8), self.files()[0].entries())
                if starts is None:
                    Stats.wire_rejected += 1
                else:
                    Stats.wire_maps += 1
                    wire = self._wire = (view, starts)
        if wire is not None:
            MAPPED_SEGMENTS.touch(self)  # may unmap another segment; ours is in `wire` either way
        return wire

    def wire_paths(self) -> tuple[Path, ...]:
        """The `.wire` file of a sealed segment when it has one (for copying the segment elsewhere,
        e.g. the remote tier), else nothing."""
        path = self.path(WIRE_EXT)
        return (path,) if self.sealed and path.exists() else ()

    def wire_batches(self, first: int, stop: int) -> list[memoryview] | None:
        """RecordBatch v2 bytes of batches [first, stop) as slices of the mapped `.wire` file (no
        copy), or None when the segment has no usable `.wire`."""
        wire = self.wire()
        if wire is None:
            return None
        view, starts = wire
        bounds = starts[first:stop + 1].tolist()
        return [view[a:b] for a, b in itertools.pairwise(bounds)]

    def unmap(self) -> None:
        self._buf = None
        self._wire, self._wire_checked = None, False
        if self._files is not None:
            for f in self._files:
                f.release()

    # -- queries -------------------------------------------------------------------------------

    @property
    def batch_count(self) -> int:
        return len(self.files()[0])

    @property
    def next_offset(self) -> int:
        """One past the last offset stored (the base offset when empty)."""
        if self._next_offset is None:
            batches = self.files()[0]
            if len(batches):
                e = batches[-1]
                self._next_offset = int(e["base_offset"]) + int(e["last_offset_delta"]) + 1
            else:
                self._next_offset = self.base_offset
        return self._next_offset

    @property
    def max_timestamp(self) -> int:
        """Largest record timestamp in the segment (-1 when empty)."""
        if self._max_ts is None:
            times = self.files()[2]
            self._max_ts = int(times[-1]["timestamp"]) if len(times) else -1
        return self._max_ts

    @property
    def first_append_time(self) -> int:
        if self._first_append is None:
            batches = self.files()[0]
            if not len(batches):
                return -1
            self._first_append = int(batches[0]["append_time"])
        return self._first_append

    def find_batch(self, offset: int) -> int:
        """Index of the first batch whose last offset is >= `offset` (batch_count if none)."""
        batches = self.files()[0]
        i = batches.search("base_offset", offset, "right") - 1
        if i >= 0:
            e = batches[i]
            if int(e["base_offset"]) + int(e["last_offset_delta"]) >= offset:
                return i
        return i + 1

    def message(self, m: int) -> pa.RecordBatch:
        """Rows of message `m` in the data file's own schema (format 2: view types), zero-copy
        over the mapped data."""
        e = self.files()[1][m]
        pos, length = int(e["position"]), int(e["length"])
        return read_batch(self.buffer(pos + length), pos, length, SCHEMAS[self.fmt])

    def records(self, m: int) -> pa.RecordBatch:
        """Rows of message `m` as RECORD_SCHEMA (format 2 values are copied out of their views)."""
        rb = self.message(m)
        return oc.to_record_schema(rb) if self.fmt == 2 else rb

    def messages(self, start: int, stop: int) -> list[pa.RecordBatch]:
        """Rows of messages [start, stop) as RECORD_SCHEMA, zero-copy over the mapped data for
        format 1 (one map, no per-message index lookups); format 2 values are copied out of their
        views (`onecopy.to_record_schema`)."""
        return list(self.message_run(start, stop)[1])

    def message_run(self, start: int, stop: int, *, views: bool = False
                    ) -> tuple[int, Iterator[pa.RecordBatch]]:
        """(how many, the rows of each) of messages [start, stop) as `messages` reads them (with
        `views`, format 2 rows as stored: view columns, nothing copied), each one decoded when it is
        reached: the map and index entries are taken now (under the log's lock), the decoding
        happens as the caller iterates (outside it)."""
        ix = self.files()[1].entries(start, stop)
        if not len(ix):
            return 0, iter(())
        end = _end(ix[-1])
        fmt = self.fmt
        schema_at = 8 if self.sealed else 0  # after a file's magic
        got = iter_batches(self.buffer(end), int(ix[0]["position"]), end, len(ix), schema_at=schema_at,
                           schema=SCHEMAS[fmt], schema_message=SCHEMA_MESSAGES[fmt])
        return len(ix), map(oc.to_record_schema, got) if fmt == 2 and not views else got

    def kafka_batches(self, first: int, stop: int) -> list[memoryview]:
        """Format 2: the RecordBatch v2 bytes of batches [first, stop) of `.batches` (the header
        rebuilt from the stored entry and CRC, then the stored records section, as one buffer)."""
        batches, index, _ = self.files()
        msgs = batches.entries(first, stop)["message"].tolist()
        out: list[memoryview] = []
        last_m, got, m_first = -1, [], 0
        for b, m in enumerate(msgs, first):
            if m != last_m:
                e = index[m]
                pos, length = int(e["position"]), int(e["length"])
                view = memoryview(self.buffer(pos + length))[pos:pos + length]
                got, last_m, m_first = oc.kafka_batches(view), m, int(e["batch"])
            out.append(memoryview(b"".join(got[b - m_first])))
        return out

    def stored_batches(self, entries: np.ndarray) -> list[StoredBatch]:
        """StoredBatch for each entry of a contiguous run of this segment's `.batches` (records as
        RECORD_SCHEMA)."""
        metas = metas_from_entries(entries)
        msgs = entries["message"].tolist()
        rows = entries["row"].tolist()
        out: list[StoredBatch] = []
        last_m, rb = -1, None
        for meta, m, row in zip(metas, msgs, rows):
            if m != last_m:
                rb, last_m = self.records(m), m
            assert rb is not None
            out.append(StoredBatch(meta, rb.slice(row, meta.record_count)))
        return out

    def snapshot(self) -> SegmentSnapshot:
        """The data mapped and the side entries, fixed now (take it under the log's lock; decode
        the blocks outside it)."""
        batches, index, _ = self.files()
        ix = np.array(index.entries())
        b = np.array(batches.entries())
        buf = self.buffer(_end(ix[-1]) if len(ix) else 0) if len(ix) else pa.py_buffer(b"")
        return SegmentSnapshot(self.base_offset, self.sealed, buf, ix, b, self.fmt)

    # -- writing (active segment) --------------------------------------------------------------

    def append(self, records: pa.RecordBatch, meta: BatchMeta, append_time: int, size: int,
               codec: str | None = None, wire: WireBytes | None = None) -> int:
        """Write one Kafka batch as one message (body compressed with `codec`); data first, then
        its `wire` bytes to `.wire` (see `_open_active_wire`), then `.batches`, `.index`,
        `.timeindex`. `size` is the batch's size for fetch budgets (the length of `wire` when
        given). Returns the message length."""
        batches, index, times = self.files()
        if self._wire_live is None:
            self._wire_live = wire is not None and self._open_active_wire(batches.entries())
        msg, batch_no, pos = len(index), len(batches), self.data_size
        entry = pack_entry(meta, append_time=append_time, message=msg, row=0, size=size)
        message = encode_message(records, entry, codec)
        length = message.size
        if self._fd is None:
            self._fd = os.open(self.data_path, OPEN_FLAGS, 0o644)
        written = os.write(self._fd, message)
        if written != length:  # a short write: hand over the rest
            write_all(self._fd, [message.slice(written)])
        self.data_size += length
        if self._wire_live:
            if wire is not None and len(wire) == size:
                write_all(self._wire_fd, [wire])  # type: ignore[arg-type]
            else:  # a batch without its bytes: this segment's `.wire` is encoded when sealed
                self._drop_active_wire()
        batches.append(entry)
        index.append(INDEX_STRUCT.pack(meta.base_offset, pos, length, batch_no))
        self._max_ts = max(self.max_timestamp, meta.max_timestamp)
        times.append(TIME_STRUCT.pack(self._max_ts, meta.base_offset))
        self._next_offset = meta.next_offset
        self.dirty = True
        return length

    def append_rows(self, rows: oc.Rows, append_time: int) -> int:
        """Format 2: write Kafka batches (their sections as stored; one, or a follower's run of
        them) as one message, then `.batches`, `.index`, `.timeindex`; each batch's `size` is its
        exact wire length. Returns the message length."""
        batches, index, times = self.files()
        msg, batch_no, pos = len(index), len(batches), self.data_size
        e = rows.entries
        e["append_time"], e["message"] = append_time, msg
        message = oc.encode_message(rows)
        if self._fd is None:
            self._fd = os.open(self.data_path, OPEN_FLAGS, 0o644)
        write_all(self._fd, message.chunks)
        self.data_size += message.length
        base = int(e["base_offset"][0])
        batches.append(e.tobytes())
        index.append(INDEX_STRUCT.pack(base, pos, message.length, batch_no))
        ts = e["max_timestamp"]
        self._max_ts = max(self.max_timestamp, int(ts[0]) if len(ts) == 1 else int(ts.max()))
        times.append(TIME_STRUCT.pack(self._max_ts, base))
        self._next_offset = int(e["base_offset"][-1]) + int(e["last_offset_delta"][-1]) + 1
        self.dirty = True
        return message.length

    def _open_active_wire(self, entries: np.ndarray) -> bool:
        """Open the active segment's `.wire` for appending: new (empty) for an empty segment,
        else the file left by an earlier run if its first bytes hold exactly the batches of
        `.batches` (a torn tail past them is cut). False, and no file, when it cannot be kept
        in step (missing, stale or short: the batches it lacks are not known any more)."""
        path = self.path(WIRE_EXT)
        flags = os.O_WRONLY | getattr(os, "O_CLOEXEC", 0)
        if not len(entries):
            self._wire_fd = os.open(path, flags | os.O_CREAT | os.O_TRUNC, 0o644)
            return True
        total = int(entries["size"].sum(dtype=np.int64))
        view = map_wire(path)
        ok = view is not None and len(view) >= total and check_wire(
            np.frombuffer(view, np.uint8, total), entries) is not None
        del view
        if not ok:
            self._drop_active_wire()
            return False
        fd = os.open(path, flags)
        os.ftruncate(fd, total)
        os.lseek(fd, total, os.SEEK_SET)
        self._wire_fd = fd
        return True

    def _drop_active_wire(self) -> None:
        self._wire_live = False
        if self._wire_fd is not None:
            os.close(self._wire_fd)
            self._wire_fd = None
        try:
            os.unlink(self.path(WIRE_EXT))
        except FileNotFoundError:
            pass

    def recover(self) -> None:
        """Validate the tail of a stream segment: drop side entries that point past the data, rebuild
        entries for complete messages they lack, cut a torn last message. A read-only segment
        does the same in memory and never writes."""
        files = self.files()
        batches, index, times = files
        size = self.data_size
        head = self.schema_message
        n_schema = len(head)
        head_ok = size >= n_schema and _pread(self.data_path, 0, n_schema) == head
        k = 0
        if head_ok:
            k = min(len(index), len(times))
            k = min(k, int(batches[-1]["message"]) + 1) if len(batches) else 0
            if k and _end(index[k - 1]) > size:
                ends = index.entries(0, k)
                k = int(np.searchsorted(ends["position"] + ends["length"], size, side="right"))
            if k and self.readonly and not self._matches_data(index[k - 1]):
                k = 0  # side files from another layout (a swap in progress): index the data afresh
        end = _end(index[k - 1]) if k else n_schema
        exact = (head_ok and end == size and k == len(index) == len(times)
                 and len(batches) * BATCH_DTYPE.itemsize == _size(batches.path)
                 and len(index) * INDEX_DTYPE.itemsize == _size(index.path)
                 and len(times) * TIME_DTYPE.itemsize == _size(times.path))
        if exact:
            return
        nb = batches.search("message", k - 1, "right") if k else 0  # through the last kept message
        kept = [f.entries(0, n).tobytes() for f, n in ((batches, nb), (index, k), (times, k))]
        blocks: list[tuple[int, int, np.ndarray]] = []
        if head_ok and size > end:
            buf = _map_file(self.data_path, size)
            blocks = [(info.position, info.length, entries_from_message(info, k + i, buf, SCHEMAS[self.fmt]))
                      for i, info in enumerate(scan_messages(memoryview(buf), end))]
            if blocks:
                end = blocks[-1][0] + blocks[-1][1]
            Stats.index_rebuilds += 1
        running = int(times[k - 1]["timestamp"]) if k else -1
        index_raw, times_raw = side_entries(blocks, nb, running)
        rebuilt = b"".join(e.tobytes() for _, _, e in blocks)
        raws = (kept[0] + rebuilt, kept[1] + index_raw, kept[2] + times_raw)
        if self.readonly:
            self._files = tuple(_memory_file(f, raw) for f, raw in zip(files, raws))  # type: ignore[assignment]
            self.data_size = end if head_ok else 0
        else:
            if not head_ok:
                write_file(self.data_path, head, sync=False)
                end = n_schema
            elif end < size:
                os.truncate(self.data_path, end)
            self.data_size = end
            for f, raw in zip(files, raws):
                f.replace(raw)
        self._max_ts = self._next_offset = None
        self._buf = None

    def fsync(self) -> None:
        if self.dirty:
            if self._fd is not None:
                os.fsync(self._fd)
            if self._wire_fd is not None:
                os.fsync(self._wire_fd)
            if self._files is not None:
                for f in self._files:
                    f.fsync()
            self.dirty = False

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._wire_fd is not None:
            os.close(self._wire_fd)
            self._wire_fd = None
        self._wire_live = None
        if self._files is not None:
            for f in self._files:
                f.close()
        self._wire, self._wire_checked = None, False
        MAPPED_SEGMENTS.forget(self)

    def delete_files(self) -> None:
        """Unlink data first, then the side files (an orphan side file is removed on open)."""
        self.close()
        self.retired = True
        for ext in (FILE_EXT, STREAM_EXT, *SIDE_EXTS, WIRE_EXT):
            try:
                os.unlink(self.path(ext))
            except FileNotFoundError:
                pass


class SegmentSnapshot:
    """An immutable view of one segment for background jobs."""

    def __init__(self, base_offset: int, sealed: bool, buf: pa.Buffer, index: np.ndarray,
                 batches: np.ndarray, fmt: int = 1) -> None:
        self.base_offset = base_offset
        self.sealed = sealed
        self.buf = buf
        self.index = index
        self.batches = batches
        self.fmt = fmt

    def blocks(self) -> list[tuple[pa.RecordBatch, np.ndarray]]:
        """Every message's rows (as RECORD_SCHEMA) with its batch entries."""
        bounds = [*self.index["batch"].tolist(), len(self.batches)]
        schema = SCHEMAS[self.fmt]
        out = []
        for m, e in enumerate(self.index):
            rb = read_batch(self.buf, int(e["position"]), int(e["length"]), schema)
            rows = oc.to_record_schema(rb) if self.fmt == 2 else rb
            out.append((rows, self.batches[bounds[m]:bounds[m + 1]]))
        return out

    def rows(self) -> list[oc.Rows]:
        """Format 2: every message as Rows (metadata and small buffers read, sections untouched),
        their entries those of `.batches`."""
        view = memoryview(self.buf)
        bounds = [*self.index["batch"].tolist(), len(self.batches)]
        out = []
        for m, e in enumerate(self.index):
            pos = int(e["position"])
            rows = oc.rows_from_message(view[pos:pos + int(e["length"])])
            rows.entries = self.batches[bounds[m]:bounds[m + 1]].copy()
            out.append(rows)
        return out


def _end(e: np.void) -> int:
    return int(e["position"]) + int(e["length"])


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return -1


def _pread(path: Path, pos: int, n: int) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        return os.pread(fd, n, pos)
    finally:
        os.close(fd)


def _memory_file(f: RecordFile, raw: bytes) -> RecordFile:
    """A RecordFile whose entries live in memory only (read-only recovery)."""
    mem = RecordFile(f.path, f.dtype, count=0, copy=True)
    mem._mapped = np.frombuffer(raw, f.dtype)
    mem._count = len(mem._mapped)
    return mem
