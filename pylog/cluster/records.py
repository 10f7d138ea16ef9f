"""Record types of ``__cluster_metadata`` and their serialization.

The records mirror Kafka's KRaft metadata records (TopicRecord, PartitionRecord,
PartitionChangeRecord, ConfigRecord, ...) with snake_case fields. One Raft entry
holds one *batch* of records, applied atomically (e.g. a topic with its configs and
partitions).

Serialization is compact JSON: ``[{"type": "TopicRecord", "name": ..., ...}, ...]``; bytes
(SCRAM salts and keys) are base64 strings.
Metadata changes are rare and small, so readability (``cat`` the log, diff two
images) beats the few bytes a schema'd binary would save; the ``type`` tag plus
defaults for missing fields lets records gain fields later. UUIDs are strings,
lists of ids are JSON arrays.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

# PartitionChangeRecord.leader: the leader did not change / there is no leader.
LEADER_NO_CHANGE = -2
NO_LEADER = -1


class ConfigResourceType(enum.IntEnum):
    """Kafka's ConfigResource.Type ids, as in DescribeConfigs / AlterConfigs."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class SecurityProtocol(enum.IntEnum):
    PLAINTEXT = 0
    SSL = 1
    SASL_PLAINTEXT = 2
    SASL_SSL = 3


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    name: str
    host: str
    port: int
    security_protocol: int = SecurityProtocol.PLAINTEXT


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    TYPE: ClassVar[str] = "RegisterBrokerRecord"
    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    endpoints: tuple[BrokerEndpoint, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord:
    """A registered broker was fenced or unfenced, or began a controlled shutdown (None: unchanged)."""

    TYPE: ClassVar[str] = "BrokerRegistrationChangeRecord"
    broker_id: int
    broker_epoch: int
    fenced: bool | None = None
    in_controlled_shutdown: bool | None = None


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord:
    TYPE: ClassVar[str] = "UnregisterBrokerRecord"
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class TopicRecord:
    TYPE: ClassVar[str] = "TopicRecord"
    name: str
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    TYPE: ClassVar[str] = "PartitionRecord"
    topic_id: uuid.UUID
    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    # a reassignment in flight (KIP-455): ``replicas`` is the target followed by the replicas
    # being removed; the target's new members are ``adding_replicas``
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    """A change to a partition; None / LEADER_NO_CHANGE fields are unchanged.

    Applying it bumps the partition epoch; a new leader also bumps the leader epoch.
    """

    TYPE: ClassVar[str] = "PartitionChangeRecord"
    topic_id: uuid.UUID
    partition_id: int
    isr: tuple[int, ...] | None = None
    leader: int = LEADER_NO_CHANGE
    replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    TYPE: ClassVar[str] = "RemoveTopicRecord"
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    """Set ``name`` to ``value`` on a resource; ``value=None`` deletes the override.

    A broker resource name is the broker id as a string, or "" for the cluster default.
    """

    TYPE: ClassVar[str] = "ConfigRecord"
    resource_type: int
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    """A block of producer ids was handed to a broker; ids below ``producer_ids_end`` are taken."""

    TYPE: ClassVar[str] = "ProducerIdsRecord"
    broker_id: int
    broker_epoch: int
    producer_ids_end: int


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord:
    TYPE: ClassVar[str] = "FeatureLevelRecord"
    name: str
    feature_level: int


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    """An ACL binding (see ``pylog.security.acl``); ``id`` names it for removal."""

    TYPE: ClassVar[str] = "AccessControlEntryRecord"
    id: uuid.UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    TYPE: ClassVar[str] = "RemoveAccessControlEntryRecord"
    id: uuid.UUID


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord:
    """A user's SCRAM credential for one mechanism (1 SCRAM-SHA-256, 2 SCRAM-SHA-512); replaces any
    earlier one for the same user and mechanism."""

    TYPE: ClassVar[str] = "UserScramCredentialRecord"
    name: str
    mechanism: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    TYPE: ClassVar[str] = "RemoveUserScramCredentialRecord"
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class ClientQuotaRecord:
    """Set (or with ``remove``, delete) one quota ``key`` of a client quota entity: ``(entity type,
    name)`` pairs sorted by type (``user``, ``client-id``, ``ip``), a None name being the default."""

    TYPE: ClassVar[str] = "ClientQuotaRecord"
    entity: tuple[tuple[str, str | None], ...]
    key: str
    value: float = 0.0
    remove: bool = False


class RemoteLogSegmentState(enum.IntEnum):
    """KIP-405's lifecycle of a remote log segment (RemoteLogSegmentState ids)."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentRecord:
    """A remote log segment moved to ``state`` (the remote tier's metadata, keyed by segment id).

    COPY_SEGMENT_STARTED carries the whole description (offsets inclusive, the uploading leader's
    epoch and the leader epochs inside); later states need only the ids."""

    TYPE: ClassVar[str] = "RemoteLogSegmentRecord"
    topic_id: uuid.UUID
    partition_id: int
    segment_id: str
    state: int
    base_offset: int = -1
    end_offset: int = -1
    max_timestamp: int = -1
    size_bytes: int = 0
    leader_epoch: int = -1
    epochs: tuple[tuple[int, int], ...] = ()
    broker_id: int = -1


@dataclass(frozen=True, slots=True)
class RemoteLogStartOffsetRecord:
    """The partition's log start offset as the remote tier knows it moved (DeleteRecords, retention).

    ``version`` is set only in snapshots: the metadata offset of the partition's last remote change
    (the version of its manifest), which a snapshot would otherwise lose."""

    TYPE: ClassVar[str] = "RemoteLogStartOffsetRecord"
    topic_id: uuid.UUID
    partition_id: int
    log_start_offset: int
    version: int = -1


MetadataRecord = (
    RegisterBrokerRecord
    | BrokerRegistrationChangeRecord
    | UnregisterBrokerRecord
    | TopicRecord
    | PartitionRecord
    | PartitionChangeRecord
    | RemoveTopicRecord
    | ConfigRecord
    | ProducerIdsRecord
    | FeatureLevelRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
    | UserScramCredentialRecord
    | RemoveUserScramCredentialRecord
    | ClientQuotaRecord
    | RemoteLogSegmentRecord
    | RemoteLogStartOffsetRecord
)

RECORD_TYPES: dict[str, type[Any]] = {
    cls.TYPE: cls
    for cls in (
        RegisterBrokerRecord,
        BrokerRegistrationChangeRecord,
        UnregisterBrokerRecord,
        TopicRecord,
        PartitionRecord,
        PartitionChangeRecord,
        RemoveTopicRecord,
        ConfigRecord,
        ProducerIdsRecord,
        FeatureLevelRecord,
        AccessControlEntryRecord,
        RemoveAccessControlEntryRecord,
        UserScramCredentialRecord,
        RemoveUserScramCredentialRecord,
        ClientQuotaRecord,
        RemoteLogSegmentRecord,
        RemoteLogStartOffsetRecord,
    )
}


class RecordDecodeError(ValueError):
    """Bytes that are not a valid metadata record batch."""


def _ids(v: Any) -> tuple[int, ...] | None:
    return None if v is None else tuple(int(x) for x in v)


def _endpoints(v: Any) -> tuple[BrokerEndpoint, ...]:
    return tuple(BrokerEndpoint(**e) for e in v)


def _entity(v: Any) -> tuple[tuple[str, str | None], ...]:
    return tuple((str(t), None if n is None else str(n)) for t, n in v)


def _epochs(v: Any) -> tuple[tuple[int, int], ...]:
    return tuple((int(e), int(o)) for e, o in v)


def _b64(v: Any) -> bytes:
    return base64.b64decode(v, validate=True)


# field name -> decoder from its JSON value (fields not listed are JSON scalars)
_DECODERS: dict[str, Callable[[Any], Any]] = {
    "topic_id": uuid.UUID,
    "id": uuid.UUID,
    "salt": _b64,
    "stored_key": _b64,
    "server_key": _b64,
    "incarnation_id": uuid.UUID,
    "replicas": _ids,
    "isr": _ids,
    "adding_replicas": _ids,
    "removing_replicas": _ids,
    "endpoints": _endpoints,
    "entity": _entity,
    "epochs": _epochs,
}


def _encode_value(v: Any) -> Any:
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    if isinstance(v, BrokerEndpoint):
        return {"name": v.name, "host": v.host, "port": v.port, "security_protocol": int(v.security_protocol)}
    if isinstance(v, tuple):
        return [_encode_value(x) for x in v]
    if isinstance(v, enum.IntEnum):
        return int(v)
    return v


def record_to_dict(record: MetadataRecord) -> dict[str, Any]:
    out: dict[str, Any] = {"type": record.TYPE}
    for f in dataclasses.fields(record):
        out[f.name] = _encode_value(getattr(record, f.name))
    return out


def record_from_dict(d: dict[str, Any]) -> MetadataRecord:
    try:
        cls = RECORD_TYPES[d["type"]]
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {}
        for k, v in d.items():
            if k in names:
                dec = _DECODERS.get(k)
                kwargs[k] = dec(v) if dec is not None and v is not None else v
        return cls(**kwargs)
    except (KeyError, TypeError, ValueError) as e:
        raise RecordDecodeError(f"bad metadata record {d!r}: {e}") from e


def encode_records(records: Iterable[MetadataRecord]) -> bytes:
    """One Raft entry's payload: a JSON array of records."""
    return json.dumps([record_to_dict(r) for r in records], separators=(",", ":")).encode()


def decode_records(data: bytes) -> list[MetadataRecord]:
    try:
        items = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RecordDecodeError(f"metadata entry is not JSON: {e}") from e
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise RecordDecodeError("metadata entry is not a JSON array of records")
    return [record_from_dict(i) for i in items]
