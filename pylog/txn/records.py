"""Keys and values of the compacted `__transaction_state` topic, and which partition holds an id.

The encoding is Apache Kafka's (TransactionLogKey v0, TransactionLogValue v0/v1: an int16 version
then the struct), described here as data and run through pylog's schema-driven codec, so Kafka's
tooling reads pylog's transaction log and the other way round. Writers emit value v0 (what Kafka
writes for classic transactions); readers accept v0 and v1 (v1's tagged fields are ignored).
A tombstone (value None) removes an expired transactional id.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pylog.groups.records import partition_for as _java_hash_partition
from pylog.protocol.api import decode_body, encode_body
from pylog.protocol.schema import parse_message
from pylog.txn.state import TransactionMetadata, TxnState
from pylog.txn.types import TopicPartition

_I16 = struct.Struct(">h")
KEY_VERSION = 0
VALUE_VERSION = 0

_KEY = parse_message(
    {
        "type": "data",
        "name": "TransactionLogKey",
        "validVersions": "0",
        "flexibleVersions": "none",
        "fields": [{"name": "TransactionalId", "type": "string", "versions": "0"}],
    }
)

_VALUE = parse_message(
    {
        "type": "data",
        "name": "TransactionLogValue",
        "validVersions": "0-1",
        "flexibleVersions": "1+",
        "fields": [
            {"name": "ProducerId", "type": "int64", "versions": "0+"},
            {"name": "PreviousProducerId", "type": "int64", "versions": "1+", "taggedVersions": "1+",
             "tag": 0, "default": -1},
            {"name": "NextProducerId", "type": "int64", "versions": "1+", "taggedVersions": "1+",
             "tag": 1, "default": -1},
            {"name": "ProducerEpoch", "type": "int16", "versions": "0+"},
            {"name": "TransactionTimeoutMs", "type": "int32", "versions": "0+"},
            {"name": "TransactionStatus", "type": "int8", "versions": "0+"},
            {
                "name": "TransactionPartitions",
                "type": "[]PartitionsSchema",
                "versions": "0+",
                "nullableVersions": "0+",
                "fields": [
                    {"name": "Topic", "type": "string", "versions": "0+"},
                    {"name": "PartitionIds", "type": "[]int32", "versions": "0+"},
                ],
            },
            {"name": "TransactionLastUpdateTimestampMs", "type": "int64", "versions": "0+"},
            {"name": "TransactionStartTimestampMs", "type": "int64", "versions": "0+"},
            {"name": "ClientTransactionVersion", "type": "int16", "versions": "1+", "taggedVersions": "1+",
             "tag": 2, "default": 0},
        ],
    }
)


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """Kafka's `Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions`."""
    return _java_hash_partition(transactional_id, num_partitions)


def _join(parts: list[object]) -> bytes:
    return b"".join(bytes(p) for p in parts)  # type: ignore[call-overload]


def transaction_log_key(transactional_id: str) -> bytes:
    body = encode_body(_KEY, KEY_VERSION, {"transactional_id": transactional_id})
    return _I16.pack(KEY_VERSION) + _join(body)


def decode_transaction_log_key(data: bytes) -> str | None:
    """The transactional id; None for key versions this coordinator does not know (skipped)."""
    if len(data) < 2:
        raise ValueError("truncated __transaction_state key")
    (version,) = _I16.unpack_from(data)
    if version != KEY_VERSION:
        return None
    key, _ = decode_body(_KEY, version, memoryview(data)[2:])
    return str(key.transactional_id)


@dataclass(frozen=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    last_update_timestamp_ms: int
    start_timestamp_ms: int


def encode_transaction_log_value(md: TransactionMetadata) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(md.partitions):
        by_topic.setdefault(topic, []).append(p)
    partitions = (
        None
        if md.state is TxnState.EMPTY
        else [{"topic": t, "partition_ids": ps} for t, ps in by_topic.items()]
    )
    body = encode_body(
        _VALUE,
        VALUE_VERSION,
        {
            "producer_id": md.producer_id,
            "producer_epoch": md.producer_epoch,
            "transaction_timeout_ms": md.timeout_ms,
            "transaction_status": int(md.state),
            "transaction_partitions": partitions,
            "transaction_last_update_timestamp_ms": md.last_update_timestamp_ms,
            "transaction_start_timestamp_ms": md.start_timestamp_ms,
        },
    )
    return _I16.pack(VALUE_VERSION) + _join(body)


def decode_transaction_log_value(data: bytes) -> TransactionLogValue:
    if len(data) < 2:
        raise ValueError("truncated __transaction_state value")
    (version,) = _I16.unpack_from(data)
    if not 0 <= version <= 1:
        raise ValueError(f"unsupported TransactionLogValue version {version}")
    v, _ = decode_body(_VALUE, version, memoryview(data)[2:])
    parts = frozenset(
        (t.topic, int(p)) for t in (v.transaction_partitions or ()) for p in t.partition_ids
    )
    return TransactionLogValue(
        int(v.producer_id),
        int(v.producer_epoch),
        int(v.transaction_timeout_ms),
        TxnState(v.transaction_status),
        parts,
        int(v.transaction_last_update_timestamp_ms),
        int(v.transaction_start_timestamp_ms),
    )
