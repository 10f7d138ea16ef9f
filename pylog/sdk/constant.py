"""Columns holding one value in every row (topic, partition, timestampType), built at memory speed.

``pa.repeat`` walks rows one by one (about 100 ns a row for a string); these builders fill whole
buffers with numpy: zeros come from calloc (free until touched), other integers from one fill, a
string's offsets and data by doubling copies. Arrow arrays are immutable, so every batch of one value
can be a slice of one shared column: `ConstantPool` builds a column per value once, at most
`CHUNK_ROWS` long, and serves any length as slices of it (a long column as several chunks), so the
memory written per read does not grow with the number of rows. The columns are kept for the process
(the most recently used, up to `SHARED_BYTES`), so reading the same topic again builds nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
import pyarrow as pa

CHUNK_ROWS = 1 << 18  # longest column a pool builds; longer requests become several chunks
SHARED_BYTES = 32 << 20  # constant columns kept across reads, least recently used out first

_zeros = pa.py_buffer(np.zeros(0, np.int32))


def _filled(n: int, dtype: type[np.generic]) -> tuple[pa.Buffer, np.ndarray]:
    """A buffer from Arrow's memory pool (memory of freed columns is reused) and a writable view."""
    buf = pa.allocate_buffer(n * np.dtype(dtype).itemsize)
    return buf, np.frombuffer(buf, dtype)


def _double(a: np.ndarray, done: int, step: int) -> None:
    """Fill a[done:] by repeating a[:done], adding `step` per element for each element copied
    (log2(n) vectorised copies)."""
    while done < len(a):
        k = min(done, len(a) - done)
        if step:
            np.add(a[:k], done * step, out=a[done:done + k])
        else:
            a[done:done + k] = a[:k]
        done += k


def int32_column(value: int, n: int) -> pa.Array:
    """`value` n times; zeros are views of one shared, lazily mapped zero buffer (costs no memory
    until read, and reading maps the kernel's zero page)."""
    global _zeros
    if value == 0:
        if _zeros.size < 4 * n:
            _zeros = pa.py_buffer(np.zeros(max(n, 2 * _zeros.size // 4, 1 << 16), np.int32))
        return pa.Array.from_buffers(pa.int32(), n, [None, _zeros], null_count=0)
    buf, data = _filled(n, np.int32)
    data.fill(value)
    return pa.Array.from_buffers(pa.int32(), n, [None, buf], null_count=0)


def string_column(value: str, n: int) -> pa.Array:
    raw = value.encode()
    width = len(raw)
    large = width * n >= 2**31 - 1
    obuf, offsets = _filled(n + 1, np.int64 if large else np.int32)
    offsets[0] = 0
    if n:
        offsets[1] = width
        _double(offsets[1:], 1, width)
    dbuf, data = _filled(width * n, np.uint8)
    if width and n:
        data[:width] = np.frombuffer(raw, np.uint8)
        _double(data, width, 0)
    typ = pa.large_string() if large else pa.string()
    arr = pa.Array.from_buffers(typ, n, [None, obuf, dbuf], null_count=0)
    return arr.cast(pa.string()) if large else arr


_shared: OrderedDict[tuple[type, int | str], pa.Array] = OrderedDict()
_shared_lock = threading.Lock()


class ConstantPool:
    """One column per value (a str makes a string column, an int an int32 one), at least as long as
    the longest batch asked for, handed out as slices from its start; the columns are shared by every
    pool of the process."""

    def _column(self, value: int | str, n: int) -> pa.Array:
        key = (type(value), value)
        with _shared_lock:
            column = _shared.get(key)
            if column is not None and len(column) >= n:
                _shared.move_to_end(key)
                return column
        size = max(n, min(CHUNK_ROWS, 2 * len(column) if column is not None else 1 << 12))
        column = string_column(value, size) if isinstance(value, str) else int32_column(value, size)
        with _shared_lock:
            _shared[key] = column
            _shared.move_to_end(key)
            total = sum(c.nbytes for c in _shared.values())
            while total > SHARED_BYTES and len(_shared) > 1:
                total -= _shared.popitem(last=False)[1].nbytes
        return column

    def take(self, value: int | str, n: int) -> pa.Array:
        """`value` n times (one slice)."""
        return self._column(value, n).slice(0, n)

    def chunks(self, value: int | str, n: int) -> list[pa.Array]:
        """`value` n times as slices of one column of at most CHUNK_ROWS rows."""
        column = self._column(value, min(n, CHUNK_ROWS))
        step = len(column)
        return [column.slice(0, min(step, n - i)) for i in range(0, n, step)]
