"""Background jobs on a partition log's segments: sealing and compaction claim segments through one
rewrite API, build new files without a lock and swap them in under the log lock.

A job claims segments with `rewrite` (marked busy and snapshotted under the set's lock), writes the
new files with no lock held and puts them in place through `SegmentRewrite` (`replace`, `remove`),
which swaps in through `SegmentSet` only if the segment is still current (not truncated or deleted
meanwhile). One job runs at a time per log; appends and reads go on meanwhile. The jobs see the
log through `JobOwner` (its public settings and `batch_metadata`) and its `SegmentSet`, nothing else.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import numpy as np

from . import onecopy as oc
from .config import LogConfig
from .errors import ReadOnlyLog
from .rewrite import Block, coalesce, write_rows_segment, write_segment
from .schema import BATCH_DTYPE, metas_from_entries
from .segment import Segment, SegmentSnapshot, Stats
from .segment_set import SegmentSet
from .wire import WIRE_EXT, WireEncoder, active_wire_matches


class JobOwner(Protocol):
    """What the jobs read of the log that owns them (public members of `PartitionLog`)."""

    dir: Path
    config: LogConfig
    readonly: bool
    wire_encoder: WireEncoder | None
    rows_decoder: oc.RowsDecoder | None

    def batch_metadata(self, start_offset: int | None = None, end_offset: int | None = None, *,
                       attributes: int = 0) -> np.ndarray: ...


class SegmentJobs:
    """The segment-rewrite jobs of one log (see the module docstring)."""

    def __init__(self, owner: JobOwner, segments: SegmentSet) -> None:
        self.owner = owner
        self.segments = segments

    @contextlib.contextmanager
    def rewrite(self, choose: Callable[[tuple[Segment, ...]], list[Segment]], *,
                entries_after: bool = False) -> Iterator[SegmentRewrite | None]:
        """Claim segments for a background rewrite (sealing, compaction): `choose` gets every
        segment, oldest first and the active one last, and returns those to rewrite (never the
        active one); they are marked busy and snapshotted under the log lock, and released when the
        block ends. Yields None when nothing was chosen. One rewrite runs at a time per log; appends
        and reads go on meanwhile. With `entries_after`, the claim also holds the `.batches` entries
        after the last chosen segment, read under the same lock."""
        if self.owner.readonly:
            raise ReadOnlyLog(str(self.owner.dir))
        sset = self.segments
        with sset.job_lock:
            with sset.lock:
                segments = sset.segments
                chosen = choose(segments) if not sset.closed else []
                if chosen:
                    assert segments[-1] not in chosen, "the active segment is never rewritten"
                    for seg in chosen:
                        seg.busy = True
                    snapshots = tuple(seg.snapshot() for seg in chosen)
                    after = segments[segments.index(chosen[-1]) + 1].base_offset
                    tail = self.owner.batch_metadata(after) if entries_after else np.zeros(0, BATCH_DTYPE)
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
                if snap.fmt == 2:  # sections kept as they are, small batches merged
                    done += job.replace_rows(seg, oc.group_for_message(snap.rows(), oc.SEALED_MESSAGE_BYTES))
                else:
                    done += job.replace(seg, coalesce(snap.blocks()), keep_wire=True)
        return done


    def upgrade_format(self, limit: int | None = None) -> int:
        """Rewrite sealed format 1 segments as format 2 (one copy), oldest first: each batch from
        its `.wire` bytes when the segment has them, else encoded from Arrow, decoded with the
        owner's `rows_decoder` (gzip / snappy stored as `pylog.segment.compression` says). The swap
        is atomic (`rewrite.py`): a crash leaves the old segment or the new one. Needs the owner's
        codecs; returns segments rewritten."""
        owner = self.owner
        if owner.rows_decoder is None or owner.wire_encoder is None:
            return 0
        done = 0
        while limit is None or done < limit:
            with self.rewrite(_first_format_1) as job:
                if job is None:
                    return done
                (seg,), (snap,) = job.segments, job.snapshots
                done += job.replace_rows(seg, oc.group_for_message(
                    _rows_of_format_1(seg, snap, owner), oc.SEALED_MESSAGE_BYTES))
        return done


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
        matches every batch; otherwise the batches are encoded again. A format 2 segment stays
        format 2 (`_as_rows`) when the owner has the codec to re-encode batches that lost records."""
        owner = self._jobs.owner
        snap = self.snapshots[self.segments.index(seg)]
        if snap.fmt == 2 and owner.wire_encoder is not None and owner.rows_decoder is not None:
            return self.replace_rows(seg, oc.group_for_message(self._as_rows(snap, blocks),
                                                               oc.SEALED_MESSAGE_BYTES), cleaned=cleaned)
        on = owner.config.segment_wire
        kept = on and keep_wire and active_wire_matches(
            seg.path(WIRE_EXT), self.snapshots[self.segments.index(seg)].batches)
        written = write_segment(owner.dir, seg.base_offset, blocks, sealed=True,
                                compression=owner.config.segment_compression,
                                wire=owner.wire_encoder if on and not kept else None, keep_wire=kept)
        Stats.wire_kept += kept
        return self._jobs.segments.swap_in(seg, written, cleaned=cleaned)

    def replace_rows(self, seg: Segment, messages: list[oc.Rows], *, cleaned: bool = False) -> bool:
        """Write format 2 `messages` as a sealed segment with `seg`'s base offset (no lock held)
        and swap it in for `seg`."""
        written = write_rows_segment(self._jobs.owner.dir, seg.base_offset, messages, sealed=True)
        return self._jobs.segments.swap_in(seg, written, cleaned=cleaned)

    def _as_rows(self, snap: SegmentSnapshot, blocks: list[Block]) -> list[oc.Rows]:
        """Format 2 Rows, one per Kafka batch, of `blocks` (rewritten from `snap`): a batch that
        kept all its records keeps its stored section; one that lost some is encoded again from
        its kept rows with its own codec (a fetch must not return removed records)."""
        owner = self._jobs.owner
        encode, decode = owner.wire_encoder, owner.rows_decoder
        assert encode is not None and decode is not None
        stored = {int(r.entries["base_offset"][0]): r for rows in snap.rows() for r in oc.split_batches(rows)}
        out: list[oc.Rows] = []
        for rb, entries in blocks:
            for meta, e, row in zip(metas_from_entries(entries), entries, entries["row"].tolist()):
                old = stored[meta.base_offset]
                if int(old.entries["record_count"][0]) != meta.record_count:
                    raw = encode(meta, rb.slice(row, meta.record_count))
                    old = oc.with_header_timestamps(decode(raw, owner.config.segment_compression))
                new = old.entries.copy()
                for f in ("append_time", "delete_horizon"):
                    new[f] = e[f]
                new["row"] = 0
                out.append(dataclasses.replace(old, entries=new))
        return out

    def remove(self, seg: Segment) -> bool:
        """Delete `seg`, which the rewrite emptied (not the log's first segment)."""
        return self._jobs.segments.remove(seg)

    def mark_cleaned(self, seg: Segment) -> None:
        """`seg` was looked at by compaction and needs no rewrite."""
        seg.cleaned = True


