"""Columns holding one value in every row (topic, partition, timestampType), built at memory speed.

``pa.repeat`` walks rows one by one (about 100 ns a row for a string); these builders fill whole
buffers with numpy: zeros come from calloc (free until touched), other integers from one fill, a
string's data by doubling copies. `ConstantPool` builds each column once per topic partition and
hands out slices, so a read of many small batches pays once.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_zeros = pa.py_buffer(np.zeros(0, np.int32))


def int32_column(value: int, n: int) -> pa.Array:
    """`value` n times; zeros are views of one shared, lazily mapped zero buffer (costs no memory
    until read, and reading maps the kernel's zero page)."""
    global _zeros
    if value == 0:
        if _zeros.size < 4 * n:
            _zeros = pa.py_buffer(np.zeros(max(n, 2 * _zeros.size // 4, 1 << 16), np.int32))
        return pa.Array.from_buffers(pa.int32(), n, [None, _zeros], null_count=0)
    data = np.full(n, value, np.int32)
    return pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(data)], null_count=0)


def string_column(value: str, n: int) -> pa.Array:
    raw = value.encode()
    width = len(raw)
    large = width * n >= 2**31 - 1
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int64 if large else np.int32) if width else \
        np.zeros(n + 1, np.int64 if large else np.int32)
    data = np.empty(width * n, np.uint8)
    if width and n:
        data[:width] = np.frombuffer(raw, np.uint8)
        done = width
        while done < data.size:  # doubling copies: log2(n) memcpys
            step = min(done, data.size - done)
            data[done:done + step] = data[:step]
            done += step
    typ = pa.large_string() if large else pa.string()
    arr = pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=0)
    return arr.cast(pa.string()) if large else arr


class ConstantPool:
    """Slices of per-key constant columns: `take(key, value, n, expect)` returns the next n rows,
    allocating `expect` rows (at least n) when the current column runs out."""

    def __init__(self) -> None:
        self._columns: dict[object, tuple[pa.Array, int]] = {}

    def take(self, key: object, value: int | str, n: int, expect: int) -> pa.Array:
        column, used = self._columns.get(key, (None, 0))
        if column is None or used + n > len(column):
            size = max(n, expect)
            column = string_column(value, size) if isinstance(value, str) else int32_column(value, size)
            used = 0
        self._columns[key] = (column, used + n)
        return column.slice(used, n)
