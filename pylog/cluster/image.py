"""``MetadataImage``: the cluster metadata as of some offset, built by applying records.

Values handed out (``TopicImage``, ``PartitionImage``, ``BrokerRegistration``) are
frozen, and mappings are read-only views, so readers can keep them; the image itself
changes only through ``apply`` (called by whoever owns it: the quorum shell for the
committed image, the controller for its working copy). ``copy()`` gives an
independent image. Sans-IO.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from pylog.cluster.records import (
    LEADER_NO_CHANGE,
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoteLogSegmentRecord,
    RemoteLogStartOffsetRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from pylog.cluster.remote_log_image import RemoteLogImage, RemoteSegmentEntry, RemoteTransitionError
from pylog.security.acl import AclBinding
from pylog.security.scram import ScramCredential, ScramMechanismType
from pylog.storage.remote_layout import RemoteLogSegment


class MetadataApplyError(ValueError):
    """A record that does not fit the image (a controller bug or a corrupt log)."""


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class PartitionImage:
    topic_id: uuid.UUID
    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        """A reassignment is in flight (replicas being added or removed)."""
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas once any reassignment in flight completes."""
        if not self.removing_replicas:
            return self.replicas
        return tuple(r for r in self.replicas if r not in self.removing_replicas)


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool = False

    @property
    def usable(self) -> bool:
        """May lead and host new replicas: unfenced and not shutting down."""
        return not self.fenced and not self.in_controlled_shutdown


ConfigKey = tuple[int, str]  # (ConfigResourceType, resource name)
QuotaEntity = tuple[tuple[str, "str | None"], ...]  # (entity type, name or None: default), by type


