"""Hand freed memory back to the operating system.

Deleted partitions, wire cache evictions and large fetches free memory that the
allocators keep for reuse: glibc's malloc (Python objects such as cached wire
bytes) and Arrow's pool (mimalloc or jemalloc, for record buffers). A broker
beside a notebook idles most of the time, so the maintenance thread returns
that memory now and then instead of holding the peak forever.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

import pyarrow as pa


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (None on other C libraries)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        fn = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


def release_unused_memory() -> None:
    """Return free pages of Arrow's memory pool and of malloc's heap to the kernel."""
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
