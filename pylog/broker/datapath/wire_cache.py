"""Bounded cache of the wire bytes of partitions' most recent batches.

The log keeps records as Arrow; a fetch would have to re-encode them to
RecordBatch v2 (and recompress them). Consumers at or near the tail ask for
what was produced lately, so the producer's own bytes (base offset rewritten,
CRC untouched) are kept here for the newest batches, as a view of the produce
request's frame when the batch is most of it (no copy), else as a copy.

Each partition's ``WireCache`` holds a contiguous run of batches ending at the
log end offset; anything that breaks contiguity clears it. A broker-wide
``WireBudget`` bounds the sum: it remembers the order batches were added in,
across partitions, and evicts the oldest one anywhere when the sum is over the
budget, as a page cache would. A busy partition therefore uses the memory an
idle one does not need, and an idle partition's old batches go first.

Adds, gets and evictions happen on the broker's event loop; ``clear`` may come
from the maintenance thread, so the budget's bookkeeping takes its lock and a
``get`` racing a clear is a miss, never an error.
"""

from __future__ import annotations

import contextlib
import threading
from bisect import bisect_right
from collections import deque
from contextlib import AbstractContextManager as ContextManager

WireBytes = bytes | memoryview
"""A cached batch: its own bytes, or a view of the request frame it was patched in."""


class WireBudget:
    """The broker-wide bound on cached wire bytes, with the add order of every cached batch."""

    __slots__ = ("_compacted_len", "_order", "lock", "max_bytes", "total")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.total = 0
        # (cache, its generation, base offset) per add, oldest first; entries of batches that
        # left their cache some other way go stale and are skipped (or swept out in bulk).
        self._order: deque[tuple[WireCache, int, int]] = deque()
        self._compacted_len = 0
        self.lock = threading.Lock()

    def resize(self, max_bytes: int) -> None:
        with self.lock:
            self.max_bytes = max_bytes
            self._evict_over(max_bytes)

    def charge(self, cache: WireCache, base_offset: int, nbytes: int) -> None:
        """Count a batch just added (lock held) and evict the oldest anywhere while over budget."""
        self.total += nbytes
        order = self._order
        order.append((cache, cache.generation, base_offset))
        self._evict_over(self.max_bytes)
        if len(order) > 2 * self._compacted_len + _SWEEP_SLACK:
            self._order = deque(e for e in order if _is_live(e))
            self._compacted_len = len(self._order)

    def _evict_over(self, limit: int) -> None:
        order = self._order
        while self.total > max(limit, 0) and order:
            cache, generation, base = order.popleft()
            self.total -= cache.evict_oldest(generation, base)


_SWEEP_SLACK = 1024
_UNSHARED: ContextManager[object] = contextlib.nullcontext()


def _is_live(entry: tuple[WireCache, int, int]) -> bool:
    cache, generation, base = entry
    return cache.holds(generation, base)


class WireCache:
    """One partition's run of recent batches; ``max_bytes`` bounds it alone, ``budget`` all of them."""

    __slots__ = ("_bases", "_budget", "_bytes", "_data", "_generation", "_lasts", "_lock", "max_bytes")

    def __init__(self, max_bytes: int, budget: WireBudget | None = None) -> None:
        self.max_bytes = max_bytes
        self._budget = budget
        self._lock: ContextManager[object] = budget.lock if budget is not None else _UNSHARED
        self._bases: deque[int] = deque()
        self._lasts: deque[int] = deque()
        self._data: deque[WireBytes] = deque()
        self._bytes = 0
        self._generation = 0

    def __len__(self) -> int:
        return len(self._data)

    @property
    def nbytes(self) -> int:
        return self._bytes

    @property
    def first_offset(self) -> int | None:
        return self._bases[0] if self._bases else None

    @property
    def generation(self) -> int:
        """Bumped by every clear: the budget's order entries of an older generation are stale."""
        return self._generation

    def holds(self, generation: int, base_offset: int) -> bool:
        """Whether the batch the budget charged at ``generation`` is still cached here."""
        bases = self._bases
        return self._generation == generation and bool(bases) and bases[0] <= base_offset <= bases[-1]

    def evict_oldest(self, generation: int, base_offset: int) -> int:
        """The budget evicts: drop the oldest batch if it is the one charged (budget lock held);
        the bytes freed (0 when it already left)."""
        bases = self._bases
        if self._generation == generation and bases and bases[0] == base_offset:
            return self._pop_oldest()
        return 0

    def add(self, base_offset: int, last_offset: int, data: WireBytes) -> None:
        """Append the bytes of the batch just written; they must follow the cached run."""
        budget = self._budget
        with self._lock:
            limit = self.max_bytes if budget is None else min(self.max_bytes, budget.max_bytes)
            if limit <= 0 or len(data) > limit or (self._lasts and self._lasts[-1] + 1 != base_offset):
                self._clear()
                if limit <= 0 or len(data) > limit:
                    return
            self._bases.append(base_offset)
            self._lasts.append(last_offset)
            self._data.append(data)
            self._bytes += len(data)
            freed = 0
            while self._bytes > self.max_bytes:
                freed += self._pop_oldest()
            if budget is not None:
                budget.total -= freed
                budget.charge(self, base_offset, len(data))

    def get(self, offset: int, max_bytes: int, max_offset: int) -> list[WireBytes] | None:
        """Batches from the one containing ``offset`` while below ``max_offset``; None on a miss.

        At least one batch is returned even if it is larger than ``max_bytes``.
        """
        bases = self._bases
        try:
            if not bases or offset < bases[0] or offset > self._lasts[-1]:
                return None
            i = bisect_right(bases, offset) - 1
            out: list[WireBytes] = []
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
        except IndexError:  # emptied by another thread while we looked: a miss
            return None
        return out

    def resize(self, max_bytes: int) -> None:
        """Change this partition's bound, dropping the oldest batches that no longer fit."""
        with self._lock:
            self.max_bytes = max_bytes
            freed = 0
            while self._bytes > max(max_bytes, 0):
                freed += self._pop_oldest()
            self._release(freed)

    def truncate_from(self, offset: int) -> None:
        """Drop cached batches at or after ``offset`` (log truncation)."""
        with self._lock:
            freed = 0
            while self._bases and self._lasts[-1] >= offset:
                self._bases.pop()
                self._lasts.pop()
                n = len(self._data.pop())
                self._bytes -= n
                freed += n
            self._release(freed)

    def clear(self) -> None:
        with self._lock:
            self._clear()

    def _clear(self) -> None:
        freed = self._bytes
        self._generation += 1
        self._bases.clear()
        self._lasts.clear()
        self._data.clear()
        self._bytes = 0
        self._release(freed)

    def _pop_oldest(self) -> int:
        self._bases.popleft()
        self._lasts.popleft()
        n = len(self._data.popleft())
        self._bytes -= n
        return n

    def _release(self, nbytes: int) -> None:
        if self._budget is not None:
            self._budget.total -= nbytes
