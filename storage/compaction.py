"""Log compaction (cleanup.policy=compact) as a columnar job.

Over the cleanable prefix of the log (segments before the active one, older than
`min.compaction.lag.ms`, below the caller's bound, normally the last stable offset) every record
whose key has a later record is dropped: the key column is grouped with Arrow
(`group_by(key).max(offset)`), the survivors are the rows at those offsets. Tombstones (null value)
survive until their batch's delete horizon, which is set to `now + delete.retention.ms` the first
time a cleaning keeps them. Records without a key are always kept.

Transactions follow Kafka's LogCleaner (see `transactions`): records of aborted transactions are
removed and take no part in choosing the latest record of a key; records of transactions still
open are left alone. A marker stays while its transaction has data batches in the log; once it
has none the marker gets a delete horizon like a tombstone and goes after it (a run is prompted
for the first cleaning that finds it so). A batch keeps its base offset and last offset delta with
fewer records; an emptied batch is dropped unless it is its producer's last batch in the log
(kept empty so the producer's epoch and sequence survive). Each segment is rewritten as a sealed
segment with the same base offset and swapped in atomically; the active segment is never touched.

A run is due (Kafka's cleaner rules) when the not-yet-cleaned segments are at least
`min.cleanable.dirty.ratio` of the cleanable bytes, when one of them is older than
`max.compaction.lag.ms`, or when a kept tombstone's or marker's delete horizon has passed. Which
segments are clean is known in memory only, so the first run after a restart cleans everything.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import NamedTuple, Protocol

import numpy as np
import pyarrow as pa

from pylog.model import CONTROL_MASK, LONG_MAX

from .config import LogConfig
from .errors import OffsetOutOfRange
from .log_jobs import SegmentRewrite
from .rewrite import Block, coalesce
from .schema import StoredBatch
from .segment import Segment, SegmentSnapshot
from .transactions import ABORT, OPEN, UNKNOWN_MARKER, Resolver, all_open, classify, control_types


class CompactedLog(Protocol):
    """What compaction uses of a log (public members of `PartitionLog`)."""

    config: LogConfig
    clean_horizon_ms: int

    def rewrite(self, choose: Callable[[tuple[Segment, ...]], list[Segment]], *,
                entries_after: bool = False) -> contextlib.AbstractContextManager[SegmentRewrite | None]: ...

    def read(self, start_offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one: bool = True) -> list[StoredBatch]: ...

EMPTY_BATCH_SIZE = 61  # a Kafka batch header without records


def _cleanable(log: CompactedLog, segs: tuple[Segment, ...], now_ms: int,
               max_offset: int | None) -> list[Segment]:
    c = log.config
    out = []
    for k, seg in enumerate(segs[:-1]):
        if max_offset is not None and segs[k + 1].base_offset > max_offset:
            break
        if c.min_compaction_lag_ms > 0 and seg.max_timestamp > now_ms - c.min_compaction_lag_ms:
            break
        if seg.busy:
            break
        out.append(seg)
    return out


def _due(log: CompactedLog, chosen: list[Segment], now_ms: int) -> bool:
    c = log.config
    dirty = [s for s in chosen if not s.cleaned]
    if dirty:
        total = sum(s.data_size for s in chosen)
        if sum(s.data_size for s in dirty) >= c.min_cleanable_dirty_ratio * total:
            return True
        if c.max_compaction_lag_ms < LONG_MAX and any(
                0 <= s.first_append_time <= now_ms - c.max_compaction_lag_ms for s in dirty):
            return True
    return log.clean_horizon_ms <= now_ms


class Plan:
    """What one run does: new blocks per segment (None: unchanged), counts, next horizon, and the
    ABORT markers whose transactions have no records left (the aborted index may forget them)."""

    def __init__(self, blocks: list[list[Block] | None], before: int, after: int, horizon: int,
                 cleared_aborts: tuple[int, ...] = ()) -> None:
        self.blocks = blocks
        self.before = before
        self.after = after
        self.horizon = horizon
        self.cleared_aborts = cleared_aborts


def plan(snaps: list[SegmentSnapshot], now_ms: int, delete_retention_ms: int, *,
         tail: np.ndarray | None = None, resolve: Resolver = all_open) -> Plan:
    """Compute the run over the given segments (the columnar part). `tail` holds the `.batches`
    entries after them (producers' later batches); `resolve` types the markers found there."""
    blocks = [snap.blocks() for snap in snaps]
    flat = [b for seg in blocks for b in seg]
    if not flat:
        return Plan([None] * len(snaps), 0, 0, LONG_MAX)
    entries = np.concatenate([e for _, e in flat])
    counts = entries["record_count"].astype(np.int64)
    nb = len(entries)
    batch_of_row = np.repeat(np.arange(nb), counts)
    offsets = np.concatenate([rb.column(0).to_numpy() for rb, _ in flat])
    ts = np.concatenate([rb.column(1).cast(pa.int64()).to_numpy() for rb, _ in flat])
    keys = pa.chunked_array([rb.column(2) for rb, _ in flat], pa.binary())
    key_null = keys.is_null().to_numpy(zero_copy_only=False)
    value_null = np.concatenate([rb.column(3).is_null().to_numpy(zero_copy_only=False) for rb, _ in flat])
    is_control = (entries["attributes"] & CONTROL_MASK) != 0
    horizon = entries["delete_horizon"]
    pids = entries["producer_id"]

    marker_types = np.full(nb, UNKNOWN_MARKER, np.int16)
    with_record = is_control & (counts > 0)
    if with_record.any():  # a marker's type is its first record's key
        first_rows = (np.cumsum(counts) - counts)[with_record]
        marker_types[with_record] = control_types(keys.take(pa.array(first_rows)))
    txn = classify(entries, marker_types, resolve)
    drop_all = txn.aborted | (is_control & txn.discardable & (horizon >= 0) & (horizon <= now_ms))

    eligible = ~(is_control | txn.aborted | txn.undecided)[batch_of_row] & ~key_null
    keep = ~eligible & ~drop_all[batch_of_row]
    if eligible.any():
        grouped = pa.table({"key": keys.filter(pa.array(eligible)), "offset": offsets[eligible]})
        latest = grouped.group_by("key", use_threads=False).aggregate([("offset", "max")])
        keep[np.searchsorted(offsets, latest.column("offset_max").to_numpy())] = True
    tomb = eligible & value_null & keep
    expired = tomb & (horizon[batch_of_row] >= 0) & (horizon[batch_of_row] <= now_ms)
    keep &= ~expired
    tomb &= keep

    kept = np.bincount(batch_of_row, weights=keep, minlength=nb).astype(np.int64)
    keep_batch = kept > 0
    if (~keep_batch & (pids >= 0)).any():  # an emptied batch stays if it is the producer's last
        _, last_rev = np.unique(pids[::-1], return_index=True)
        last = np.zeros(nb, bool)
        last[nb - 1 - last_rev] = True
        if tail is not None and len(tail):
            last &= ~np.isin(pids, tail["producer_id"])
        keep_batch |= last & (pids >= 0)

    out = entries.copy()
    out["record_count"] = kept
    has_tomb = np.bincount(batch_of_row, weights=tomb, minlength=nb) > 0
    waiting_marker = is_control & txn.discardable & (kept > 0)
    timed = has_tomb | waiting_marker
    out["delete_horizon"] = np.where(timed & (horizon < 0), now_ms + delete_retention_ms, horizon)
    pending = out["delete_horizon"][timed & keep_batch]
    next_horizon = int(pending.min()) if len(pending) else LONG_MAX
    # A marker whose transaction's last batches go in this run is discardable in the next one.
    closing = txn.marker_of[(txn.marker_of >= 0) & keep_batch]
    has_data = np.bincount(closing, minlength=nb) > 0
    if (is_control & ~txn.discardable & ~has_data & keep_batch).any():
        next_horizon = min(next_horizon, now_ms)
    shrunk = kept < counts
    scaled = np.maximum(EMPTY_BATCH_SIZE, entries["size"] * kept // np.maximum(counts, 1))
    out["size"] = np.where(shrunk, scaled, entries["size"])
    nonempty = shrunk & (kept > 0)
    if nonempty.any():  # max timestamp of what remains
        kept_ts, kept_batch = ts[keep], batch_of_row[keep]
        starts = np.searchsorted(kept_batch, np.flatnonzero(nonempty))
        out["max_timestamp"][nonempty] = np.maximum.reduceat(kept_ts, starts)
    changed_batch = shrunk | (out["delete_horizon"] != horizon) | ~keep_batch
    cleared = entries["base_offset"][is_control & txn.discardable & (marker_types == ABORT)]

    plans: list[list[Block] | None] = []
    b0 = r0 = 0
    for snap, seg_blocks in zip(snaps, blocks):
        n_batches = sum(len(e) for _, e in seg_blocks)
        n_rows = sum(rb.num_rows for rb, _ in seg_blocks)
        if snap.sealed and not changed_batch[b0:b0 + n_batches].any():
            plans.append(None)
        else:
            new_blocks: list[Block] = []
            b, r = b0, r0
            for rb, e in seg_blocks:
                mask = keep[r:r + rb.num_rows]
                sel = keep_batch[b:b + len(e)]
                ne = out[b:b + len(e)][sel].copy()
                if len(ne):
                    ne["row"] = np.concatenate([[0], np.cumsum(ne["record_count"])[:-1]])
                    rows = rb if mask.all() else rb.filter(pa.array(mask))
                    new_blocks.append((rows, ne))
                b += len(e)
                r += rb.num_rows
            plans.append(new_blocks)
        b0 += n_batches
        r0 += n_rows
    return Plan(plans, len(offsets), int(keep.sum()), next_horizon, tuple(cleared.tolist()))


class CompactionResult(NamedTuple):
    segments: int  # segments rewritten
    records_before: int
    records_after: int
    # ABORT markers (offsets) whose transactions have no records left: an aborted-transactions
    # index may forget them before the markers themselves go
    cleared_aborts: tuple[int, ...] = ()


def compact_log(log: CompactedLog, now_ms: int, max_offset: int | None, force: bool) -> CompactionResult:
    """Compact `log` if a run is due, through the log's segment-rewrite API."""
    if not log.config.compact:
        return CompactionResult(0, 0, 0)

    def choose(segments: tuple[Segment, ...]) -> list[Segment]:
        chosen = _cleanable(log, segments, now_ms, max_offset)
        return chosen if chosen and (force or _due(log, chosen, now_ms)) else []

    with log.rewrite(choose, entries_after=True) as job:
        if job is None:
            return CompactionResult(0, 0, 0)
        tail = job.entries_after
        run = plan(list(job.snapshots), now_ms, log.config.delete_retention_ms, tail=tail,
                   resolve=_resolver(log, tail))
        rewritten = 0
        for seg, blocks in zip(job.segments, run.blocks):
            if blocks is None:
                job.mark_cleaned(seg)
            elif not blocks and seg is not job.segments[0]:
                rewritten += job.remove(seg)
            else:
                rewritten += job.replace(seg, coalesce(blocks), cleaned=True)
        log.clean_horizon_ms = run.horizon
    return CompactionResult(rewritten, run.before, run.after, run.cleared_aborts)


def _resolver(log: CompactedLog, tail: np.ndarray) -> Resolver:
    """Types of the producers' first markers in `tail` (one record read per producer asked about:
    only transactions that span the end of the run)."""
    markers = tail[(tail["attributes"] & CONTROL_MASK) != 0]
    producers, first = np.unique(markers["producer_id"], return_index=True)

    def resolve(pids: np.ndarray) -> np.ndarray:
        out = np.full(len(pids), OPEN, np.int16)
        for pid in np.unique(pids).tolist():
            i = int(np.searchsorted(producers, pid))
            if i < len(producers) and producers[i] == pid:
                out[pids == pid] = _marker_type(log, markers[first[i]])
        return out

    return resolve


def _marker_type(log: CompactedLog, entry: np.void) -> int:
    if int(entry["record_count"]) == 0:
        return UNKNOWN_MARKER
    offset = int(entry["base_offset"])
    try:
        stored = log.read(offset, 1, max_offset=offset + 1)
    except OffsetOutOfRange:  # truncated meanwhile: treat the transaction as open
        return OPEN
    if not stored or stored[0].meta.base_offset != offset or not stored[0].records.num_rows:
        return OPEN
    return int(control_types(stored[0].records.column(2).slice(0, 1))[0])
