"""What log compaction knows about transactions, computed from `.batches` entries (no record reads
except the first key of each marker).

Kafka's cleaner walks the log with the aborted-transactions index (CleanedTransactionMetadata);
here the same decisions are array operations over the batch entries of a cleaning run, sorted by
producer id and then by position. A transactional data batch belongs to the transaction that the
producer's next control batch (marker) ends: the batch is aborted when that marker is an ABORT,
committed when it is a COMMIT, and undecided when no marker follows it in the log (an open
transaction, above the last stable offset). A marker is *discardable* when the run saw no data
batch of its transaction (Kafka's rule: an ABORT marker stays while aborted batches of its
transaction remain, a COMMIT marker while committed ones remain; an empty control batch is
always discardable).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from pylog.model import CONTROL_MASK, TRANSACTIONAL_MASK

# Kafka ControlRecordType ids (the int16 after the int16 version in a control record's key).
ABORT = 0
COMMIT = 1
UNKNOWN_MARKER = -1  # an empty control batch, or a key too short to say
OPEN = -2  # no marker follows: the transaction is still open

CONTROL_KEY_SIZE = 4

Resolver = Callable[[np.ndarray], np.ndarray]
"""Marker type (ABORT, COMMIT, UNKNOWN_MARKER or OPEN) of the next marker after the cleaned range,
for each producer id given."""


def control_types(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The ControlRecordType of each control record key: big-endian int16 version, int16 type
    (Kafka parses any non-negative version the same way); UNKNOWN_MARKER when unreadable."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)
    n = len(keys)
    out = np.full(n, UNKNOWN_MARKER, np.int16)
    if n == 0:
        return out
    keys = keys.cast(pa.binary())
    bufs = keys.buffers()
    offsets = np.frombuffer(bufs[1], np.int32, n + 1, keys.offset * 4).astype(np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    start = offsets[:-1]
    ok = (offsets[1:] - start) >= CONTROL_KEY_SIZE
    if keys.null_count:
        ok &= keys.is_valid().to_numpy(zero_copy_only=False)
    s = start[ok]
    version = (data[s].astype(np.int16) << 8) | data[s + 1]
    kind = (data[s + 2].astype(np.int16) << 8) | data[s + 3]
    out[ok] = np.where(version >= 0, kind, UNKNOWN_MARKER)
    return out


def all_open(pids: np.ndarray) -> np.ndarray:
    """A resolver that knows no marker after the range."""
    return np.full(len(pids), OPEN, np.int16)


class TxnView(NamedTuple):
    """Per batch entry of a cleaning run."""

    aborted: np.ndarray  # bool: data batch of an aborted transaction
    undecided: np.ndarray  # bool: transactional data batch of a transaction still open
    discardable: np.ndarray  # bool: marker whose transaction has no data batch in the run
    marker_of: np.ndarray  # int64: the entry of the marker ending this data batch's transaction, -1


def classify(entries: np.ndarray, marker_types: np.ndarray, resolve: Resolver = all_open) -> TxnView:
    """Transactional state of every batch entry (BATCH_DTYPE, offset order). `marker_types` holds
    each control batch's marker type (UNKNOWN_MARKER elsewhere); `resolve` answers for data
    batches whose marker lies after the entries."""
    nb = len(entries)
    attrs = entries["attributes"]
    pids = entries["producer_id"]
    control = (attrs & CONTROL_MASK) != 0
    txn_data = ((attrs & TRANSACTIONAL_MASK) != 0) & ~control & (pids >= 0)
    aborted = np.zeros(nb, bool)
    undecided = np.zeros(nb, bool)
    marker_of = np.full(nb, -1, np.int64)
    discardable = control & (entries["record_count"] == 0)
    members = np.flatnonzero(control | txn_data)
    if not len(members):
        return TxnView(aborted, undecided, discardable, marker_of)
    order = members[np.lexsort((members, pids[members]))]  # by producer, then position
    n = len(order)
    sp, sc = pids[order], control[order]
    pos = np.arange(n)
    # the first control batch at or after each position, in that order
    next_control = np.minimum.accumulate(np.where(sc, pos, n)[::-1])[::-1]
    data = np.flatnonzero(~sc)
    j = np.minimum(next_control[data], n - 1)
    closed = (next_control[data] < n) & (sp[j] == sp[data])
    kind = np.where(closed, marker_types[order[j]], OPEN).astype(np.int16)
    beyond = ~closed
    if beyond.any():
        kind[beyond] = resolve(sp[data[beyond]])
    aborted[order[data]] = kind == ABORT
    undecided[order[data]] = kind == OPEN
    marker_of[order[data[closed]]] = order[j[closed]]
    # a marker saw its transaction's data when the entry before it (same producer) is data
    observed = np.zeros(n, bool)
    observed[1:] = sc[1:] & ~sc[:-1] & (sp[1:] == sp[:-1])
    discardable[order[sc & ~observed]] = True
    return TxnView(aborted, undecided, discardable, marker_of)
