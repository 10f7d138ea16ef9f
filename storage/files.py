"""Fixed-width entry files (indexes, batch metadata) and small atomic-file helpers.

A `RecordFile` is a memory-mapped prefix plus an in-memory tail of entries appended since the last
mapping. Appends go to the kernel at once (os.write on an O_APPEND fd); the mapping is refreshed
when the tail fills, so searching never copies the file and an idle file holds no fd and no map.
Files are only ever appended to or replaced by rename, never shrunk in place, so a map held by a
reader (in this process or another) can never point past the end of its file.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np

TAIL_CAPACITY = 1024
OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Create `path` holding `data` (write to a temporary name, fsync, rename)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


class FileReplaced(FileNotFoundError):
    """A file a reader sized was replaced under it by a shorter one (a rewrite swapped in, as
    sealing does): to the reader the file it opened is gone, as if unlinked, so it reopens."""


class RecordFile:
    """A file of `dtype` entries; see the module docstring."""

    def __init__(self, path: Path, dtype: np.dtype, *, count: int | None = None, copy: bool = False,
                 readonly: bool = False) -> None:
        self.path = path
        self.dtype = dtype
        self._copy = copy  # read with a copy instead of a map (a reader of a file another process writes)
        self._readonly = readonly  # never appended to: map (or read) it whole on first use
        if count is None:
            try:
                count = os.stat(path).st_size // dtype.itemsize
            except FileNotFoundError:
                count = 0
        self._count = count
        self._mapped: np.ndarray | None = None  # entries [0, len(_mapped)) of the file
        self._tail: np.ndarray | None = None  # entries appended after the map, in memory
        self._tail_bytes = memoryview(b"")  # the same, as bytes
        self._tail_len = 0
        self._fd: int | None = None

    def __len__(self) -> int:
        return self._count

    # -- reading -------------------------------------------------------------------------------

    def _map(self) -> np.ndarray:
        if self._mapped is None or len(self._mapped) + self._tail_len < self._count:
            n = self._count - self._tail_len
            if n == 0:
                self._mapped = np.zeros(0, self.dtype)
            elif self._copy:
                self._mapped = np.fromfile(self.path, self.dtype, count=n)
                if len(self._mapped) < n:
                    raise self._replaced(n)
            else:
                try:
                    self._mapped = _map_entries(self.path, self.dtype, n)
                except ValueError as exc:  # mmap's answer to a map past the end of the file
                    raise self._replaced(n) from exc
        return self._mapped

    def _replaced(self, n: int) -> FileReplaced:
        return FileReplaced(f"{self.path} holds fewer than the {n} entries it held when opened")

    def entries(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Entries [start, stop) as a structured array (a view where possible)."""
        stop = self._count if stop is None else min(stop, self._count)
        start = max(0, min(start, stop))
        mapped = self._map()
        m = len(mapped)
        if stop <= m:
            return mapped[start:stop]
        assert self._tail is not None
        if start >= m:
            return self._tail[start - m:stop - m]
        return np.concatenate([mapped[start:], self._tail[:stop - m]])

    def __getitem__(self, i: int) -> np.void:
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError(i)
        if self._mapped is None and self._tail_len == 0 and not self._readonly:
            # a writer's idle file: read the one entry rather than holding a map for it
            size = self.dtype.itemsize
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            try:
                raw = os.pread(fd, size, i * size)
            finally:
                os.close(fd)
            if len(raw) == size:
                return np.frombuffer(raw, self.dtype)[0]
        return self.entries(i, i + 1)[0]

    def search(self, field: str, value: int, side: str = "left") -> int:
        """Binary search of a non-decreasing field (numpy, no copy of the file)."""
        mapped = self._map()
        m = len(mapped)
        if m:
            i = int(np.searchsorted(mapped[field], value, side=side))  # type: ignore[call-overload]
            if i < m or self._tail_len == 0:
                return i
        if self._tail_len == 0:
            return m
        assert self._tail is not None
        return m + int(np.searchsorted(self._tail[field][:self._tail_len], value, side=side))  # type: ignore[call-overload]

    # -- writing -------------------------------------------------------------------------------

    def append(self, raw: bytes) -> None:
        """Append packed entries: to the kernel first, then to the in-memory tail."""
        if self._fd is None:
            self._fd = os.open(self.path, OPEN_FLAGS, 0o644)
        written = os.write(self._fd, raw)
        if written < len(raw):
            view = memoryview(raw)[written:]
            while view:
                view = view[os.write(self._fd, view):]
        n = len(raw) // self.dtype.itemsize
        end = self._tail_len + n
        if end > TAIL_CAPACITY:  # map the file afresh on the next read
            self._count += n
            self._tail, self._tail_len, self._mapped = None, 0, None
            return
        if self._tail is None or end > len(self._tail):
            grown = np.zeros(min(TAIL_CAPACITY, max(16, 2 * end)), self.dtype)
            if self._tail is not None:
                grown[:self._tail_len] = self._tail[:self._tail_len]
            self._map()  # the map must cover everything before the tail
            self._tail = grown
            self._tail_bytes = grown.view(np.uint8).data  # a memoryview of its bytes
        size = self.dtype.itemsize
        self._tail_bytes[self._tail_len * size:end * size] = raw
        self._tail_len = end
        self._count += n

    def replace(self, raw: bytes) -> None:
        """Make the file hold exactly `raw` (a new file renamed over the old one)."""
        self.close()
        write_file(self.path, raw, sync=False)
        self._count = len(raw) // self.dtype.itemsize
        self._mapped, self._tail, self._tail_len = None, None, 0

    def fsync(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def release(self) -> None:
        """Drop the map and the tail (they are rebuilt on demand); keeps the count."""
        if self._tail_len == 0:
            self._mapped = None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _map_entries(path: Path, dtype: np.dtype, n: int) -> np.ndarray:
    """The first `n` entries of `path`, mapped read-only (mmap and a numpy view of it: np.memmap
    resolves the path first, a dozen system calls per file, which a reader opening a partition's
    side files pays for every segment)."""
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), n * dtype.itemsize, prot=mmap.PROT_READ)
    return np.frombuffer(mapped, dtype, n)
