"""Replaying a `__consumer_offsets` partition into the state machines, in log order.

Each record goes to the state machine of its key: offset commits (plain and transactional) and
transaction markers to the `OffsetStore`, GroupMetadata to the classic groups, record types 3-8
to the consumer groups, 10-14 to the share groups and 17-23 to the streams groups. Order across
types matters: a group that changed type wrote the old type's tombstones before the new type's
records, so replaying in log order ends in the type the group had last.
"""

from __future__ import annotations

from collections.abc import Iterable

from pylog.groups.classic import ClassicProtocol
from pylog.groups.consumer import ConsumerProtocol
from pylog.groups.group_records import CONSUMER_TYPES, SHARE_TYPES, STREAMS_TYPES
from pylog.groups.group_records import decode_key as decode_group_record_key
from pylog.groups.offsets import OffsetStore
from pylog.groups.records import GroupKey, OffsetKey, decode_key
from pylog.groups.share import ShareProtocol
from pylog.groups.streams import StreamsProtocol
from pylog.groups.types import TxnMarkerRecord, TxnOffsetRecord

LogEntry = tuple[bytes, bytes | None] | tuple[bytes, bytes | None, int] | TxnOffsetRecord | TxnMarkerRecord
"""A replayed record: (key, value) or (key, value, log offset), a transactional one, or a marker."""

_GROUP_RECORD_TYPES = CONSUMER_TYPES | SHARE_TYPES | STREAMS_TYPES


def replay(
    records: Iterable[LogEntry],
    partition: int,
    offsets: OffsetStore,
    classic: ClassicProtocol,
    consumer: ConsumerProtocol,
    share: ShareProtocol,
    streams: StreamsProtocol,
) -> None:
    """Apply `partition`'s records, oldest first."""
    at = -1  # log offset of the entry (counted when the entries do not carry it)
    for entry in records:
        if isinstance(entry, TxnMarkerRecord):
            offsets.replay_marker(entry.producer_id, entry.commit, partition)
            continue
        if isinstance(entry, TxnOffsetRecord):
            at = entry.offset if entry.offset >= 0 else at + 1
            k = decode_key(bytes(entry.key))
            if isinstance(k, OffsetKey) and entry.value is not None:
                offsets.replay_txn_commit(
                    entry.producer_id, k.group_id, (k.topic, k.partition), entry.value, at
                )
            continue
        key, value = bytes(entry[0]), entry[1]
        at = entry[2] if len(entry) > 2 and entry[2] >= 0 else at + 1
        if len(key) >= 2 and int.from_bytes(key[:2], "big", signed=True) in _GROUP_RECORD_TYPES:
            rk = decode_group_record_key(key)
            if rk is None:
                continue
            if rk.record_type in CONSUMER_TYPES:
                consumer.replay(rk, value, partition)
            elif rk.record_type in STREAMS_TYPES:
                streams.replay(rk, value, partition)
            else:
                share.replay(rk, value, partition)
            continue
        k = decode_key(key)
        if isinstance(k, OffsetKey):
            offsets.replay_commit(k.group_id, (k.topic, k.partition), value, at)
        elif isinstance(k, GroupKey):
            classic.replay(k.group_id, value, partition)
