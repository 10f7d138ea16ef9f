"""Background jobs on a partition log's segments: sealing and compaction claim segments through one
rewrite API, build new files without a lock and swap them in under the log lock.

A job claims segments with `rewrite` (marked busy and snapshotted under the log lock), writes the
new files with no lock held and puts them in place through `SegmentRewrite` (`replace`, `remove`),
which swaps in under the log lock only if the segment is still current (not truncated or deleted
meanwhile). One job runs at a time per log; appends and reads go on meanwhile. `SegmentJobs` is
mixed into `PartitionLog`, whose state (segments, locks, config) it works on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .compaction import CompactionResult, compact_log
from .config import LogConfig
from .rewrite import Block, Written, coalesce, write_segment
from .schema import BATCH_DTYPE
from .segment import Segment, SegmentSnapshot, Stats
from .wire import WIRE_EXT, WireEncoder, active_wire_matches

if TYPE_CHECKING:
    import threading

    from .log import PartitionLog


class SegmentJobs:
    """The segment-rewrite half of `PartitionLog` (see the module docstring)."""

    dir: Path
    config: LogConfig
    wire_encoder: WireEncoder | None
    _lock: threading.RLock
    _job_lock: threading.Lock
    _segments: tuple[Segment, ...]
    _closed: bool

    if TYPE_CHECKING:
        def _check_writable(self) -> None: ...
        def _set_segments(self, segments: list[Segment] | tuple[Segment, ...]) -> None: ...
        def batch_metadata(self, start_offset: int | None = None, end_offset: int | None = None, *,
                           attributes: int = 0) -> np.ndarray: ...

    @contextlib.contextmanager
    def rewrite(self, choose: Callable[[tuple[Segment, ...]], list[Segment]], *,
                entries_after: bool = False) -> Iterator[SegmentRewrite | None]:
        """Claim segments for a background rewrite (sealing, compaction): `choose` gets every
        segment, oldest first and the active one last, and returns those to rewrite (never the
        active one); they are marked busy and snapshotted under the log lock, and released when the
        block ends. Yields None when nothing was chosen. One rewrite runs at a time per log; appends
        and reads go on meanwhile. With `entries_after`, the claim also holds the `.batches` entries
        after the last chosen segment, read under the same lock."""
        self._check_writable()
        with self._job_lock:
            with self._lock:
                segments = self._segments
                chosen = choose(segments) if not self._closed else []
                if chosen:
                    assert segments[-1] not in chosen, "the active segment is never rewritten"
                    for seg in chosen:
                        seg.busy = True
                    snapshots = tuple(seg.snapshot() for seg in chosen)
                    after = segments[segments.index(chosen[-1]) + 1].base_offset
                    tail = self.batch_metadata(after) if entries_after else np.zeros(0, BATCH_DTYPE)
            if not chosen:
                yield None
                return
            try:
                yield SegmentRewrite(self, tuple(chosen), snapshots, after, tail)  # type: ignore[arg-type]
            finally:
                for seg in chosen:
                    seg.busy = False

    def seal_pending(self, limit: int | None = None) -> int:
        """Rewrite rolled IPC-stream segments as IPC files (coalescing small batches). Safe to run
        on a background thread while the owner appends and reads; returns segments sealed."""
        done = 0
        while limit is None or done < limit:
            with self.rewrite(_first_unsealed) as job:
                if job is None:
                    return done
                (seg,), (snap,) = job.segments, job.snapshots
                done += job.replace(seg, coalesce(snap.blocks()), keep_wire=True)
        return done

    def _swap_in(self, seg: Segment, written: Written, *, cleaned: bool) -> bool:
        """Replace `seg` by rewritten files unless it changed meanwhile (then discard them)."""
        with self._lock:
            if self._closed or seg.retired or seg not in self._segments:
                written.discard()
                return False
            written.commit()
            seg.close()
            seg.retired = True
            new = Segment(self.dir, seg.base_offset, sealed=written.sealed, data_size=written.data_size,
                          readonly=False)
            new.cleaned = cleaned or seg.cleaned
            self._set_segments([new if s is seg else s for s in self._segments])
            return True

    def _remove_segment(self, seg: Segment) -> bool:
        """Drop a segment a rewrite emptied (never the first or the active one)."""
        with self._lock:
            if self._closed or seg.retired or seg not in self._segments[1:-1]:
                return False
            seg.delete_files()
            self._set_segments([s for s in self._segments if s is not seg])
            return True

    def compact(self, now_ms: int, *, max_offset: int | None = None, force: bool = False) -> CompactionResult:
        """Log compaction of the segments before the active one (and below `max_offset`, e.g.
        the last stable offset) when a run is due by Kafka's cleaner rules, or always with
        `force`; see `compaction.py`. Safe on a background thread; cheap when nothing is due."""
        return compact_log(self, now_ms, max_offset, force)  # type: ignore[arg-type]


class SegmentRewrite:
    """Segments claimed by `PartitionLog.rewrite`: their snapshots (what to rewrite from), the base
    offset of the segment after them, optionally the `.batches` entries from there on, and the
    operations that put the result in place. Each operation swaps in under the log lock and is
    refused (False) if the segment was truncated or deleted meanwhile."""

    def __init__(self, log: PartitionLog, segments: tuple[Segment, ...],
                 snapshots: tuple[SegmentSnapshot, ...], end_offset: int, entries_after: np.ndarray) -> None:
        self._log = log
        self.segments = segments
        self.snapshots = snapshots
        self.end_offset = end_offset
        self.entries_after = entries_after

    def replace(self, seg: Segment, blocks: list[Block], *, cleaned: bool = False,
                keep_wire: bool = False) -> bool:
        """Write `blocks` as a sealed segment with `seg`'s base offset (no lock held) and swap it
        in for `seg`; `cleaned` marks it as compacted. With `keep_wire` (sealing: the same
        batches in the same order) a `.wire` the segment kept while active stays as it is when it
        matches every batch; otherwise the batches are encoded again."""
        log = self._log
        on = log.config.segment_wire
        kept = on and keep_wire and active_wire_matches(
            seg.path(WIRE_EXT), self.snapshots[self.segments.index(seg)].batches)
        written = write_segment(log.dir, seg.base_offset, blocks, sealed=True,
                                compression=log.config.segment_compression,
                                wire=log.wire_encoder if on and not kept else None, keep_wire=kept)
        Stats.wire_kept += kept
        return log._swap_in(seg, written, cleaned=cleaned)

    def remove(self, seg: Segment) -> bool:
        """Delete `seg`, which the rewrite emptied (not the log's first segment)."""
        return self._log._remove_segment(seg)

    def mark_cleaned(self, seg: Segment) -> None:
        """`seg` was looked at by compaction and needs no rewrite."""
        seg.cleaned = True


def _first_unsealed(segments: tuple[Segment, ...]) -> list[Segment]:
    return next(([s] for s in segments[:-1] if not s.sealed and not s.busy), [])
