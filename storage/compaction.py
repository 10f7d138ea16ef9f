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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

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


def plan(snaps: list[SegmentSnapshot], now_ms: int,
         delete_retention_ms: int) -> tuple[list[list[Block] | None], int, int]:
    """New blocks for each segment (None when it would not change), records before and after."""
    blocks = [snap.blocks() for snap in snaps]
    flat = [b for seg in blocks for b in seg]
    if not flat:
        return [None] * len(snaps), 0, 0
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
    return plans, len(offsets), int(keep.sum())


def compact_log(log: PartitionLog, now_ms: int, max_offset: int | None) -> CompactionResult:
    """Compact `log` (caller holds the log's job lock)."""
    from .log import CompactionResult

    if not log.config.compact:
        return CompactionResult(0, 0, 0)
    with log._lock:
        chosen = _cleanable(log, now_ms, max_offset)
        for seg in chosen:
            seg.busy = True
        snaps = [seg.snapshot() for seg in chosen]
    rewritten = 0
    try:
        plans, before, after = plan(snaps, now_ms, log.config.delete_retention_ms)
        for seg, blocks in zip(chosen, plans):
            if blocks is None:
                continue
            if not blocks and seg is not chosen[0]:
                rewritten += log._remove_segment(seg)
                continue
            written = write_segment(log.dir, seg.base_offset, coalesce(blocks), sealed=True)
            rewritten += log._swap_in(seg, written)
    finally:
        for seg in chosen:
            seg.busy = False
    return CompactionResult(rewritten, before, after)

