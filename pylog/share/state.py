"""Durable share-partition state: Kafka's ShareSnapshot records in `__share_group_state`.

Each share partition (group, topic id, partition) is keyed by a ShareSnapshotKey (type 0) and
its value is a ShareSnapshotValue: the start offset and the runs of in-flight records with their
delivery states and counts. The topic is compacted, so the latest snapshot of each share
partition is what a restart reads back. Which `__share_group_state` partition holds a share
partition is Kafka's rule: `abs("group:topicId:partition".hashCode()) % partitions`.

`ShareStateStore` is the sans-IO coordinator of that topic: it replays the partitions this broker
leads (`load_partition` / `unload_partition`) and turns a snapshot into the record to append.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pylog.groups.records import partition_for
from pylog.groups.types import CoordinatorRecord, Output
from pylog.protocol.api import decode_body, encode_body
from pylog.protocol.schema import parse_message
from pylog.share.partition import StateBatch

SNAPSHOT_KEY_TYPE = 0

ShareKey = tuple[str, uuid.UUID, int]
"""(group id, topic id, partition)."""

_KEY = parse_message(
    {
        "type": "data",
        "name": "ShareSnapshotKey",
        "validVersions": "0",
        "flexibleVersions": "none",
        "fields": [
            {"name": "GroupId", "type": "string", "versions": "0"},
            {"name": "TopicId", "type": "uuid", "versions": "0"},
            {"name": "Partition", "type": "int32", "versions": "0"},
        ],
    }
)
_VALUE = parse_message(
    {
        "type": "data",
        "name": "ShareSnapshotValue",
        "validVersions": "0",
        "flexibleVersions": "0+",
        "fields": [
            {"name": "SnapshotEpoch", "type": "uint16", "versions": "0"},
            {"name": "StateEpoch", "type": "int32", "versions": "0+"},
            {"name": "LeaderEpoch", "type": "int32", "versions": "0+"},
            {"name": "StartOffset", "type": "int64", "versions": "0"},
            {
                "name": "StateBatches",
                "type": "[]StateBatch",
                "versions": "0",
                "fields": [
                    {"name": "FirstOffset", "type": "int64", "versions": "0"},
                    {"name": "LastOffset", "type": "int64", "versions": "0"},
                    {"name": "DeliveryState", "type": "int8", "versions": "0"},
                    {"name": "DeliveryCount", "type": "int16", "versions": "0"},
                ],
            },
        ],
    }
)


def encode_snapshot_key(key: ShareKey) -> bytes:
    group, topic_id, partition = key
    body = {"group_id": group, "topic_id": topic_id, "partition": partition}
    return SNAPSHOT_KEY_TYPE.to_bytes(2, "big") + b"".join(bytes(p) for p in encode_body(_KEY, 0, body))


def decode_snapshot_key(data: bytes) -> ShareKey | None:
    if len(data) < 2 or int.from_bytes(data[:2], "big", signed=True) != SNAPSHOT_KEY_TYPE:
        return None  # ShareUpdate records (type 1) are not written by pylog
    k = decode_body(_KEY, 0, memoryview(data), 2)[0]
    return k.group_id, k.topic_id, k.partition


def encode_snapshot_value(start_offset: int, batches: Iterable[StateBatch], snapshot_epoch: int) -> bytes:
    body = {
        "snapshot_epoch": snapshot_epoch & 0xFFFF,
        "state_epoch": 0,
        "leader_epoch": 0,
        "start_offset": start_offset,
        "state_batches": [
            {
                "first_offset": b.first_offset,
                "last_offset": b.last_offset,
                "delivery_state": b.delivery_state,
                "delivery_count": b.delivery_count,
            }
            for b in batches
        ],
    }
    return b"\x00\x00" + b"".join(bytes(p) for p in encode_body(_VALUE, 0, body))


def decode_snapshot_value(data: bytes) -> tuple[int, list[StateBatch], int]:
    v = decode_body(_VALUE, 0, memoryview(data), 2)[0]
    batches = [
        StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in v.state_batches
    ]
    return v.start_offset, batches, v.snapshot_epoch


def state_partition_for(key: ShareKey, num_partitions: int) -> int:
    group, topic_id, partition = key
    return partition_for(f"{group}:{topic_id}:{partition}", num_partitions)


@dataclass
class StoredState:
    start_offset: int
    batches: list[StateBatch] = field(default_factory=list)
    snapshot_epoch: int = 0


class ShareStateStore:
    """The latest persisted state of each share partition whose state partition is loaded here."""

    def __init__(self, num_partitions: int) -> None:
        self.num_partitions = num_partitions
        self._states: dict[ShareKey, StoredState] = {}
        self._loading: set[int] = set()

    def partition_for(self, key: ShareKey) -> int:
        return state_partition_for(key, self.num_partitions)

    def get(self, key: ShareKey) -> StoredState | None:
        return self._states.get(key)

    def keys(self) -> list[ShareKey]:
        return list(self._states)

    def write(self, key: ShareKey, start_offset: int, batches: list[StateBatch]) -> CoordinatorRecord:
        """The record that persists this state (the store is updated at once: the shell reloads the
        partition from the log if the append fails)."""
        prev = self._states.get(key)
        epoch = (prev.snapshot_epoch + 1) if prev is not None else 0
        self._states[key] = StoredState(start_offset, list(batches), epoch)
        return CoordinatorRecord(
            self.partition_for(key),
            encode_snapshot_key(key),
            encode_snapshot_value(start_offset, batches, epoch),
        )

    def delete(self, key: ShareKey) -> CoordinatorRecord:
        self._states.pop(key, None)
        return CoordinatorRecord(self.partition_for(key), encode_snapshot_key(key), None)

    # ------------------------------------------------------------------ the CoordinatorShell protocol

    def mark_loading(self, partition: int) -> None:
        self._loading.add(partition)

    def load_partition(self, partition: int, records: Iterable[Any], *, now_ms: int) -> None:
        self.unload_partition(partition)
        for entry in records:
            if not isinstance(entry, tuple):
                continue
            key = decode_snapshot_key(bytes(entry[0]))
            if key is None:
                continue
            if entry[1] is None:
                self._states.pop(key, None)
            else:
                start, batches, epoch = decode_snapshot_value(bytes(entry[1]))
                self._states[key] = StoredState(start, batches, epoch)
        self._loading.discard(partition)

    def unload_partition(self, partition: int) -> Output:
        for key in [k for k in self._states if self.partition_for(k) == partition]:
            del self._states[key]
        return Output()

    def next_deadline_ms(self) -> int | None:
        return None

    def tick(self, now_ms: int) -> Output:
        return Output()
