"""Hand freed memory back to the operating system.

Deleted partitions, wire cache evictions and large fetches free memory that the
allocators keep for reuse: glibc's malloc (Python objects such as cached wire
bytes) and Arrow's pool (mimalloc or jemalloc, for record buffers). A broker
beside a notebook idles most of the time, so the maintenance thread returns
that memory now and then instead of holding the peak forever.

Between those releases, freed memory should stay with the process: glibc's default trims
its heap as soon as 128 KiB lie free at the top and raises its mmap threshold as it goes, so
a broker moving megabyte batches (produce requests, fetch responses, follower appends) gives
pages back and faults fresh zeroed ones in on every request. ``keep_freed_memory_for_reuse``
fixes both thresholds; the periodic release still trims.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

import pyarrow as pa

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
TRIM_THRESHOLD_BYTES = 256 * 1024 * 1024
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024  # glibc's largest on 64-bit


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (None on other C libraries)."""
    fn = getattr(_libc(), "malloc_trim", None)
    if fn is None:
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def keep_freed_memory_for_reuse() -> bool:
    """Set glibc's trim and mmap thresholds for a serving process (see the module's docstring);
    False where the C library is not glibc."""
    libc = _libc()
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)) and bool(
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    )


def release_unused_memory() -> None:
    """Return free pages of Arrow's memory pool and of malloc's heap to the kernel."""
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
