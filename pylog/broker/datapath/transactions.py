"""Transactions at the partition: the marker batch a coordinator appends, learning a stored
marker's type when the producer state is rebuilt, and the range a fetch answer covers.

A marker is a one-record control batch (transactional + control attributes) a coordinator
appends as leader like any batch (``Partition.append_as_leader`` with the COORDINATOR origin).
It ends the producer's open transaction in this partition: the last stable offset moves past
it, an ABORT is added to the aborted-transactions index, and waiting fetches wake up
(read_committed ones may now see more).
"""

from __future__ import annotations

import struct
from typing import Any

import pylog.protocol.records as rec

_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23


def marker_batch(
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, now_ms: int
) -> bytes:
    """A COMMIT / ABORT marker batch for the producer (the leader assigns its offset and epoch)."""
    return rec.encode_control_batch(
        base_offset=0,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        commit=commit,
        coordinator_epoch=coordinator_epoch,
        timestamp_ms=now_ms,
    )


def is_abort_marker(plog: Any, offset: int) -> bool:
    """Whether the control batch stored at `offset` holds an ABORT marker."""
    stored = plog.read(offset, 1, max_offset=offset + 1)
    if not stored or stored[0].records.num_rows == 0:
        return False
    rows = stored[0].records
    return rec.parse_control_record(rows.column("key")[0].as_py(), rows.column("value")[0].as_py()).is_abort


def last_offset_of(batch: Any) -> int:
    """The last offset of one RecordBatch v2 (wire bytes)."""
    return int(_Q.unpack_from(batch, 0)[0] + _I.unpack_from(batch, _LAST_OFFSET_DELTA_AT)[0])
