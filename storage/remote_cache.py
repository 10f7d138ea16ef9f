"""A bounded read-ahead cache over remote objects: fixed-size chunks, LRU by bytes, background prefetch.

Remote segments are immutable, so a chunk ``(store, key, n)`` (bytes ``[n * chunk, (n + 1) * chunk)``)
never goes stale. A read asks for a byte range; the chunks it needs come from the cache or from
one ranged GET each, fetched in parallel on the cache's thread pool. A reader moving forward
through an object (the chunk it asks for follows the one it asked for last) makes the cache fetch
the next ``readahead`` chunks in the background, and a reader near an object's end may name the
object that follows (the partition's next segment) so its head is fetched too: a consumer
catching up from offset 0 then waits for the store only when it outruns the store.

Chunks in flight are not counted against the budget; a chunk larger than the whole budget is
returned but not kept. Threads never run on a caller's event loop: every store call happens here.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa

from .remote_store import RemoteObjectNotFound, RemoteStorageError, RemoteStore

DEFAULT_CHUNK_BYTES = 8 << 20  # S3 GETs of 8 MiB reach most of a store's single-stream speed
DEFAULT_BUDGET_BYTES = 256 << 20
DEFAULT_READAHEAD_CHUNKS = 4
DEFAULT_THREADS = 4

_T = TypeVar("_T")
_R = TypeVar("_R")


@dataclass(frozen=True, slots=True)
class RemoteFile:
    """An object of known size in a store (sizes come from the listing or a HEAD, once)."""

    store: RemoteStore
    key: str
    size: int


class CacheStats:
    """Counters a benchmark or test reads (hits, GETs made, bytes fetched, prefetches started)."""

    def __init__(self) -> None:
        self.hits = 0
        self.misses = 0
        self.gets = 0
        self.bytes_fetched = 0
        self.prefetches = 0
        self.objects: set[str] = set()  # keys read from


class RemoteReadCache:
    """Chunks of remote objects, at most ``budget_bytes`` of them kept (least recently used go)."""

    def __init__(self, budget_bytes: int = DEFAULT_BUDGET_BYTES, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 readahead: int = DEFAULT_READAHEAD_CHUNKS, threads: int = DEFAULT_THREADS) -> None:
        if chunk_bytes <= 0 or budget_bytes < 0:
            raise ValueError("chunk_bytes must be positive and budget_bytes not negative")
        self.budget = budget_bytes
        self.chunk = chunk_bytes
        # read-ahead never takes more than a quarter of the budget
        self.readahead = max(0, min(readahead, budget_bytes // (4 * chunk_bytes)))
        self.stats = CacheStats()
        self._lru: OrderedDict[tuple[str, str, int], pa.Buffer] = OrderedDict()
        self._bytes = 0
        self._inflight: dict[tuple[str, str, int], Future[pa.Buffer]] = {}
        self._last: dict[tuple[str, str], int] = {}  # last chunk asked for, per object
        self._files: OrderedDict[tuple[str, str], pa.NativeFile] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="remote-read")
        self._closed = False

    @property
    def cached_bytes(self) -> int:
        return self._bytes

    def close(self) -> None:
        self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            self._lru.clear()
            self._files.clear()
            self._bytes = 0

    def __enter__(self) -> RemoteReadCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` on the cache's threads in the background (errors surface when it is used)."""
        if not self._closed:
            self._pool.submit(fn)

    def map(self, fn: Callable[[_T], _R], items: Iterable[_T]) -> list[_R]:
        """``fn`` over ``items`` on the cache's threads (small whole-object reads in parallel)."""
        return list(self._pool.map(fn, items))

    # -- reading ---------------------------------------------------------------------------------

    def read(self, f: RemoteFile, start: int, end: int, *, then: RemoteFile | None = None) -> pa.Buffer:
        """Bytes ``[start, end)`` of the object (zero-copy when they lie in one chunk). ``then``:
        the object a sequential reader reads next, whose head is prefetched near this one's end."""
        end = min(end, f.size)
        if start >= end:
            return pa.py_buffer(b"")
        first, last = start // self.chunk, (end - 1) // self.chunk
        futures = [self._chunk(f, n) for n in range(first, last + 1)]
        self._read_ahead(f, first, last, then)
        parts = [_result(fut) for fut in futures]
        base = first * self.chunk
        if len(parts) == 1:
            return parts[0].slice(start - base, end - start)
        whole = pa.py_buffer(b"".join(memoryview(p) for p in parts))  # one copy across chunk edges
        return whole.slice(start - base, end - start)

    def read_whole(self, f: RemoteFile) -> bytes:
        """A small object whole (side files); cached like any other chunk range."""
        return self.read(f, 0, f.size).to_pybytes()

    def prefetch(self, f: RemoteFile, start: int = 0, chunks: int | None = None) -> None:
        """Fetch ``chunks`` chunks (the read-ahead depth by default) from ``start`` in the background."""
        n0 = start // self.chunk
        count = self.readahead if chunks is None else chunks
        for n in range(n0, min(n0 + count, _chunks(f.size, self.chunk))):
            self._chunk(f, n, prefetch=True)

    def _read_ahead(self, f: RemoteFile, first: int, last: int, then: RemoteFile | None) -> None:
        if not self.readahead:
            return
        ident = (f.store.uri, f.key)
        with self._lock:
            previous = self._last.get(ident)
            self._last[ident] = last
            if len(self._last) > 4096:
                self._last.pop(next(iter(self._last)))
        sequential = first == 0 if previous is None else previous <= first <= previous + 1
        if not sequential:
            return
        total = _chunks(f.size, self.chunk)
        for n in range(last + 1, min(last + 1 + self.readahead, total)):
            self._chunk(f, n, prefetch=True)
        if then is not None and last + self.readahead >= total - 1:
            self.prefetch(then, 0, max(1, self.readahead - (total - 1 - last)))

    def _chunk(self, f: RemoteFile, n: int, *, prefetch: bool = False) -> Future[pa.Buffer]:
        key = (f.store.uri, f.key, n)
        with self._lock:
            buf = self._lru.get(key)
            if buf is not None:
                self._lru.move_to_end(key)
                if not prefetch:
                    self.stats.hits += 1
                done: Future[pa.Buffer] = Future()
                done.set_result(buf)
                return done
            fut = self._inflight.get(key)
            if fut is not None:
                if not prefetch:
                    self.stats.hits += 1
                return fut
            if self._closed:
                raise RemoteStorageError("the remote read cache is closed")
            if prefetch:
                self.stats.prefetches += 1
            else:
                self.stats.misses += 1
            fut = self._pool.submit(self._load, f, n, key)
            self._inflight[key] = fut
            return fut

    def _load(self, f: RemoteFile, n: int, key: tuple[str, str, int]) -> pa.Buffer:
        try:
            pos = n * self.chunk
            length = min(self.chunk, f.size - pos)
            data = pa.py_buffer(self._file(f).read_at(length, pos))
            if data.size != length:
                raise RemoteStorageError(f"{f.store.uri}/{f.key}: short read at {pos} "
                                         f"({data.size} of {length} bytes; object changed or truncated)")
        except BaseException as exc:
            with self._lock:
                self._inflight.pop(key, None)
                self._files.pop((f.store.uri, f.key), None)
            if isinstance(exc, FileNotFoundError) or (isinstance(exc, OSError) and (
                    "NoSuchKey" in str(exc) or "not found" in str(exc).lower())):
                raise RemoteObjectNotFound(f"{f.store.uri}/{f.key} does not exist") from exc
            if isinstance(exc, OSError):
                raise RemoteStorageError(f"cannot read {f.store.uri}/{f.key}: {exc}") from exc
            raise
        with self._lock:  # cached and no longer in flight at once: no reader misses both
            self._inflight.pop(key, None)
            self.stats.gets += 1
            self.stats.bytes_fetched += data.size
            self.stats.objects.add(f.key)
            if data.size <= self.budget:
                self._lru[key] = data
                self._bytes += data.size
                while self._bytes > self.budget:
                    _k, old = self._lru.popitem(last=False)
                    self._bytes -= old.size
        return data

    def _file(self, f: RemoteFile) -> pa.NativeFile:
        ident = (f.store.uri, f.key)
        with self._lock:
            handle = self._files.get(ident)
            if handle is not None:
                self._files.move_to_end(ident)
                return handle
        handle = f.store.fs.open_input_file(f.store.path(f.key))  # one HEAD per object on S3
        with self._lock:
            self._files[ident] = handle
            while len(self._files) > 256:
                self._files.popitem(last=False)
        return handle


def _chunks(size: int, chunk: int) -> int:
    return (size + chunk - 1) // chunk


def _result(fut: Future[pa.Buffer]) -> pa.Buffer:
    return fut.result()
