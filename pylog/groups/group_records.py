"""`__consumer_offsets` records of consumer (KIP-848) and share (KIP-932) groups, Kafka's format.

A key is an int16 record type followed by the key fields in the classic (non-flexible)
encoding; a value is an int16 version (0) followed by the value in the flexible encoding. The
record types are Kafka's, so its tooling reads them:

    3 ConsumerGroupMetadata          (group id)             -> group epoch
    5 ConsumerGroupMemberMetadata    (group id, member id)  -> subscription, client, timeouts
    6 ConsumerGroupTargetAssignmentMetadata (group id)      -> assignment epoch
    7 ConsumerGroupTargetAssignmentMember (group, member)   -> target partitions
    8 ConsumerGroupCurrentMemberAssignment (group, member)  -> epochs, state, owned / revoking
   10 ShareGroupMemberMetadata, 11 ShareGroupMetadata, 12-13 share target assignment,
   14 ShareGroupCurrentMemberAssignment (same shapes, no instance id / revocation)
   17 StreamsGroupMetadata, 19 StreamsGroupMemberMetadata, 20-21 streams target assignment,
   22 StreamsGroupCurrentMemberAssignment, 23 StreamsGroupTopology (KIP-1071: tasks by
      subtopology instead of partitions by topic)

A tombstone (value None) deletes a key. Schemas are described as data and run through the wire
codec of `pylog.protocol`, so no byte is laid out by hand here.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from pylog.protocol.api import decode_body, encode_body
from pylog.protocol.schema import MessageSpec, parse_message

CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_METADATA = 6
CONSUMER_GROUP_TARGET_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER = 8
SHARE_GROUP_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_GROUP_TARGET_METADATA = 12
SHARE_GROUP_TARGET_MEMBER = 13
SHARE_GROUP_CURRENT_MEMBER = 14

STREAMS_GROUP_METADATA = 17
STREAMS_GROUP_MEMBER_METADATA = 19
STREAMS_GROUP_TARGET_METADATA = 20
STREAMS_GROUP_TARGET_MEMBER = 21
STREAMS_GROUP_CURRENT_MEMBER = 22
STREAMS_GROUP_TOPOLOGY = 23

CONSUMER_TYPES = frozenset({3, 4, 5, 6, 7, 8})
SHARE_TYPES = frozenset({9, 10, 11, 12, 13, 14, 15})
STREAMS_TYPES = frozenset({17, 18, 19, 20, 21, 22, 23})

Assignment = dict[uuid.UUID, frozenset[int]]
"""Partitions by topic id (empty sets are dropped by `normalise`)."""


def _f(name: str, type_: str, **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name, "type": type_, "versions": "0+"}
    if extra.get("nullable"):
        d["nullableVersions"] = "0+"
        d["default"] = "null"
    if "fields" in extra:
        d["fields"] = extra["fields"]
    if "default" in extra:
        d["default"] = extra["default"]
    return d


def _value(name: str, fields: list[dict[str, Any]]) -> MessageSpec:
    return parse_message(
        {"type": "data", "name": name, "validVersions": "0", "flexibleVersions": "0+", "fields": fields}
    )


def _key(name: str, with_member: bool) -> MessageSpec:
    fields = [_f("GroupId", "string")] + ([_f("MemberId", "string")] if with_member else [])
    return parse_message(
        {"type": "data", "name": name, "validVersions": "0", "flexibleVersions": "none", "fields": fields}
    )


_TP = [_f("TopicId", "uuid"), _f("Partitions", "[]int32")]
_GROUP_KEY = _key("GroupKey", False)
_MEMBER_KEY = _key("GroupMemberKey", True)
_VALUES: dict[int, MessageSpec] = {
    CONSUMER_GROUP_METADATA: _value("ConsumerGroupMetadataValue", [_f("Epoch", "int32")]),
    CONSUMER_GROUP_MEMBER_METADATA: _value(
        "ConsumerGroupMemberMetadataValue",
        [
            _f("InstanceId", "string", nullable=True),
            _f("RackId", "string", nullable=True),
            _f("ClientId", "string"),
            _f("ClientHost", "string"),
            _f("SubscribedTopicNames", "[]string"),
            _f("SubscribedTopicRegex", "string", nullable=True),
            _f("RebalanceTimeoutMs", "int32", default=-1),
            _f("ServerAssignor", "string", nullable=True),
            {
                "name": "ClassicMemberMetadata",
                "type": "ClassicMemberMetadata",
                "versions": "0+",
                "nullableVersions": "0+",
                "taggedVersions": "0+",
                "tag": 0,
                "default": "null",
                "fields": [
                    _f("SessionTimeoutMs", "int32"),
                    _f(
                        "SupportedProtocols",
                        "[]ClassicProtocol",
                        fields=[_f("Name", "string"), _f("Metadata", "bytes")],
                    ),
                ],
            },
        ],
    ),
    CONSUMER_GROUP_TARGET_METADATA: _value(
        "ConsumerGroupTargetAssignmentMetadataValue", [_f("AssignmentEpoch", "int32")]
    ),
    CONSUMER_GROUP_TARGET_MEMBER: _value(
        "ConsumerGroupTargetAssignmentMemberValue",
        [
            _f("TopicPartitions", "[]TopicPartition", fields=_TP),
        ],
    ),
    CONSUMER_GROUP_CURRENT_MEMBER: _value(
        "ConsumerGroupCurrentMemberAssignmentValue",
        [
            _f("MemberEpoch", "int32"),
            _f("PreviousMemberEpoch", "int32"),
            _f("State", "int8"),
            _f("AssignedPartitions", "[]TopicPartitions", fields=_TP),
            _f("PartitionsPendingRevocation", "[]TopicPartitions", fields=_TP),
        ],
    ),
    SHARE_GROUP_MEMBER_METADATA: _value(
        "ShareGroupMemberMetadataValue",
        [
            _f("RackId", "string", nullable=True),
            _f("ClientId", "string"),
            _f("ClientHost", "string"),
            _f("SubscribedTopicNames", "[]string"),
        ],
    ),
    SHARE_GROUP_METADATA: _value("ShareGroupMetadataValue", [_f("Epoch", "int32")]),
    SHARE_GROUP_TARGET_METADATA: _value(
        "ShareGroupTargetAssignmentMetadataValue", [_f("AssignmentEpoch", "int32")]
    ),
    SHARE_GROUP_TARGET_MEMBER: _value(
        "ShareGroupTargetAssignmentMemberValue",
        [
            _f("TopicPartitions", "[]TopicPartition", fields=_TP),
        ],
    ),
    SHARE_GROUP_CURRENT_MEMBER: _value(
        "ShareGroupCurrentMemberAssignmentValue",
        [
            _f("MemberEpoch", "int32"),
            _f("PreviousMemberEpoch", "int32"),
            _f("State", "int8"),
            _f("AssignedPartitions", "[]TopicPartitions", fields=_TP),
        ],
    ),
}
_KV = [_f("Key", "string"), _f("Value", "string")]
_TASKS = [_f("SubtopologyId", "string"), _f("Partitions", "[]int32")]
_TOPIC_INFO = [
    _f("Name", "string"),
    _f("Partitions", "int32"),
    _f("ReplicationFactor", "int16"),
    _f("TopicConfigs", "[]TopicConfig", fields=[_f("key", "string"), _f("value", "string")]),
]
_VALUES.update(
    {
        STREAMS_GROUP_METADATA: _value(
            "StreamsGroupMetadataValue",
            [
                _f("Epoch", "int32"),
                _f("MetadataHash", "int64"),
                {
                    "name": "ValidatedTopologyEpoch",
                    "type": "int32",
                    "versions": "0+",
                    "taggedVersions": "0+",
                    "tag": 0,
                    "default": -1,
                },
            ],
        ),
        STREAMS_GROUP_MEMBER_METADATA: _value(
            "StreamsGroupMemberMetadataValue",
            [
                _f("InstanceId", "string", nullable=True),
                _f("RackId", "string", nullable=True),
                _f("ClientId", "string"),
                _f("ClientHost", "string"),
                _f("RebalanceTimeoutMs", "int32", default=-1),
                _f("TopologyEpoch", "int32"),
                _f("ProcessId", "string"),
                {
                    "name": "UserEndpoint",
                    "type": "Endpoint",
                    "versions": "0+",
                    "nullableVersions": "0+",
                    "default": "null",
                    "fields": [_f("Host", "string"), _f("Port", "uint16")],
                },
                _f("ClientTags", "[]KeyValue", fields=_KV),
            ],
        ),
        STREAMS_GROUP_TARGET_METADATA: _value(
            "StreamsGroupTargetAssignmentMetadataValue", [_f("AssignmentEpoch", "int32")]
        ),
        STREAMS_GROUP_TARGET_MEMBER: _value(
            "StreamsGroupTargetAssignmentMemberValue",
            [_f(n, "[]TaskIds", fields=_TASKS) for n in ("ActiveTasks", "StandbyTasks", "WarmupTasks")],
        ),
        STREAMS_GROUP_CURRENT_MEMBER: _value(
            "StreamsGroupCurrentMemberAssignmentValue",
            [
                _f("MemberEpoch", "int32"),
                _f("PreviousMemberEpoch", "int32"),
                _f("State", "int8"),
            ]
            + [
                _f(n, "[]TaskIds", fields=_TASKS)
                for n in (
                    "ActiveTasks",
                    "StandbyTasks",
                    "WarmupTasks",
                    "ActiveTasksPendingRevocation",
                    "StandbyTasksPendingRevocation",
                    "WarmupTasksPendingRevocation",
                )
            ],
        ),
        STREAMS_GROUP_TOPOLOGY: _value(
            "StreamsGroupTopologyValue",
            [
                _f("Epoch", "int32"),
                _f(
                    "Subtopologies",
                    "[]Subtopology",
                    fields=[
                        _f("SubtopologyId", "string"),
                        _f("SourceTopics", "[]string"),
                        _f("SourceTopicRegex", "[]string"),
                        _f("StateChangelogTopics", "[]TopicInfo", fields=_TOPIC_INFO),
                        _f("RepartitionSinkTopics", "[]string"),
                        _f("RepartitionSourceTopics", "[]TopicInfo", fields=_TOPIC_INFO),
                        _f(
                            "CopartitionGroups",
                            "[]CopartitionGroup",
                            fields=[
                                _f("SourceTopics", "[]int16"),
                                _f("SourceTopicRegex", "[]int16"),
                                _f("RepartitionSourceTopics", "[]int16"),
                            ],
                        ),
                    ],
                ),
            ],
        ),
    }
)
_MEMBER_TYPES = frozenset({5, 7, 8, 10, 13, 14, 19, 21, 22})


@dataclass(frozen=True)
class RecordKey:
    record_type: int
    group_id: str
    member_id: str | None = None


def encode_key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    if record_type in _MEMBER_TYPES:
        spec, body = _MEMBER_KEY, {"group_id": group_id, "member_id": member_id or ""}
    else:
        spec, body = _GROUP_KEY, {"group_id": group_id}
    parts = encode_body(spec, 0, body)
    return record_type.to_bytes(2, "big", signed=True) + b"".join(bytes(p) for p in parts)


def decode_key(data: bytes) -> RecordKey | None:
    """The key of a consumer-, share- or streams-group record; None for any other record type."""
    if len(data) < 2:
        return None
    record_type = int.from_bytes(data[:2], "big", signed=True)
    if (
        record_type not in CONSUMER_TYPES
        and record_type not in SHARE_TYPES
        and record_type not in STREAMS_TYPES
    ):
        return None
    spec = _MEMBER_KEY if record_type in _MEMBER_TYPES else _GROUP_KEY
    body, _ = decode_body(spec, 0, memoryview(data), 2)
    return RecordKey(record_type, body.group_id, getattr(body, "member_id", None))


def encode_value(record_type: int, value: dict[str, Any]) -> bytes:
    return b"\x00\x00" + b"".join(bytes(p) for p in encode_body(_VALUES[record_type], 0, value))


def decode_value(record_type: int, data: bytes) -> Any | None:
    """The value object (snake_case attributes); None for record types this module does not read."""
    spec = _VALUES.get(record_type)
    if spec is None:
        return None
    return decode_body(spec, 0, memoryview(data), 2)[0]


# ---------------------------------------------------------------------------- assignments


def normalise(assignment: dict[uuid.UUID, Any]) -> Assignment:
    return {t: frozenset(ps) for t, ps in assignment.items() if ps}


def to_wire(assignment: Assignment) -> list[dict[str, Any]]:
    """`[{topic_id, partitions}]`, sorted, as records and responses carry it."""
    return [
        {"topic_id": t, "partitions": sorted(ps)}
        for t, ps in sorted(assignment.items(), key=lambda i: str(i[0]))
    ]


def from_wire(topic_partitions: Any) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for tp in topic_partitions or ():
        out.setdefault(tp.topic_id, set()).update(tp.partitions)
    return normalise(out)
