"""Bounded cache of the wire bytes of a partition's most recent batches.

The log keeps records as Arrow; a fetch would have to re-encode them to
RecordBatch v2. Consumers at the tail ask for what was just produced, so the
producer's own bytes (base offset rewritten, CRC untouched) are kept here for
the newest batches. The cache always holds a contiguous run of batches ending
at the log end offset; anything that breaks contiguity clears it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque


class WireCache:
    __slots__ = ("_bases", "_bytes", "_data", "_lasts", "max_bytes")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._bases: deque[int] = deque()
        self._lasts: deque[int] = deque()
        self._data: deque[bytes] = deque()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._data)

    @property
    def first_offset(self) -> int | None:
        return self._bases[0] if self._bases else None

    def add(self, base_offset: int, last_offset: int, data: bytes) -> None:
        """Append the bytes of the batch just written; they must follow the cached run."""
        if self.max_bytes <= 0 or len(data) > self.max_bytes:
            self.clear()
            return
        if self._lasts and self._lasts[-1] + 1 != base_offset:
            self.clear()
        self._bases.append(base_offset)
        self._lasts.append(last_offset)
        self._data.append(data)
        self._bytes += len(data)
        while self._bytes > self.max_bytes:
            self._bases.popleft()
            self._lasts.popleft()
            self._bytes -= len(self._data.popleft())

    def get(self, offset: int, max_bytes: int, max_offset: int) -> list[bytes] | None:
        """Batches from the one containing ``offset`` while below ``max_offset``; None on a miss.

        At least one batch is returned even if it is larger than ``max_bytes``.
        """
        bases = self._bases
        if not bases or offset < bases[0] or offset > self._lasts[-1]:
            return None
        i = bisect_right(bases, offset) - 1
        out: list[bytes] = []
        total = 0
        n = len(bases)
        while i < n and bases[i] < max_offset:
            # A batch is served only whole and only if it is fully below max_offset (high watermark).
            if self._lasts[i] >= max_offset:
                break
            data = self._data[i]
            if out and total + len(data) > max_bytes:
                break
            out.append(data)
            total += len(data)
            i += 1
        return out

    def resize(self, max_bytes: int) -> None:
        """Change the bound, dropping the oldest batches that no longer fit."""
        self.max_bytes = max_bytes
        while self._bytes > max(max_bytes, 0):
            self._bases.popleft()
            self._lasts.popleft()
            self._bytes -= len(self._data.popleft())

    def truncate_from(self, offset: int) -> None:
        """Drop cached batches at or after ``offset`` (log truncation)."""
        while self._bases and self._lasts[-1] >= offset:
            self._bases.pop()
            self._lasts.pop()
            self._bytes -= len(self._data.pop())

    def clear(self) -> None:
        self._bases.clear()
        self._lasts.clear()
        self._data.clear()
        self._bytes = 0