def _first_unsealed(segments: tuple[Segment, ...]) -> list[Segment]:
    return next(([s] for s in segments[:-1] if not s.sealed and not s.busy), [])


def _first_format_1(segments: tuple[Segment, ...]) -> list[Segment]:
    return next(([s] for s in segments[:-1] if s.sealed and s.fmt == 1 and not s.busy), [])


def _rows_of_format_1(seg: Segment, snap: SegmentSnapshot, owner: JobOwner) -> list[oc.Rows]:
    """Format 2 Rows, one per Kafka batch, of a sealed format 1 segment (its stored entries'
    append times and delete horizons kept)."""
    encode, decode = owner.wire_encoder, owner.rows_decoder
    assert encode is not None and decode is not None
    comp = owner.config.segment_compression
    wire = seg.wire_batches(0, len(snap.batches))
    out: list[oc.Rows] = []
    for rb, entries in snap.blocks():
        for meta, e, row in zip(metas_from_entries(entries), entries, entries["row"].tolist()):
            raw = wire[len(out)] if wire is not None else encode(meta, rb.slice(row, meta.record_count))
            rows = oc.with_header_timestamps(decode(raw, comp))
            new = rows.entries.copy()
            for f in ("append_time", "delete_horizon"):
                new[f] = e[f]
            new["row"] = 0
            out.append(dataclasses.replace(rows, entries=new))
    return out
