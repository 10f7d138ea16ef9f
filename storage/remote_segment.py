"""Reading a partition's remote segments as the local read path reads sealed segments.

A remote segment is a sealed local segment copied byte for byte (FORMAT.md), so reading it needs
the same three side files and the data file's messages. The side files are small and each is read
whole on first use (one GET; batch metadata needs only ``.batches``); the ``.arrow`` data file is
read by byte range through a ``RemoteReadCache`` (ranged GETs, read-ahead), and its messages
decode with the same IPC readers a mapped local file uses. A segment uploaded with its ``.wire``
file (optional) serves ``read_wire`` as slices of it, read through the same cache and checked
against ``.batches`` as a local read checks its mapped file; without one, or when it does not
match, batches come as rows for the caller to encode. ``RemoteLog`` offers a partition's remote
part through the reading subset of ``PartitionLog``'s interface (read, scan, batch_metadata,
offset_for_timestamp, ...) over the segments of one manifest version, which it pins: a reader that
planned with that version keeps reading its objects even after a newer manifest supersedes it (the
store keeps superseded objects for the reader grace period).
"""

from __future__ import annotations

import bisect
import io
import itertools
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as paipc

from pylog.model import RECORD_SCHEMA

from . import onecopy as oc
from .errors import OffsetOutOfRange, StorageError
from .ipc import read_batch, read_batches
from .remote_cache import RemoteFile, RemoteReadCache
from .remote_layout import RemoteLogSegment, RemoteManifest, segment_key
from .remote_store import RemoteObjectNotFound, RemoteStore
from .schema import BATCH_DTYPE, INDEX_DTYPE, TIME_DTYPE, StoredBatch, metas_from_entries
from .wire import WIRE_EXT, check_wire, wire_starts

READ_CHUNK = 1024  # batch entries looked at per step of a fetch's byte budget
# A whole-segment read fetches its object in equal parts of at most this many bytes, one GET each
# (an object up to this size in one request: fewer requests cost the store and the client less).
WHOLE_READ_PART = 32 << 20
IPC_FILE_HEAD = b"ARROW1\0\0"  # an Arrow IPC file's magic and padding, before its stream
V2_FIRST_MESSAGE = len(IPC_FILE_HEAD) + len(oc.SCHEMA_V2_MESSAGE)  # where a format 2 file's batches start


