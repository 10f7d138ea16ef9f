"""Log compaction (cleanup.policy=compact) as a columnar job.

Over the cleanable prefix of the log (segments before the active one, older than
`min.compaction.lag.ms`, below the caller's bound) every record whose key has a later record is
dropped: the key column is grouped with Arrow (`group_by(key).max(offset)`), the survivors are the
rows at those offsets. Tombstones (null value) survive until their batch's delete horizon, which is
set to `now + delete.retention.ms` the first time a cleaning keeps them. Control batches and
records without a key are always kept. A batch keeps its base offset and last offset delta with
fewer records; an emptied batch is dropped unless it is its producer's last batch in the range
(kept empty so producer state survives). Each segment is rewritten as a sealed segment with the
same base offset and swapped in atomically; the active segment is never touched.

A run is due (Kafka's cleaner rules) when the not-yet-cleaned segments are at least
`min.cleanable.dirty.ratio` of the cleanable bytes, when one of them is older than
`max.compaction.lag.ms`, or when a kept tombstone's delete horizon has passed. Which segments
are clean is known in memory only, so the first run after a restart cleans everything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from .config import LONG_MAX
from .rewrite import Block, coalesce, write_segment
from .schema import CONTROL_MASK
from .segment import Segment, SegmentSnapshot

if TYPE_CHECKING:
    from .log import CompactionResult, PartitionLog

EMPTY_BATCH_SIZE = 61  # a Kafka batch header without records


def _cleanable(log: PartitionLog, now_ms: int, max_offset: int | None) -> list[Segment]:
    c = log.config
    segs = log._segments
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


def _due(log: PartitionLog, chosen: list[Segment], now_ms: int) -> bool:
    c = log.config
    dirty = [s for s in chosen if not s.cleaned]
    if dirty:
        total = sum(s.data_size for s in chosen)
        if sum(s.data_size for s in dirty) >= c.min_cleanable_dirty_ratio * total:
            return True
        if c.max_compaction_lag_ms < LONG_MAX and any(
                0 <= s.first_append_time <= now_ms - c.max_compaction_lag_ms for s in dirty):
            return True
    return log._next_horizon_ms <= now_ms


class Plan:
    """What one run does: new blocks per segment (None: unchanged), counts, next tombstone horizon."""

    def __init__(self, blocks: list[list[Block] | None], before: int, after: int, horizon: int) -> None:
        self.blocks = blocks
        self.before = before
        self.after = after
        self.horizon = horizon


def plan(snaps: list[SegmentSnapshot], now_ms: int, delete_retention_ms: int) -> Plan:
    """Compute the run over the given segments (the columnar part)."""
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

    eligible = ~is_control[batch_of_row] & ~key_null
    keep = ~eligible
    if eligible.any():
        grouped = pa.table({"key": keys.filter(pa.array(eligible)), "offset": offsets[eligible]})
        latest = grouped.group_by("key", use_threads=False).aggregate([("offset", "max")])
        keep[np.searchsorted(offsets, latest.column("offset_max").to_numpy())] = True
    horizon = entries["delete_horizon"]
    tomb = eligible & value_null & keep
    expired = tomb & (horizon[batch_of_row] >= 0) & (horizon[batch_of_row] <= now_ms)
    keep &= ~expired
    tomb &= keep

    kept = np.bincount(batch_of_row, weights=keep, minlength=nb).astype(np.int64)
    keep_batch = (kept > 0) | is_control
    pids = entries["producer_id"]
    empty_idem = (kept == 0) & ~is_control & (pids >= 0)
    if empty_idem.any():  # an emptied batch stays if it is the producer's last one
        rev_pids = pids[::-1]
        _, last_rev = np.unique(rev_pids, return_index=True)
        last = np.zeros(nb, bool)
        last[nb - 1 - last_rev] = True
        keep_batch |= empty_idem & last

    out = entries.copy()
    out["record_count"] = kept
    has_tomb = np.bincount(batch_of_row, weights=tomb, minlength=nb) > 0
    out["delete_horizon"] = np.where(has_tomb & (horizon < 0), now_ms + delete_retention_ms, horizon)
    pending = out["delete_horizon"][has_tomb & keep_batch]
    next_horizon = int(pending.min()) if len(pending) else LONG_MAX
    shrunk = kept < counts
    scaled = np.maximum(EMPTY_BATCH_SIZE, entries["size"] * kept // np.maximum(counts, 1))
    out["size"] = np.where(shrunk, scaled, entries["size"])
    nonempty = shrunk & (kept > 0)
    if nonempty.any():  # max timestamp of what remains
        kept_ts, kept_batch = ts[keep], batch_of_row[keep]
        starts = np.searchsorted(kept_batch, np.flatnonzero(nonempty))
        out["max_timestamp"][nonempty] = np.maximum.reduceat(kept_ts, starts)
    changed_batch = shrunk | (out["delete_horizon"] != horizon) | ~keep_batch

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
    return Plan(plans, len(offsets), int(keep.sum()), next_horizon)


def compact_log(log: PartitionLog, now_ms: int, max_offset: int | None, force: bool) -> CompactionResult:
    """Compact `log` if a run is due (caller holds the log's job lock)."""
    from .log import CompactionResult

    if not log.config.compact:
        return CompactionResult(0, 0, 0)
    with log._lock:
        chosen = _cleanable(log, now_ms, max_offset)
        if not chosen or not (force or _due(log, chosen, now_ms)):
            return CompactionResult(0, 0, 0)
        for seg in chosen:
            seg.busy = True
        snaps = [seg.snapshot() for seg in chosen]
    rewritten = 0
    try:
        run = plan(snaps, now_ms, log.config.delete_retention_ms)
        for seg, blocks in zip(chosen, run.blocks):
            if blocks is None:
                seg.cleaned = True
            elif not blocks and seg is not chosen[0]:
                rewritten += log._remove_segment(seg)
            else:
                written = write_segment(log.dir, seg.base_offset, coalesce(blocks), sealed=True)
                rewritten += log._swap_in(seg, written, cleaned=True)
        log._next_horizon_ms = run.horizon
    finally:
        for seg in chosen:
            seg.busy = False
    return CompactionResult(rewritten, run.before, run.after)

