"""The segments of one partition log and the lock that orders every change to them.

`PartitionLog` owns one `SegmentSet`; its reads, appends and structural changes (roll, truncation,
retention) and the background rewrites (`log_jobs.py`: sealing, compaction) all go through this
small interface, so no module reaches into another's state. A rewrite swaps its new files in with
`swap_in` / `remove`, which refuse (False) a segment that was truncated or deleted meanwhile.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence

from .rewrite import Written
from .segment import Segment


class SegmentSet:
    """Segments oldest first, the active one last; `lock` guards them (reads, appends and swaps
    take it), `job_lock` lets one background rewrite run at a time."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.job_lock = threading.Lock()
        self.closed = False
        self._segments: tuple[Segment, ...] = ()
        self._bases: list[int] = []

    @property
    def segments(self) -> tuple[Segment, ...]:
        return self._segments

    @property
    def bases(self) -> list[int]:
        """Base offsets of the segments, in order (do not modify)."""
        return self._bases

    @property
    def active(self) -> Segment:
        return self._segments[-1]

    def set(self, segments: Sequence[Segment]) -> None:
        """Replace the list (the caller holds `lock`)."""
        self._segments = tuple(segments)
        self._bases = [s.base_offset for s in segments]

    def holding(self, offset: int) -> int:
        """Position of the segment whose range holds `offset` (0 below the first)."""
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def swap_in(self, seg: Segment, written: Written, *, cleaned: bool) -> bool:
        """Replace `seg` by rewritten files unless it changed meanwhile (then discard them)."""
        with self.lock:
            if self.closed or seg.retired or seg not in self._segments:
                written.discard()
                return False
            written.commit()
            seg.close()
            seg.retired = True
            new = Segment(seg.dir, seg.base_offset, sealed=written.sealed, data_size=written.data_size,
                          readonly=False)
            new.cleaned = cleaned or seg.cleaned
            self.set([new if s is seg else s for s in self._segments])
            return True

    def remove(self, seg: Segment) -> bool:
        """Drop a segment a rewrite emptied (never the first or the active one)."""
        with self.lock:
            if self.closed or seg.retired or seg not in self._segments[1:-1]:
                return False
            seg.delete_files()
            self.set([s for s in self._segments if s is not seg])
            return True