class RemoteSegment:
    """One remote segment: side files in memory once read, data through the cache."""

    def __init__(self, store: RemoteStore, prefix: str, segment: RemoteLogSegment,
                 cache: RemoteReadCache) -> None:
        self.store = store
        self.prefix = prefix
        self.segment = segment
        self.cache = cache
        self.base_offset = segment.base_offset
        self.next_offset = segment.end_offset + 1
        self.max_timestamp = segment.max_timestamp
        self._side: dict[str, np.ndarray] = {}  # side file extension -> its entries, once read
        self._side_requested = False
        self._wire: tuple[RemoteFile, np.ndarray] | None = None  # `.wire` object, batch positions
        self._wire_checked = False
        self._wire_requested = False
        self._lock = threading.Lock()

    def key(self, ext: str) -> str:
        return segment_key(self.prefix, self.segment, ext)

    def side(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(batches, index, timeindex) entries, each read whole on first use."""
        return self.batches, self.index, self.times

    def _side_file(self, ext: str, dt: np.dtype) -> np.ndarray:
        got = self._side.get(ext)
        if got is None:
            with self._lock:
                got = self._side.get(ext)
                if got is None:
                    raw = self.store.read_bytes(self.key(ext))
                    got = self._side[ext] = np.frombuffer(raw, dt, count=len(raw) // dt.itemsize)
        return got

    @property
    def batches(self) -> np.ndarray:
        return self._side_file(".batches", BATCH_DTYPE)

    @property
    def index(self) -> np.ndarray:
        return self._side_file(".index", INDEX_DTYPE)

    @property
    def times(self) -> np.ndarray:
        return self._side_file(".timeindex", TIME_DTYPE)

    @property
    def data(self) -> RemoteFile:
        ix = self.index
        end = int(ix["position"][-1] + ix["length"][-1]) if len(ix) else 0
        return RemoteFile(self.store, self.key(".arrow"), end)  # no byte past the last message is read

    def whole(self, ahead: ObjectReadAhead | None = None, *, views: bool = False) -> Iterator[pa.RecordBatch]:
        """Every record of the segment (offsets ``[base_offset, next_offset)``), read front to back
        in one pass over the data object, without its side files or the read cache: the way a scan
        of whole segments (a Spark task, a full read) reads as fast as the store serves one object.
        The object arrives on a background thread (``ahead``, started early by a scan that knows
        this segment comes next) in a few large parts while the caller decodes; the batches are
        zero-copy slices of those parts (`views`: format 2 batches as stored, see
        ``PartitionLog.scan``). An IPC file is its magic, then an IPC stream (schema, batches, end
        marker), then a footer."""
        lo, hi = self.base_offset, self.next_offset
        with ahead or self.read_ahead() as f:
            if bytes(f.read(len(IPC_FILE_HEAD))) != IPC_FILE_HEAD:
                raise StorageError(f"{self.store.uri}/{self.key('.arrow')} is not an Arrow IPC file")
            for rb in paipc.open_stream(pa.PythonFile(f, mode="r")):
                if rb.schema.metadata and not views:  # format 2 (FORMAT.md): view columns as RECORD_SCHEMA
                    rb = oc.to_record_schema(rb)
                rb = _clip(rb, lo, hi)
                if rb.num_rows:
                    yield rb

    def read_ahead(self) -> ObjectReadAhead:
        """Start fetching the data object in the background (see ``whole``)."""
        return ObjectReadAhead(lambda: self.store.open(self.key(".arrow")))

    def find_batch(self, offset: int) -> int:
        """Index of the first batch whose last offset is >= ``offset`` (len(batches) if none)."""
        b = self.batches
        i = int(np.searchsorted(b["base_offset"], offset, "right")) - 1
        if i >= 0 and int(b["base_offset"][i]) + int(b["last_offset_delta"][i]) >= offset:
            return i
        return i + 1

    def messages(self, start: int, stop: int, then: RemoteSegment | None = None, *,
                 views: bool = False) -> list[pa.RecordBatch]:
        """Rows of messages ``[start, stop)``: one byte range from the cache, decoded in one pass
        (`views`: format 2 batches as stored, see ``PartitionLog.scan``)."""
        ix = self.index[start:stop]
        if not len(ix):
            return []
        pos = int(ix["position"][0])
        end = int(ix["position"][-1] + ix["length"][-1])
        if then is not None and not then._side_requested:
            then._side_requested = True  # a sequential reader: the next segment's side files too
            self.cache.submit(then.side)
        buf = self.cache.read(self.data, pos, end, then=then.data if then is not None else None)
        if self.fmt == 2:
            got = read_batches(buf, 0, end - pos, len(ix), schema=oc.SCHEMA_V2)
            return got if views else [oc.to_record_schema(rb) for rb in got]
        if len(ix) == 1:
            return [read_batch(buf, 0, end - pos)]
        return read_batches(buf, 0, end - pos, len(ix))

    @property
    def fmt(self) -> int:
        """The data file's format (FORMAT.md), told by where its first message starts."""
        ix = self.index
        return 2 if len(ix) and int(ix["position"][0]) == V2_FIRST_MESSAGE else 1

    def kafka_batches(self, first: int, stop: int, then: RemoteSegment | None = None) -> list[memoryview]:
        """Format 2: RecordBatch v2 bytes of batches ``[first, stop)``, from the messages holding
        them (one byte range from the cache): headers rebuilt from the stored entries, sections as
        stored."""
        b = self.batches
        m0, m1 = int(b["message"][first]), int(b["message"][stop - 1]) + 1
        ix = self.index[m0:m1]
        pos = int(ix["position"][0])
        end = int(ix["position"][-1] + ix["length"][-1])
        view = memoryview(self.cache.read(self.data, pos, end, then=then.data if then is not None else None))
        out: list[memoryview] = []
        for e in ix:
            at = int(e["position"]) - pos
            got = oc.kafka_batches(view[at:at + int(e["length"])])
            lo, hi = max(first, int(e["batch"])), min(stop, int(e["batch"]) + len(got))
            out += [memoryview(b"".join(got[i - int(e["batch"])])) for i in range(lo, hi)]
        return out

    def message(self, m: int) -> pa.RecordBatch:
        return self.messages(m, m + 1)[0]

    def wire(self) -> tuple[RemoteFile, np.ndarray] | None:
        """The segment's `.wire` object and each batch's position in it (one HEAD on first use);
        None when it was not uploaded or its size does not match `.batches`."""
        if not self._wire_checked:
            starts = wire_starts(self.batches)
            try:
                size = self.store.size(self.key(WIRE_EXT))
            except RemoteObjectNotFound:
                size = -1
            with self._lock:
                if not self._wire_checked:
                    if size == int(starts[-1]):
                        self._wire = (RemoteFile(self.store, self.key(WIRE_EXT), size), starts)
                    elif size >= 0:
                        WireStats.rejected += 1
                    self._wire_checked = True
        return self._wire

    def prefetch_wire(self) -> None:
        """Learn whether this segment has a usable `.wire` and start fetching its head (read-ahead
        for a reader that will come to this segment next)."""
        wire = self.wire()
        if wire is not None:
            self.cache.prefetch(wire[0], 0, 1)

    def wire_batches(self, first: int, stop: int,
                     then: RemoteSegment | None = None) -> list[memoryview] | None:
        """RecordBatch v2 bytes of batches ``[first, stop)``: one byte range of the `.wire` object
        from the cache, each batch's header checked against its `.batches` entry (base offset,
        length, record count); None when the segment has no usable `.wire` (the caller encodes)."""
        if first < stop and self.fmt == 2:
            return self.kafka_batches(first, stop, then)
        wire = self.wire()
        if wire is None or first >= stop:
            return None
        f, starts = wire
        if then is not None and not then._wire_requested:
            then._wire_requested = True  # a sequential reader: the next segment's `.wire` head early
            self.cache.submit(then.prefetch_wire)
        nxt = then._wire[0] if then is not None and then._wire is not None else None
        a, b = int(starts[first]), int(starts[stop])
        view = memoryview(self.cache.read(f, a, b, then=nxt))
        if check_wire(np.frombuffer(view, np.uint8), self.batches[first:stop]) is None:
            with self._lock:
                self._wire = None  # stale or torn: rows from now on
            WireStats.rejected += 1
            return None
        WireStats.served += stop - first
        bounds = (starts[first:stop + 1] - a).tolist()
        return [view[x:y] for x, y in itertools.pairwise(bounds)]

    def stored_batches(self, entries: np.ndarray, then: RemoteSegment | None = None) -> list[StoredBatch]:
        """StoredBatch for each entry of a contiguous run of this segment's batches."""
        if not len(entries):
            return []
        msgs = entries["message"]
        m0, m1 = int(msgs[0]), int(msgs[-1]) + 1
        rbs = self.messages(m0, m1, then)
        out: list[StoredBatch] = []
        for meta, m, row in zip(metas_from_entries(entries), msgs.tolist(), entries["row"].tolist()):
            out.append(StoredBatch(meta, rbs[m - m0].slice(row, meta.record_count)))
        return out


class RemoteLog:
    """A partition's remote segments (one manifest's, pinned) behind PartitionLog's reading methods.

    Offsets ``[log_start_offset, log_end_offset)``; ``log_end_offset`` is one past the last remote
    offset. Thread-safe for readers (the segment list never changes)."""

    def __init__(self, store: RemoteStore, prefix: str, segments: Sequence[RemoteLogSegment],
                 cache: RemoteReadCache, *, log_start_offset: int | None = None,
                 version: int | None = None) -> None:
        self.store = store
        self.prefix = prefix
        self.cache = cache
        self.version = version
        self.segments = [RemoteSegment(store, prefix, s, cache)
                         for s in sorted(segments, key=lambda s: s.base_offset)]
        self._bases = [s.base_offset for s in self.segments]
        first = self.segments[0].base_offset if self.segments else (log_start_offset or 0)
        self.log_start_offset = max(first, log_start_offset if log_start_offset is not None else first)
        self.log_end_offset = self.segments[-1].next_offset if self.segments else self.log_start_offset

    @classmethod
    def from_manifest(cls, store: RemoteStore, manifest: RemoteManifest, cache: RemoteReadCache) -> RemoteLog:
        return cls(store, manifest.prefix, manifest.segments, cache,
                   log_start_offset=manifest.log_start_offset, version=manifest.version)

    @property
    def local_log_start_offset(self) -> int:
        """The first offset this log itself holds (its log start: it has no other tier)."""
        return self.log_start_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.segment.size_bytes for s in self.segments)

    def close(self) -> None:
        """Nothing to release (the cache is shared and closed by its owner)."""

    def _after(self, k: int) -> RemoteSegment | None:
        return self.segments[k + 1] if k + 1 < len(self.segments) else None

    def _first_segment(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def read(self, start_offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one: bool = True) -> list[StoredBatch]:
        """As ``PartitionLog.read``: whole batches from the one holding ``start_offset`` within the
        byte budget (stored sizes), wholly below ``max_offset``."""
        return self._read(start_offset, max_bytes, max_offset, min_one, wire=False)  # type: ignore[return-value]

    def read_wire(self, start_offset: int, max_bytes: int, *, max_offset: int | None = None,
                  min_one: bool = True) -> list[StoredBatch | memoryview]:
        """As ``PartitionLog.read_wire``: ``read``, except that batches of segments with a usable
        `.wire` object come as their RecordBatch v2 bytes; the others as StoredBatch."""
        return self._read(start_offset, max_bytes, max_offset, min_one, wire=True)

    def _read(self, start_offset: int, max_bytes: int, max_offset: int | None, min_one: bool, *,
              wire: bool) -> list[StoredBatch | memoryview]:
        if start_offset < self.log_start_offset or start_offset > self.log_end_offset:
            raise OffsetOutOfRange(start_offset, self.log_start_offset, self.log_end_offset)
        limit = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        out: list[StoredBatch | memoryview] = []
        budget = max_bytes
        si = self._first_segment(start_offset)
        for k in range(si, len(self.segments)):
            seg = self.segments[k]
            if seg.base_offset >= limit:
                break
            i = seg.find_batch(start_offset) if k == si else 0
            stop = seg.find_batch(limit)
            while i < stop:
                entries = seg.batches[i:min(stop, i + READ_CHUNK)]
                sizes = np.cumsum(entries["size"], dtype=np.int64)
                take = int(np.searchsorted(sizes, budget, side="right"))
                if not out and take == 0 and min_one:
                    take = 1
                if take:
                    then = self._after(k)
                    sent = seg.wire_batches(i, i + take, then) if wire else None
                    out.extend(sent if sent is not None else seg.stored_batches(entries[:take], then))
                    budget -= int(sizes[take - 1])
                if take < len(entries):
                    return out
                i += take
        return out

    def batch_metadata(self, start_offset: int | None = None, end_offset: int | None = None, *,
                       attributes: int = 0) -> np.ndarray:
        """As ``PartitionLog.batch_metadata`` (side files only, no data read)."""
        start = self.log_start_offset if start_offset is None else max(start_offset, self.log_start_offset)
        end = self.log_end_offset if end_offset is None else min(end_offset, self.log_end_offset)
        parts: list[np.ndarray] = []
        first = self._first_segment(start)
        wanted = [s for s in self.segments[first:] if s.base_offset < end] if start < end else []
        if len(wanted) > 1:
            self.cache.map(_batches, wanted)  # `.batches` of many segments: GETs in parallel
        for seg in wanted:
            if seg.base_offset >= end:
                break
            b = seg.batches
            i = seg.find_batch(start) if seg.base_offset < start else 0
            entries = b[i:int(np.searchsorted(b["base_offset"], end, "left"))]
            if attributes:
                entries = entries[(entries["attributes"] & attributes) != 0]
            parts.append(np.array(entries))
        return np.concatenate(parts) if len(parts) > 1 else parts[0] if parts else np.zeros(0, BATCH_DTYPE)

    def scan(self, start_offset: int | None = None, end_offset: int | None = None, *,
             views: bool = False) -> Iterator[pa.RecordBatch]:
        """As ``PartitionLog.scan``: record batches with exactly the records start <= offset < end."""
        start = self.log_start_offset if start_offset is None else max(start_offset, self.log_start_offset)
        end = self.log_end_offset if end_offset is None else min(end_offset, self.log_end_offset)
        pending: ObjectReadAhead | None = None
        for k, seg in enumerate(self.segments):
            if seg.next_offset <= start or seg.base_offset >= end:
                continue
            if start <= seg.base_offset and seg.next_offset <= end:
                # every record of the segment: one sequential read, the next whole one started early
                ahead, pending = pending, None
                nxt = self._after(k)
                if nxt is not None and nxt.next_offset <= end:
                    pending = nxt.read_ahead()
                try:
                    yield from seg.whole(ahead, views=views)
                except BaseException:
                    if pending is not None:
                        pending.close()
                    raise
                continue
            offs = seg.index["offset"]
            m0 = max(0, int(np.searchsorted(offs, start, "right")) - 1)
            m1 = int(np.searchsorted(offs, end, "left"))
            nxt = self._after(k) if self._after(k) is not None and self._after(k).base_offset < end else None  # type: ignore[union-attr]
            for a in range(m0, m1, SCAN_MESSAGES):
                parts = seg.messages(a, min(m1, a + SCAN_MESSAGES), nxt, views=views)
                for rb in parts:
                    rb = _clip(rb, start, end)
                    if rb.num_rows:
                        yield rb

    def read_table(self, start_offset: int | None = None, end_offset: int | None = None) -> pa.Table:
        return pa.Table.from_batches(list(self.scan(start_offset, end_offset)), schema=RECORD_SCHEMA)

    def offset_for_timestamp(self, timestamp_ms: int, *,
                             max_offset: int | None = None) -> tuple[int, int] | None:
        """As ``PartitionLog.offset_for_timestamp``; segments whose largest timestamp is older are
        skipped from the manifest alone, then the time index names the message to read."""
        for seg in self.segments:
            if seg.max_timestamp < timestamp_ms or seg.next_offset <= self.log_start_offset:
                continue
            times = seg.times
            for m in range(int(np.searchsorted(times["timestamp"], timestamp_ms, "left")), len(times)):
                rb = seg.message(m)
                offs = rb.column(0).to_numpy()
                ts = rb.column(1).cast(pa.int64()).to_numpy()
                hits = np.flatnonzero((ts >= timestamp_ms) & (offs >= self.log_start_offset))
                if len(hits):
                    off = int(offs[hits[0]])
                    if max_offset is not None and off >= max_offset:
                        return None
                    return off, int(ts[hits[0]])
        return None

    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        best = max((s.max_timestamp for s in self.segments), default=-1)
        for seg in self.segments:
            if seg.max_timestamp != best or not len(seg.batches):
                continue
            times = seg.times
            for m in range(int(np.searchsorted(times["timestamp"], best, "left")), len(times)):
                rb = seg.message(m)
                ts = rb.column(1).cast(pa.int64()).to_numpy()
                hits = np.flatnonzero(ts == best)
                if len(hits):
                    return best, int(rb.column(0)[int(hits[0])].as_py())
        return None

    def segments_in(self, start: int, end: int | None = None, *, min_timestamp: int | None = None
                    ) -> list[RemoteLogSegment]:
        """Segments holding an offset in ``[start, end)`` and, with ``min_timestamp``, a record at
        or after it (pruning by the manifest alone)."""
        return [s.segment for s in self.segments
                if s.next_offset > start and (end is None or s.base_offset < end)
                and (min_timestamp is None or s.max_timestamp >= min_timestamp)]


SCAN_MESSAGES = 64  # messages decoded per cache read while scanning


class WireStats:
    """Counters a benchmark or test reads: batches served from `.wire` objects, objects rejected."""

    served = 0
    rejected = 0


def _clip(rb: pa.RecordBatch, lo: int, hi: int) -> pa.RecordBatch:
    """The rows of ``rb`` with offsets in ``[lo, hi)`` (offsets ascend within a batch)."""
    offsets = rb.column(0).to_numpy()
    if len(offsets) and (offsets[0] < lo or offsets[-1] >= hi):
        a, b = np.searchsorted(offsets, [lo, hi])
        rb = rb.slice(int(a), int(b - a))
    return rb


def _batches(segment: RemoteSegment) -> np.ndarray:
    return segment.batches


class ObjectReadAhead(io.RawIOBase):
    """A sequential reader of one object that a background thread fetches in equal parts of at
    most ``part`` bytes (one GET each), at most ``depth`` parts ahead of the part being read, so
    the store's latency overlaps the reader's work. Reads return zero-copy views of the fetched
    parts (copied only where one spans two parts), so Arrow's readers decode straight out of them.
    Closing it stops the thread; a store error is raised to the reader."""

    def __init__(self, open_file: Callable[[], pa.NativeFile], *, part: int = WHOLE_READ_PART,
                 depth: int = 1) -> None:
        super().__init__()
        self._queue: queue.Queue[pa.Buffer | BaseException | None] = queue.Queue()
        self._room = threading.Semaphore(depth + 1)  # parts fetched (or being fetched) and not yet read
        self._stop = threading.Event()
        self._buf = memoryview(b"")
        self._eof = False
        self._started = False  # whether a part was handed to the reader yet
        self._thread = threading.Thread(target=self._fetch, args=(open_file, part), daemon=True,
                                        name="remote-read-ahead")
        self._thread.start()

    def _fetch(self, open_file: Callable[[], pa.NativeFile], part: int) -> None:
        item: pa.Buffer | BaseException | None = None
        try:
            with open_file() as f:
                size = f.size()
                parts = max(1, -(-size // part))
                step = (-(-size // parts) + 63) // 64 * 64  # part starts stay 64-byte aligned
                pos = 0
                while pos < size and self._wait_for_room():
                    got = f.read_buffer(min(step, size - pos))
                    if not got.size:
                        break
                    pos += got.size
                    self._queue.put(got)
        except BaseException as exc:  # handed to the reader, raised there
            item = exc
        self._queue.put(item)

    def _wait_for_room(self) -> bool:
        while not self._stop.is_set():
            if self._room.acquire(timeout=0.1):
                return True
        return False

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes | memoryview:
        """``size`` bytes, fewer only at the end of the object (what Arrow's readers expect): a
        view of the fetched part when it holds them all, else one copy."""
        need = -1 if size is None or size < 0 else size
        if need == 0 or not self._fill():
            return b""
        if 0 < need <= len(self._buf):
            take, self._buf = self._buf[:need], self._buf[need:]
            return take
        parts: list[memoryview] = []
        while need != 0 and self._fill():
            take = self._buf if need < 0 else self._buf[:need]
            parts.append(take)
            self._buf = self._buf[len(take):]
            if need > 0:
                need -= len(take)
        return b"".join(parts)

    def readinto(self, b: Any) -> int:
        if not self._fill():
            return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n

    def _fill(self) -> bool:
        """Whether bytes are buffered, waiting for the next part if needed; False at the end."""
        while not self._buf and not self._eof:
            item = self._queue.get()
            if item is None:
                self._eof = True
            elif isinstance(item, BaseException):
                self._eof = True
                raise item
            else:
                if self._started:
                    self._room.release()  # the part before this one is read: room to fetch another
                self._started = True
                self._buf = memoryview(item)
        return bool(self._buf)

    def close(self) -> None:
        self._stop.set()
        super().close()
