"""Control batches: the transaction markers (commit / abort) a coordinator writes into partitions.

A control record's key is ``version int16 (0) + type int16``; for COMMIT / ABORT its value is
``version int16 (0) + coordinator epoch int32`` (Kafka's EndTransactionMarker).
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

import pyarrow as pa

from pylog.model import RECORD_SCHEMA

from ..errors import CorruptRecordBatch
from .batch import encode_batch

_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")
CONTROL_KEY_VERSION = 0
MARKER_VALUE_VERSION = 0


class ControlType(IntEnum):
    """Kafka's ControlRecordType ids."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class ControlRecord(NamedTuple):
    version: int
    type: int  # a ControlType value, or an unknown id passed through
    coordinator_epoch: int | None  # set for COMMIT / ABORT markers

    @property
    def is_commit(self) -> bool:
        return self.type == ControlType.COMMIT

    @property
    def is_abort(self) -> bool:
        return self.type == ControlType.ABORT


def control_key(control_type: int) -> bytes:
    return _KEY.pack(CONTROL_KEY_VERSION, control_type)


def marker_value(coordinator_epoch: int) -> bytes:
    return _MARKER_VALUE.pack(MARKER_VALUE_VERSION, coordinator_epoch)


def parse_control_record(key: bytes | memoryview | None, value: bytes | memoryview | None) -> ControlRecord:
    """Read a control record's key (and, for transaction markers, its value)."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordBatch("control record key shorter than 4 bytes")
    version, ctype = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordBatch(f"negative control record version {version}")
    epoch = None
    if ctype in (ControlType.ABORT, ControlType.COMMIT):
        if value is None or len(value) < _MARKER_VALUE.size:
            raise CorruptRecordBatch("transaction marker value shorter than 6 bytes")
        mversion, epoch = _MARKER_VALUE.unpack_from(value)
        if mversion < 0:
            raise CorruptRecordBatch(f"negative transaction marker version {mversion}")
    return ControlRecord(version, ctype, epoch)


def encode_control_batch(
    *,
    base_offset: int,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp_ms: int,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One transactional control batch holding a single COMMIT or ABORT marker at ``base_offset``."""
    ctype = ControlType.COMMIT if commit else ControlType.ABORT
    rows = pa.RecordBatch.from_arrays(
        [
            pa.array([base_offset], pa.int64()),
            pa.array([timestamp_ms], pa.timestamp("ms")),
            pa.array([control_key(ctype)], pa.binary()),
            pa.array([marker_value(coordinator_epoch)], pa.binary()),
            pa.array([[]], RECORD_SCHEMA.field("headers").type),
        ],
        schema=RECORD_SCHEMA,
    )
    return encode_batch(
        rows,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )
