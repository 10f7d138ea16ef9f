"""Transactions at the partition: writing markers, reporting aborted transactions to fetches,
and learning a stored marker's type when the producer state is rebuilt.

A marker is a one-record control batch (transactional + control attributes) appended at the
log end like any batch. It ends the producer's open transaction in this partition: the last
stable offset moves past it, an ABORT is added to the aborted-transactions index, and waiting
fetches wake up (read_committed ones may now see more).
"""

from __future__ import annotations

import logging
import struct
from typing import Any

from pylog.protocol import records as rec
from pylog.protocol.errors import ErrorCode
from pylog.storage import BatchMeta, StorageError

log = logging.getLogger(__name__)

CONTROL_ATTRIBUTES = 0x30  # transactional | control
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23


def write_marker(
    part: Any, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, now_ms: int
) -> tuple[ErrorCode, int]:
    """Append a COMMIT / ABORT marker for the producer to `part` (a broker Partition, its leader);
    the error, and the marker's offset."""
    with part.lock:
        if part.deleted:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
        if not part.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        entry = part.producers.producers.get(producer_id)
        if entry is not None and producer_epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH, -1
        leo = part.log.log_end_offset
        wire = rec.encode_control_batch(
            base_offset=leo,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            commit=commit,
            coordinator_epoch=coordinator_epoch,
            timestamp_ms=now_ms,
            partition_leader_epoch=part.leader_epoch,
        )
        rows = rec.decode_batch(wire).records
        meta = BatchMeta(
            base_offset=leo,
            last_offset_delta=0,
            record_count=1,
            base_timestamp=now_ms,
            max_timestamp=now_ms,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=-1,
            attributes=CONTROL_ATTRIBUTES,
            partition_leader_epoch=part.leader_epoch,
        )
        segments = part.log.segment_count
        try:
            stored = part.log.append(rows, meta, now_ms=now_ms, wire_size=len(wire))
        except StorageError as exc:
            log.error("marker append to %s-%d failed: %s", part.topic, part.index, exc)
            return ErrorCode.KAFKA_STORAGE_ERROR, -1
        base = stored.base_offset
        if base == leo:
            part.wire.add(base, base, wire)
        else:
            part.wire.clear()
        part.producers.record(producer_id, producer_epoch, -1, -1, base, base, stored.max_timestamp)
        part.producers.end_transaction(producer_id, producer_epoch, marker_offset=base, aborted=not commit)
        rolled = part.log.segment_count != segments
    if rolled and part.on_roll is not None:
        part.on_roll(part)
    part.leader_appended()
    part.wake()
    return ErrorCode.NONE, base


def is_abort_marker(plog: Any, offset: int) -> bool:
    """Whether the control batch stored at `offset` holds an ABORT marker."""
    stored = plog.read(offset, 1, max_offset=offset + 1)
    if not stored or stored[0].records.num_rows == 0:
        return False
    rows = stored[0].records
    return rec.parse_control_record(rows.column("key")[0].as_py(), rows.column("value")[0].as_py()).is_abort


def aborted_for_fetch(part: Any, fetch_offset: int, batches: list[Any]) -> list[dict[str, int]]:
    """The `aborted_transactions` of a read_committed fetch answer holding `batches` (wire bytes
    from `fetch_offset` on): those overlapping the returned range."""
    if not part.producers.aborted or not batches:
        return []
    last = batches[-1]
    upper = _Q.unpack_from(last, 0)[0] + _I.unpack_from(last, _LAST_OFFSET_DELTA_AT)[0] + 1
    return [
        {"producer_id": a.producer_id, "first_offset": a.first_offset}
        for a in part.producers.aborted_transactions(fetch_offset, upper)
    ]