class MetadataImage:
    def __init__(self) -> None:
        self.offset = 0  # offset of the last applied entry (0: nothing applied)
        self.next_producer_id = 0
        self.last_broker_epoch = 0  # highest broker epoch ever handed out
        self._topics: dict[str, TopicImage] = {}
        self._topics_by_id: dict[uuid.UUID, TopicImage] = {}
        self._partitions: dict[uuid.UUID, dict[int, PartitionImage]] = {}
        self._configs: dict[ConfigKey, dict[str, str]] = {}
        self._brokers: dict[int, BrokerRegistration] = {}
        self._features: dict[str, int] = {}
        self._acls: dict[uuid.UUID, AclBinding] = {}
        self._scram: dict[tuple[str, int], ScramCredential] = {}
        self.acl_generation = 0  # bumped by every ACL change (authorizers rebuild their index)
        self._client_quotas: dict[QuotaEntity, dict[str, float]] = {}
        self.client_quota_generation = 0  # bumped by every quota change (enforcers re-read them)
        self.remote = RemoteLogImage()  # the remote tier's segments (KIP-405 states) per partition

    # ------------------------------------------------------------------ apply

    def apply_batch(self, records: Iterable[MetadataRecord], offset: int) -> None:
        for r in records:
            self.apply(r)
        self.remote.stamp(offset)
        self.offset = max(self.offset, offset)

    def apply(self, record: MetadataRecord) -> None:
        handler = getattr(self, "_apply_" + type(record).__name__, None)
        if handler is None:
            raise MetadataApplyError(f"unknown metadata record {record!r}")
        handler(record)

    def _apply_TopicRecord(self, r: TopicRecord) -> None:
        if r.name in self._topics or r.topic_id in self._topics_by_id:
            raise MetadataApplyError(f"topic {r.name} / {r.topic_id} already exists")
        t = TopicImage(r.name, r.topic_id)
        self._topics[r.name] = t
        self._topics_by_id[r.topic_id] = t
        self._partitions[r.topic_id] = {}

    def _apply_PartitionRecord(self, r: PartitionRecord) -> None:
        parts = self._topic_partitions(r.topic_id)
        parts[r.partition_id] = PartitionImage(
            r.topic_id,
            r.partition_id,
            r.replicas,
            r.isr,
            r.leader,
            r.leader_epoch,
            r.partition_epoch,
            r.adding_replicas,
            r.removing_replicas,
        )

    def _apply_PartitionChangeRecord(self, r: PartitionChangeRecord) -> None:
        parts = self._topic_partitions(r.topic_id)
        p = parts.get(r.partition_id)
        if p is None:
            raise MetadataApplyError(f"no partition {r.partition_id} in topic {r.topic_id}")
        changes: dict[str, Any] = {"partition_epoch": p.partition_epoch + 1}
        if r.isr is not None:
            changes["isr"] = r.isr
        if r.replicas is not None:
            changes["replicas"] = r.replicas
        if r.adding_replicas is not None:
            changes["adding_replicas"] = r.adding_replicas
        if r.removing_replicas is not None:
            changes["removing_replicas"] = r.removing_replicas
        if r.leader != LEADER_NO_CHANGE and r.leader != p.leader:
            changes["leader"] = r.leader
            changes["leader_epoch"] = p.leader_epoch + 1
        parts[r.partition_id] = replace(p, **changes)

    def _apply_RemoveTopicRecord(self, r: RemoveTopicRecord) -> None:
        t = self._topics_by_id.pop(r.topic_id, None)
        if t is None:
            raise MetadataApplyError(f"no topic with id {r.topic_id}")
        del self._topics[t.name]
        del self._partitions[r.topic_id]
        self.remote.remove_topic(r.topic_id)
        self._configs.pop((ConfigResourceType.TOPIC, t.name), None)

    def _apply_RemoteLogSegmentRecord(self, r: RemoteLogSegmentRecord) -> None:
        if self.partition(r.topic_id, r.partition_id) is None:
            raise MetadataApplyError(f"no partition {r.partition_id} in topic {r.topic_id}")
        try:
            self.remote.apply_segment(r)
        except RemoteTransitionError as e:
            raise MetadataApplyError(str(e)) from None

    def _apply_RemoteLogStartOffsetRecord(self, r: RemoteLogStartOffsetRecord) -> None:
        if self.partition(r.topic_id, r.partition_id) is None:
            raise MetadataApplyError(f"no partition {r.partition_id} in topic {r.topic_id}")
        self.remote.apply_start(r)

    def _apply_ConfigRecord(self, r: ConfigRecord) -> None:
        key = (int(r.resource_type), r.resource_name)
        if r.value is None:
            cfg = self._configs.get(key)
            if cfg is not None:
                cfg.pop(r.name, None)
                if not cfg:
                    del self._configs[key]
        else:
            self._configs.setdefault(key, {})[r.name] = r.value

    def _apply_RegisterBrokerRecord(self, r: RegisterBrokerRecord) -> None:
        self._brokers[r.broker_id] = BrokerRegistration(
            r.broker_id,
            r.incarnation_id,
            r.broker_epoch,
            r.endpoints,
            r.rack,
            r.fenced,
            r.in_controlled_shutdown,
        )
        self.last_broker_epoch = max(self.last_broker_epoch, r.broker_epoch)

    def _apply_BrokerRegistrationChangeRecord(self, r: BrokerRegistrationChangeRecord) -> None:
        b = self._brokers.get(r.broker_id)
        if b is None or b.broker_epoch != r.broker_epoch:
            raise MetadataApplyError(f"no broker {r.broker_id} with epoch {r.broker_epoch}")
        changes: dict[str, Any] = {}
        if r.fenced is not None:
            changes["fenced"] = r.fenced
        if r.in_controlled_shutdown is not None:
            changes["in_controlled_shutdown"] = r.in_controlled_shutdown
        self._brokers[r.broker_id] = replace(b, **changes)

    def _apply_UnregisterBrokerRecord(self, r: UnregisterBrokerRecord) -> None:
        b = self._brokers.get(r.broker_id)
        if b is not None and b.broker_epoch == r.broker_epoch:
            del self._brokers[r.broker_id]

    def _apply_ProducerIdsRecord(self, r: ProducerIdsRecord) -> None:
        if r.producer_ids_end <= self.next_producer_id:
            raise MetadataApplyError(f"producer ids end {r.producer_ids_end} <= {self.next_producer_id}")
        self.next_producer_id = r.producer_ids_end

    def _apply_FeatureLevelRecord(self, r: FeatureLevelRecord) -> None:
        if r.feature_level == 0 and r.name != "metadata.version":  # level 0: no longer finalized
            self._features.pop(r.name, None)
        else:
            self._features[r.name] = r.feature_level

    def _apply_AccessControlEntryRecord(self, r: AccessControlEntryRecord) -> None:
        self._acls[r.id] = AclBinding(
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            r.principal,
            r.host,
            r.operation,
            r.permission_type,
        )
        self.acl_generation += 1

    def _apply_RemoveAccessControlEntryRecord(self, r: RemoveAccessControlEntryRecord) -> None:
        if self._acls.pop(r.id, None) is None:
            raise MetadataApplyError(f"no ACL with id {r.id}")
        self.acl_generation += 1

    def _apply_UserScramCredentialRecord(self, r: UserScramCredentialRecord) -> None:
        mechanism = ScramMechanismType(r.mechanism)
        self._scram[(r.name, r.mechanism)] = ScramCredential(
            mechanism, r.salt, r.stored_key, r.server_key, r.iterations
        )

    def _apply_RemoveUserScramCredentialRecord(self, r: RemoveUserScramCredentialRecord) -> None:
        if self._scram.pop((r.name, r.mechanism), None) is None:
            raise MetadataApplyError(f"no SCRAM credential for {r.name} / mechanism {r.mechanism}")

    def _apply_ClientQuotaRecord(self, r: ClientQuotaRecord) -> None:
        entity = tuple(sorted(r.entity, key=lambda p: p[0]))
        if r.remove:
            values = self._client_quotas.get(entity)
            if values is not None:
                values.pop(r.key, None)
                if not values:
                    del self._client_quotas[entity]
        else:
            self._client_quotas.setdefault(entity, {})[r.key] = float(r.value)
        self.client_quota_generation += 1

    def _topic_partitions(self, topic_id: uuid.UUID) -> dict[int, PartitionImage]:
        parts = self._partitions.get(topic_id)
        if parts is None:
            raise MetadataApplyError(f"no topic with id {topic_id}")
        return parts

    # ------------------------------------------------------------------ queries

    @property
    def topics(self) -> Mapping[str, TopicImage]:
        return MappingProxyType(self._topics)

    @property
    def topics_by_id(self) -> Mapping[uuid.UUID, TopicImage]:
        return MappingProxyType(self._topics_by_id)

    def topic(self, name_or_id: str | uuid.UUID) -> TopicImage | None:
        if isinstance(name_or_id, uuid.UUID):
            return self._topics_by_id.get(name_or_id)
        return self._topics.get(name_or_id)

    def partitions(self, topic: str | uuid.UUID) -> Mapping[int, PartitionImage]:
        """The partitions of a topic by id (empty if the topic does not exist)."""
        t = self.topic(topic)
        if t is None:
            return MappingProxyType({})
        return MappingProxyType(self._partitions[t.topic_id])

    def partition(self, topic: str | uuid.UUID, partition: int) -> PartitionImage | None:
        return self.partitions(topic).get(partition)

    def configs(self, resource_type: int, resource_name: str) -> Mapping[str, str]:
        """Overrides set on a resource (defaults are not included)."""
        return MappingProxyType(self._configs.get((int(resource_type), resource_name), {}))

    def topic_configs(self, name: str) -> Mapping[str, str]:
        return self.configs(ConfigResourceType.TOPIC, name)

    def broker_configs(self, broker_id: int | None = None) -> Mapping[str, str]:
        """A broker's overrides, or the cluster-wide defaults when ``broker_id`` is None."""
        return self.configs(ConfigResourceType.BROKER, "" if broker_id is None else str(broker_id))

    @property
    def brokers(self) -> Mapping[int, BrokerRegistration]:
        return MappingProxyType(self._brokers)

    def live_brokers(self) -> list[int]:
        """Broker ids that may lead and host new replicas (unfenced, not shutting down), sorted."""
        return sorted(b.broker_id for b in self._brokers.values() if b.usable)

    @property
    def features(self) -> Mapping[str, int]:
        return MappingProxyType(self._features)

    @property
    def acls(self) -> Mapping[uuid.UUID, AclBinding]:
        return MappingProxyType(self._acls)

    @property
    def scram_credentials(self) -> Mapping[tuple[str, int], ScramCredential]:
        """By (user name, ScramMechanismType)."""
        return MappingProxyType(self._scram)

    def scram_credential(self, name: str, mechanism: int) -> ScramCredential | None:
        return self._scram.get((name, int(mechanism)))

    @property
    def client_quotas(self) -> Mapping[QuotaEntity, Mapping[str, float]]:
        """Quota values by entity (see ``pylog.quotas.entity``)."""
        return MappingProxyType(self._client_quotas)

    # -- the remote tier (storage.remote_layout.RemoteLogMetadata over the image) ----------------

    def remote_segments(
        self, topic: str, topic_id: uuid.UUID, partition: int
    ) -> tuple[RemoteLogSegment, ...]:
        """Committed remote segments (COPY_SEGMENT_FINISHED, not being deleted), by base offset."""
        return self.remote.committed(topic_id, partition)

    def remote_log_start_offset(self, topic: str, topic_id: uuid.UUID, partition: int) -> int | None:
        return self.remote.log_start_offset(topic_id, partition)

    def remote_segment_entries(self, topic_id: uuid.UUID, partition: int) -> list[RemoteSegmentEntry]:
        """Every remote segment of a partition in any state (the remote log manager's view)."""
        return self.remote.entries(topic_id, partition)

    def config_resources(self, resource_type: int) -> list[str]:
        """Names of the resources of a type that have overrides, sorted."""
        return sorted(name for t, name in self._configs if t == int(resource_type))

    # ------------------------------------------------------------------ whole image

    def copy(self) -> MetadataImage:
        other = MetadataImage()
        other.offset = self.offset
        other.next_producer_id = self.next_producer_id
        other.last_broker_epoch = self.last_broker_epoch
        other._topics = dict(self._topics)
        other._topics_by_id = dict(self._topics_by_id)
        other._partitions = {k: dict(v) for k, v in self._partitions.items()}
        other._configs = {k: dict(v) for k, v in self._configs.items()}
        other._brokers = dict(self._brokers)
        other._features = dict(self._features)
        other._acls = dict(self._acls)
        other._scram = dict(self._scram)
        other.acl_generation = self.acl_generation
        other._client_quotas = {k: dict(v) for k, v in self._client_quotas.items()}
        other.client_quota_generation = self.client_quota_generation
        other.remote = self.remote.copy()
        return other

    def to_records(self) -> list[MetadataRecord]:
        """Records that rebuild this image when applied to an empty one (a snapshot's content);
        ``offset``, ``next_producer_id`` and ``last_broker_epoch`` travel beside them."""
        out: list[MetadataRecord] = []
        for b in sorted(self._brokers.values(), key=lambda b: b.broker_id):
            out.append(
                RegisterBrokerRecord(
                    b.broker_id,
                    b.incarnation_id,
                    b.broker_epoch,
                    b.endpoints,
                    b.rack,
                    b.fenced,
                    b.in_controlled_shutdown,
                )
            )
        for name, level in sorted(self._features.items()):
            out.append(FeatureLevelRecord(name, level))
        for t in sorted(self._topics.values(), key=lambda t: t.name):
            out.append(TopicRecord(t.name, t.topic_id))
            for p in (self._partitions[t.topic_id][i] for i in sorted(self._partitions[t.topic_id])):
                out.append(
                    PartitionRecord(
                        p.topic_id,
                        p.partition_id,
                        p.replicas,
                        p.isr,
                        p.leader,
                        p.leader_epoch,
                        p.partition_epoch,
                        p.adding_replicas,
                        p.removing_replicas,
                    )
                )
            out.extend(self.remote.to_records(t.topic_id))
        for (rtype, rname), cfg in sorted(self._configs.items()):
            for k, v in sorted(cfg.items()):
                out.append(ConfigRecord(rtype, rname, k, v))
        for acl_id, a in sorted(self._acls.items(), key=lambda kv: str(kv[0])):
            out.append(
                AccessControlEntryRecord(
                    acl_id,
                    a.resource_type,
                    a.resource_name,
                    a.pattern_type,
                    a.principal,
                    a.host,
                    a.operation,
                    a.permission_type,
                )
            )
        for (name, mechanism), c in sorted(self._scram.items()):
            out.append(
                UserScramCredentialRecord(name, mechanism, c.salt, c.stored_key, c.server_key, c.iterations)
            )
        for entity, values in sorted(self._client_quotas.items(), key=lambda kv: _entity_order(kv[0])):
            for key, value in sorted(values.items()):
                out.append(ClientQuotaRecord(entity, key, value))
        return out

    @classmethod
    def from_records(
        cls, records: Iterable[MetadataRecord], *, offset: int, next_producer_id: int, last_broker_epoch: int
    ) -> MetadataImage:
        image = cls()
        for r in records:
            image.apply(r)
        image.remote.stamp(offset)
        image.offset = offset
        image.next_producer_id = next_producer_id
        image.last_broker_epoch = max(image.last_broker_epoch, last_broker_epoch)
        return image

    def to_dict(self) -> dict[str, Any]:
        """A plain, comparable description (for tests, debugging and dumps)."""
        return {
            "offset": self.offset,
            "next_producer_id": self.next_producer_id,
            "last_broker_epoch": self.last_broker_epoch,
            "topics": {n: str(t.topic_id) for n, t in sorted(self._topics.items())},
            "partitions": {
                str(tid): {i: p for i, p in sorted(parts.items())}
                for tid, parts in sorted(self._partitions.items(), key=lambda kv: str(kv[0]))
            },
            "configs": {f"{k[0]}:{k[1]}": dict(sorted(v.items())) for k, v in sorted(self._configs.items())},
            "brokers": dict(sorted(self._brokers.items())),
            "features": dict(sorted(self._features.items())),
            "acls": {str(k): v for k, v in sorted(self._acls.items(), key=lambda kv: str(kv[0]))},
            "scram": {f"{n}:{m}": c for (n, m), c in sorted(self._scram.items())},
            "remote": self.remote.to_dict(),
            "client_quotas": {
                ",".join(f"{t}={'<default>' if n is None else n}" for t, n in e): dict(sorted(v.items()))
                for e, v in sorted(self._client_quotas.items(), key=lambda kv: _entity_order(kv[0]))
            },
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MetadataImage) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]


def _entity_order(entity: QuotaEntity) -> tuple[tuple[str, bool, str], ...]:
    """Sorts entities with default (None) names, which do not compare with strings."""
    return tuple((t, n is not None, n or "") for t, n in entity)
