"""Background jobs on a partition log's segments: sealing and compaction claim segments through one
rewrite API, build new files without a lock and swap them in under the log lock.

A job claims segments with `rewrite` (marked busy and snapshotted under the log lock), writes the
new files with no lock held and puts them in place through `SegmentRewrite` (`replace`, `remove`),
which swaps in under the log lock only if the segment is still current (not truncated or deleted
meanwhile). One job runs at a time per log; appends and reads go on meanwhile. `PartitionLog`
owns one `SegmentJobs` and delegates these operations to it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from .compaction import CompactionResult, compact_log
from .rewrite import Block, Written, coalesce, write_segment
from .schema import BATCH_DTYPE
from .segment import Segment, SegmentSnapshot, Stats
from .wire import WIRE_EXT, active_wire_matches

if TYPE_CHECKING:

    from .log import PartitionLog


class SegmentJobs:
    """The segment-rewrite jobs of one `PartitionLog` (see the module docstring); the log owns one
    and delegates `rewrite`, `seal_pending` and `compact` to it. They work on the log's segments
    under its locks, so this module is the log's friend: it reads the log's private state."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log

    @contextlib.contextmanager
    def rewrite(self, choose: Callable[[tuple[Segment, ...]], list[Segment]], *,
                entries_after: bool = False) -> Iterator[SegmentRewrite | None]:
        """Claim segments for a background rewrite (sealing, compaction): `choose` gets every
        segment, oldest first and the active one last, and returns those to rewrite (never the
        active one); they are marked busy and snapshotted under the log lock, and released when the
        block ends. Yields None when nothing was chosen. One rewrite runs at a time per log; appends
        and reads go on meanwhile. With `entries_after`, the claim also holds the `.batches` entries
        after the last chosen segment, read under the same lock."""
        self.log._check_writable()
        with self.log._job_lock:
            with self.log._lock:
                segments = self.log._segments
                chosen = choose(segments) if not self.log._closed else []
                if chosen:
                    assert segments[-1] not in chosen, "the active segment is never rewritten"
                    for seg in chosen:
                        seg.busy = True
                    snapshots = tuple(seg.snapshot() for seg in chosen)
                    after = segments[segments.index(chosen[-1]) + 1].base_offset
                    tail = self.log.batch_metadata(after) if entries_after else np.zeros(0, BATCH_DTYPE)
            if not chosen:
                yield None
                return
            try:
                yield SegmentRewrite(self, tuple(chosen), snapshots, after, tail)
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

    def swap_in(self, seg: Segment, written: Written, *, cleaned: bool) -> bool:
        """Replace `seg` by rewritten files unless it changed meanwhile (then discard them)."""
        with self.log._lock:
            if self.log._closed or seg.retired or seg not in self.log._segments:
                written.discard()
                return False
            written.commit()
            seg.close()
            seg.retired = True
            new = Segment(self.log.dir, seg.base_offset, sealed=written.sealed, data_size=written.data_size,
                          readonly=False)
            new.cleaned = cleaned or seg.cleaned
            self.log._set_segments([new if s is seg else s for s in self.log._segments])
            return True

    def remove_segment(self, seg: Segment) -> bool:
        """Drop a segment a rewrite emptied (never the first or the active one)."""
        with self.log._lock:
            if self.log._closed or seg.retired or seg not in self.log._segments[1:-1]:
                return False
            seg.delete_files()
            self.log._set_segments([s for s in self.log._segments if s is not seg])
            return True

    def compact(self, now_ms: int, *, max_offset: int | None = None, force: bool = False) -> CompactionResult:
        """Log compaction of the segments before the active one (and below `max_offset`, e.g.
        the last stable offset) when a run is due by Kafka's cleaner rules, or always with
        `force`; see `compaction.py`. Safe on a background thread; cheap when nothing is due."""
        return compact_log(self.log, now_ms, max_offset, force)


class SegmentRewrite:
    """Segments claimed by `PartitionLog.rewrite`: their snapshots (what to rewrite from), the base
    offset of the segment after them, optionally the `.batches` entries from there on, and the
    operations that put the result in place. Each operation swaps in under the log lock and is
    refused (False) if the segment was truncated or deleted meanwhile."""

    def __init__(self, jobs: SegmentJobs, segments: tuple[Segment, ...],
                 snapshots: tuple[SegmentSnapshot, ...], end_offset: int, entries_after: np.ndarray) -> None:
        self._jobs = jobs
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
        log = self._jobs.log
        on = log.config.segment_wire
        kept = on and keep_wire and active_wire_matches(
            seg.path(WIRE_EXT), self.snapshots[self.segments.index(seg)].batches)
        written = write_segment(log.dir, seg.base_offset, blocks, sealed=True,
                                compression=log.config.segment_compression,
                                wire=log.wire_encoder if on and not kept else None, keep_wire=kept)
        Stats.wire_kept += kept
        return self._jobs.swap_in(seg, written, cleaned=cleaned)

    def remove(self, seg: Segment) -> bool:
        """Delete `seg`, which the rewrite emptied (not the log's first segment)."""
        return self._jobs.remove_segment(seg)

    def mark_cleaned(self, seg: Segment) -> None:
        """`seg` was looked at by compaction and needs no rewrite."""
        seg.cleaned = True


def _first_unsealed(segments: tuple[Segment, ...]) -> list[Segment]:
    return next(([s] for s in segments[:-1] if not s.sealed and not s.busy), [])
