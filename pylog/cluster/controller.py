"""``QuorumController``: admin commands validated against the metadata, turned into records.

Theory of operation
-------------------
The controller is sans-IO and runs on the quorum leader. It owns a *working image*:
the committed image plus every record it has generated since. Each command
validates against that working image, generates records and applies them to it at
once, so the next command sees them even before they commit (two CreateTopics for
one name cannot both pass). The caller must hand the records to the quorum in the
order they were generated (``MetadataQuorum.execute`` does exactly that). When the
node loses leadership the shell ``deactivate()``s it, and ``activate(image)``s it
with a copy of the committed image once it leads again and has applied everything
up to its own first entry.

Errors are data, with Kafka's codes: every command returns a ``ControllerResult``
whose ``response`` has one result per requested item, and ``records`` only for the
items that succeeded (none for ``validate_only``). An inactive controller answers
NOT_CONTROLLER for every item.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pylog.cluster.acl_control import (
    AclControl,
    AclCreationResult,
    AclDeletionResult,
    ScramAlterResult,
    ScramDeletion,
    ScramUpsertion,
)
from pylog.cluster.broker_control import (
    BrokerControl,
    BrokerHeartbeatResult,
    BrokerRegistrationResult,
    BrokerSessions,
    UnregisterBrokerResult,
)
from pylog.cluster.config_control import (
    AlterableConfig,
    AlterConfigOp,
    ConfigValidationError,
    incremental_changes,
    replace_configs,
    validate_new_topic_configs,
    validate_resource,
    validate_resource_name,
    validate_topic_set,
)
from pylog.cluster.feature_control import FeatureUpdate, FeatureUpdateResult, update_features
from pylog.cluster.image import MetadataImage
from pylog.cluster.placement import assign_replicas, place_replicas
from pylog.cluster.quota_control import QuotaAlteration, QuotaAlterationResult, QuotaControl
from pylog.cluster.records import (
    BrokerEndpoint,
    ConfigRecord,
    ConfigResourceType,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from pylog.cluster.remote_log_control import RemoteLogControl, RemoteLogProposal, RemoteLogProposalResult
from pylog.cluster.replica_control import (
    ElectionResult,
    IsrChange,
    IsrChangeResult,
    OngoingReassignment,
    ReassignmentRequest,
    ReassignmentResult,
    ReplicaControl,
)
from pylog.config import BrokerConfig
from pylog.model import LONG_MAX
from pylog.protocol.errors import ErrorCode
from pylog.security.acl import AclBinding, AclBindingFilter

__all__ = [
    "AlterConfigOp",
    "AlterConfigsResource",
    "AlterableConfig",
    "BrokerHeartbeatResult",
    "BrokerRegistrationResult",
    "ConfigResult",
    "ControllerResult",
    "CreatePartitionsResult",
    "CreateTopicResult",
    "DeleteTopicResult",
    "IncrementalAlterConfigsResource",
    "NewPartitions",
    "NewTopic",
    "ProducerIdsResult",
    "QuorumController",
    "assign_replicas",
    "validate_topic_name",
]

T = TypeVar("T")
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
METADATA_TOPIC = "__cluster_metadata"


# ---------------------------------------------------------------------- requests and results


@dataclass(frozen=True)
class ControllerResult(Generic[T]):
    records: tuple[MetadataRecord, ...]
    response: T

    def failed(self, code: int, message: str | None = None) -> T:
        """The response with every successful item turned into ``code`` (records did not commit)."""

        def fail(item: Any) -> Any:
            if dataclasses.is_dataclass(item) and getattr(item, "error_code", None) == ErrorCode.NONE:
                return dataclasses.replace(item, error_code=code, error_message=message)  # type: ignore[type-var]
            return item

        if isinstance(self.response, list):
            return [fail(i) for i in self.response]  # type: ignore[return-value]
        return fail(self.response)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = -1  # -1: num.partitions
    replication_factor: int = -1  # -1: default.replication.factor
    assignments: Mapping[int, Sequence[int]] | None = None  # partition -> replicas
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class CreateTopicResult:
    name: str
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DeleteTopicResult:
    name: str | None
    topic_id: uuid.UUID | None
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


@dataclass(frozen=True)
class NewPartitions:
    name: str
    count: int  # the new total
    assignments: Sequence[Sequence[int]] | None = None  # replicas of each new partition


@dataclass(frozen=True)
class CreatePartitionsResult:
    name: str
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


@dataclass(frozen=True)
class AlterConfigsResource:
    resource_type: int
    resource_name: str
    configs: Mapping[str, str | None]


@dataclass(frozen=True)
class IncrementalAlterConfigsResource:
    resource_type: int
    resource_name: str
    ops: Sequence[AlterableConfig]


@dataclass(frozen=True)
class ConfigResult:
    resource_type: int
    resource_name: str
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


@dataclass(frozen=True)
class ProducerIdsResult:
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    first_producer_id: int = -1
    count: int = 0


class _Invalid(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# ---------------------------------------------------------------------- helpers


def validate_topic_name(name: str) -> tuple[int, str | None]:
    """Kafka's topic name rules: [a-zA-Z0-9._-], 1..249 chars, not "." or ".."."""
    if not name:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return ErrorCode.INVALID_TOPIC_EXCEPTION, 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return (
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, "
            f"topic name: {name}",
        )
    if not set(name) <= _LEGAL_CHARS:
        return (
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'",
        )
    return ErrorCode.NONE, None


# ---------------------------------------------------------------------- the controller


class QuorumController:
    def __init__(
        self,
        image: MetadataImage | None = None,
        *,
        rng: random.Random,
        default_num_partitions: int = 1,
        default_replication_factor: int = 1,
        delete_topic_enable: bool = True,
        unclean_leader_election: bool = False,
        session_timeout_ms: int = 9000,
        active: bool = True,
        broker_settings: Callable[[str], str | None] | None = None,
    ) -> None:
        self._image = image if image is not None else MetadataImage()
        # this node's broker settings (bounds of group configs); Kafka's defaults when not given
        self.broker_settings = broker_settings or BrokerConfig().raw
        self._rng = rng
        self.default_num_partitions = default_num_partitions
        self.default_replication_factor = default_replication_factor
        self.delete_topic_enable = delete_topic_enable
        self.unclean_leader_election = unclean_leader_election
        self._active = active
        self._collected: list[MetadataRecord] = []
        self.sessions = BrokerSessions(session_timeout_ms)
        self._brokers = BrokerControl(
            lambda: self._image, self._collect, self.sessions, unclean=self._unclean
        )
        self._replicas = ReplicaControl(lambda: self._image, self._collect)
        self._remote = RemoteLogControl(lambda: self._image, self._collect)
        self._acls = AclControl(lambda: self._image, self._collect, random.Random(rng.getrandbits(64)))
        self._quotas = QuotaControl(lambda: self._image, self._collect)

    @property
    def image(self) -> MetadataImage:
        """The working image: committed records plus those generated since."""
        return self._image

    @property
    def active(self) -> bool:
        return self._active

    def activate(self, image: MetadataImage, now_ms: int = 0) -> None:
        """Lead from ``image`` (a copy of the committed image, owned from now on); every registered,
        unfenced broker gets a fresh session from ``now_ms``."""
        self._image = image
        self._active = True
        self.sessions.reset([b.broker_id for b in image.brokers.values() if not b.fenced], now_ms)

    def deactivate(self) -> None:
        self._active = False

    def _emit(self, out: list[MetadataRecord], records: list[MetadataRecord]) -> None:
        for r in records:
            self._image.apply(r)
        out.extend(records)

    def _collect(self, records: list[MetadataRecord]) -> None:
        for r in records:
            self._image.apply(r)
        self._collected.extend(records)

    def _run(self, command: Callable[[], T]) -> ControllerResult[T]:
        """Run a command whose records go through ``_collect``."""
        self._collected = []
        try:
            response = command()
            return ControllerResult(tuple(self._collected), response)
        finally:
            self._collected = []

    def _unclean(self, topic_id: uuid.UUID) -> bool:
        topic = self._image.topic(topic_id)
        value = self._image.topic_configs(topic.name).get("unclean.leader.election.enable") if topic else None
        return self.unclean_leader_election if value is None else value.strip().lower() == "true"

    def _new_topic_id(self) -> uuid.UUID:
        while True:
            tid = uuid.UUID(int=self._rng.getrandbits(128), version=4)
            if tid not in self._image.topics_by_id:
                return tid

    # ------------------------------------------------------------------ topics

    def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> ControllerResult[list[CreateTopicResult]]:
        if not self._active:
            return self._not_controller([CreateTopicResult(t.name) for t in topics])
        counts = Counter(t.name for t in topics)
        records: list[MetadataRecord] = []
        results = []
        for t in topics:
            if counts[t.name] > 1:
                results.append(
                    CreateTopicResult(t.name, ErrorCode.INVALID_REQUEST, f"Duplicate topic name {t.name}")
                )
                continue
            try:
                new, result = self._create_topic(t)
            except _Invalid as e:
                results.append(CreateTopicResult(t.name, e.code, e.message))
                continue
            except ConfigValidationError as e:
                results.append(CreateTopicResult(t.name, e.code, e.message))
                continue
            if not validate_only:
                self._emit(records, new)
            results.append(result)
        return ControllerResult(tuple(records), results)

    def _create_topic(self, t: NewTopic) -> tuple[list[MetadataRecord], CreateTopicResult]:
        code, message = validate_topic_name(t.name)
        if code:
            raise _Invalid(code, message or "")
        if t.name == METADATA_TOPIC:
            raise _Invalid(ErrorCode.INVALID_REQUEST, f"Creation of internal topic {t.name} is prohibited.")
        if self._image.topic(t.name) is not None:
            raise _Invalid(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
        normalized = t.name.replace(".", "_")
        for other in self._image.topics:
            if other.replace(".", "_") == normalized:
                raise _Invalid(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"Topic '{t.name}' collides with existing topic: {other}",
                )
        live = self._image.live_brokers()
        if t.assignments is not None:
            if t.num_partitions != -1 or t.replication_factor != -1:
                raise _Invalid(
                    ErrorCode.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            placement = self._manual_assignments(t.assignments, live)
        else:
            partitions = self.default_num_partitions if t.num_partitions == -1 else t.num_partitions
            rf = self.default_replication_factor if t.replication_factor == -1 else t.replication_factor
            if partitions <= 0:
                raise _Invalid(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
            if rf <= 0:
                raise _Invalid(
                    ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
                )
            placement = self._place(partitions, rf, live)
        validate_new_topic_configs(t.configs)
        validate_topic_set({k: v for k, v in t.configs.items() if v is not None}, self.broker_settings)
        tid = self._new_topic_id()
        configs = {k: v for k, v in t.configs.items() if v is not None}
        records: list[MetadataRecord] = [TopicRecord(t.name, tid)]
        records += [ConfigRecord(ConfigResourceType.TOPIC, t.name, k, v) for k, v in configs.items()]
        records += [PartitionRecord(tid, p, r, r, r[0], 0, 0) for p, r in enumerate(placement)]
        result = CreateTopicResult(
            t.name,
            topic_id=tid,
            num_partitions=len(placement),
            replication_factor=len(placement[0]),
            configs=configs,
        )
        return records, result

    def _place(self, partitions: int, rf: int, live: list[int], first: int = 0) -> list[tuple[int, ...]]:
        if rf > len(live):
            raise _Invalid(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} "
                f"cannot be reached because only {len(live)} broker(s) are registered.",
            )
        start, shift = self._rng.randrange(len(live)), self._rng.randrange(len(live))
        racks = {b: self._image.brokers[b].rack for b in live}
        return place_replicas(racks, partitions, rf, start, shift, first)

    def _manual_assignments(
        self, assignments: Mapping[int, Sequence[int]], live: list[int]
    ) -> list[tuple[int, ...]]:
        if not assignments:
            raise _Invalid(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "No replica assignments given.")
        if sorted(assignments) != list(range(len(assignments))):
            raise _Invalid(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "Partitions should be a consecutive 0-based integer sequence.",
            )
        out = [tuple(assignments[p]) for p in range(len(assignments))]
        self._check_replica_lists(out, live, len(out[0]))
        return out

    @staticmethod
    def _check_replica_lists(lists: Sequence[tuple[int, ...]], live: list[int], rf: int) -> None:
        known = set(live)
        for replicas in lists:
            if not replicas:
                raise _Invalid(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Replica list must not be empty.")
            if len(set(replicas)) != len(replicas):
                raise _Invalid(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Duplicate brokers in {list(replicas)}."
                )
            if len(replicas) != rf:
                raise _Invalid(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    "All partitions should have the same number of replicas.",
                )
            missing = [b for b in replicas if b not in known]
            if missing:
                raise _Invalid(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The brokers {missing} are not registered or are fenced.",
                )

    def delete_topics(
        self, names: Sequence[str] = (), topic_ids: Sequence[uuid.UUID] = ()
    ) -> ControllerResult[list[DeleteTopicResult]]:
        items = [(n, None) for n in names] + [(None, i) for i in topic_ids]
        if not self._active:
            return self._not_controller([DeleteTopicResult(n, i) for n, i in items])
        counts = Counter(items)
        records: list[MetadataRecord] = []
        results = []
        for name, tid in items:
            topic = self._image.topic(name if name is not None else tid)  # type: ignore[arg-type]
            if counts[(name, tid)] > 1:
                results.append(
                    DeleteTopicResult(name, tid, ErrorCode.INVALID_REQUEST, "Duplicate topic in request")
                )
            elif not self.delete_topic_enable:
                results.append(
                    DeleteTopicResult(
                        name, tid, ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled."
                    )
                )
            elif topic is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tid is None else ErrorCode.UNKNOWN_TOPIC_ID
                msg = (
                    "This server does not host this topic-partition." if tid is None else "Unknown topic id."
                )
                results.append(DeleteTopicResult(name, tid, code, msg))
            else:
                self._emit(records, [RemoveTopicRecord(topic.topic_id)])
                results.append(DeleteTopicResult(topic.name, topic.topic_id))
        return ControllerResult(tuple(records), results)

    def create_partitions(
        self, topics: Sequence[NewPartitions], *, validate_only: bool = False
    ) -> ControllerResult[list[CreatePartitionsResult]]:
        if not self._active:
            return self._not_controller([CreatePartitionsResult(t.name) for t in topics])
        counts = Counter(t.name for t in topics)
        records: list[MetadataRecord] = []
        results = []
        for t in topics:
            try:
                if counts[t.name] > 1:
                    raise _Invalid(ErrorCode.INVALID_REQUEST, f"Duplicate topic name {t.name}")
                new = self._create_partitions(t)
            except _Invalid as e:
                results.append(CreatePartitionsResult(t.name, e.code, e.message))
                continue
            if not validate_only:
                self._emit(records, new)
            results.append(CreatePartitionsResult(t.name))
        return ControllerResult(tuple(records), results)

    def _create_partitions(self, t: NewPartitions) -> list[MetadataRecord]:
        topic = self._image.topic(t.name)
        if topic is None:
            raise _Invalid(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{t.name}' does not exist.")
        existing = self._image.partitions(topic.topic_id)
        current = len(existing)
        if t.count < current:
            raise _Invalid(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {current} partitions, which is higher than the requested {t.count}.",
            )
        if t.count == current:
            raise _Invalid(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        rf = len(existing[0].replicas) if 0 in existing else 1
        live = self._image.live_brokers()
        added = t.count - current
        if t.assignments is not None:
            if len(t.assignments) != added:
                raise _Invalid(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Attempted to add {added} additional partition(s), but only "
                    f"{len(t.assignments)} assignment(s) were specified.",
                )
            placement = [tuple(a) for a in t.assignments]
            self._check_replica_lists(placement, live, rf)
        else:
            placement = self._place(added, rf, live, first=current)
        return [
            PartitionRecord(topic.topic_id, current + i, r, r, r[0], 0, 0) for i, r in enumerate(placement)
        ]

    # ------------------------------------------------------------------ configs

    def alter_configs(
        self, resources: Sequence[AlterConfigsResource], *, validate_only: bool = False
    ) -> ControllerResult[list[ConfigResult]]:
        """AlterConfigs: each resource's overrides become exactly ``configs``."""
        return self._alter(
            [(r.resource_type, r.resource_name, r) for r in resources],
            lambda rt, cur, r: replace_configs(rt, cur, r.configs),
            validate_only,
        )

    def incremental_alter_configs(
        self, resources: Sequence[IncrementalAlterConfigsResource], *, validate_only: bool = False
    ) -> ControllerResult[list[ConfigResult]]:
        return self._alter(
            [(r.resource_type, r.resource_name, r) for r in resources],
            lambda rt, cur, r: incremental_changes(rt, cur, r.ops),
            validate_only,
        )

    def _alter(self, items: list[tuple[int, str, Any]], changes_of: Any, validate_only: bool) -> Any:
        if not self._active:
            return self._not_controller([ConfigResult(rt, name) for rt, name, _ in items])
        counts = Counter((rt, name) for rt, name, _ in items)
        records: list[MetadataRecord] = []
        results = []
        for rt, name, req in items:
            try:
                if counts[(rt, name)] > 1:
                    raise _Invalid(ErrorCode.INVALID_REQUEST, f"Duplicate resource {name!r} in request")
                validate_resource_name(rt, name)
                if rt == ConfigResourceType.TOPIC and self._image.topic(name) is None:
                    raise _Invalid(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
                current = self._image.configs(rt, name)
                changes = changes_of(rt, current, req)
                merged = {k: v for k, v in {**current, **changes}.items() if v is not None}
                validate_resource(rt, name, merged, self.broker_settings)
                if rt == ConfigResourceType.TOPIC:
                    validate_topic_set(merged, self.broker_settings, current)
            except (_Invalid, ConfigValidationError) as e:
                results.append(ConfigResult(rt, name, e.code, e.message))
                continue
            if not validate_only:
                self._emit(records, [ConfigRecord(int(rt), name, k, v) for k, v in changes.items()])
            results.append(ConfigResult(rt, name))
        return ControllerResult(tuple(records), results)

    # ------------------------------------------------------------------ brokers and producer ids

    def register_broker(
        self,
        broker_id: int,
        incarnation_id: uuid.UUID,
        endpoints: Sequence[BrokerEndpoint],
        rack: str | None = None,
        *,
        now_ms: int = 0,
        log_end_offset: int = 0,
    ) -> ControllerResult[BrokerRegistrationResult]:
        """Register (or re-register) a broker, fenced until it has caught up; a new broker epoch."""
        if not self._active:
            return self._not_controller(BrokerRegistrationResult(broker_id))
        return self._run(
            lambda: self._brokers.register(
                broker_id, incarnation_id, endpoints, rack, now_ms=now_ms, log_end_offset=log_end_offset
            )
        )

    def broker_heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        metadata_offset: int,
        *,
        want_fence: bool,
        want_shutdown: bool,
        now_ms: int,
    ) -> ControllerResult[BrokerHeartbeatResult]:
        if not self._active:
            return self._not_controller(BrokerHeartbeatResult(broker_id))
        return self._run(
            lambda: self._brokers.heartbeat(
                broker_id,
                broker_epoch,
                metadata_offset,
                want_fence=want_fence,
                want_shutdown=want_shutdown,
                now_ms=now_ms,
            )
        )

    def fence_expired_brokers(self, now_ms: int) -> ControllerResult[list[int]]:
        """Fence brokers whose session expired (the shell calls this on a timer)."""
        if not self._active:
            return ControllerResult((), [])
        return self._run(lambda: self._brokers.fence_expired(now_ms))

    def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[IsrChange]
    ) -> ControllerResult[tuple[int, list[IsrChangeResult]]]:
        if not self._active:
            return ControllerResult((), (ErrorCode.NOT_CONTROLLER, []))
        return self._run(lambda: self._replicas.alter_partition(broker_id, broker_epoch, changes))

    def remote_log_segments(
        self, broker_id: int, broker_epoch: int, proposals: Sequence[RemoteLogProposal]
    ) -> ControllerResult[tuple[int, list[RemoteLogProposalResult]]]:
        """A partition leader's remote log segment transitions (see ``remote_log_control``)."""
        if not self._active:
            return ControllerResult((), (ErrorCode.NOT_CONTROLLER, []))
        return self._run(lambda: self._remote.propose(broker_id, broker_epoch, proposals))

    def elect_leaders(
        self, election_type: int, partitions: Sequence[tuple[str, int]] | None
    ) -> ControllerResult[list[ElectionResult]]:
        if not self._active:
            names = partitions or []
            return self._not_controller([ElectionResult(t, p) for t, p in names])
        return self._run(lambda: self._replicas.elect_leaders(election_type, partitions))

    def alter_partition_reassignments(
        self, requests: Sequence[ReassignmentRequest], *, allow_replication_factor_change: bool = True
    ) -> ControllerResult[list[ReassignmentResult]]:
        if not self._active:
            return self._not_controller([ReassignmentResult(r.topic, r.partition) for r in requests])
        return self._run(
            lambda: self._replicas.alter_reassignments(requests, allow_replication_factor_change)
        )

    def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None
    ) -> ControllerResult[tuple[int, list[OngoingReassignment]]]:
        """(top-level error, the reassignments in flight); read-only."""
        if not self._active:
            return ControllerResult((), (ErrorCode.NOT_CONTROLLER, []))
        return ControllerResult((), (ErrorCode.NONE, self._replicas.list_reassignments(partitions)))

    def unregister_broker(self, broker_id: int) -> ControllerResult[UnregisterBrokerResult]:
        if not self._active:
            return self._not_controller(UnregisterBrokerResult())
        return self._run(lambda: self._brokers.unregister(broker_id))

    def rebalance_leaders(self) -> ControllerResult[int]:
        """auto.leader.rebalance.enable: move leadership back to preferred replicas."""
        if not self._active:
            return ControllerResult((), 0)
        return self._run(self._replicas.rebalance)

    def allocate_producer_ids(
        self, broker_id: int, broker_epoch: int = -1, count: int = 1000
    ) -> ControllerResult[ProducerIdsResult]:
        """Hand out the next block of ``count`` producer ids (Kafka's blocks are 1000 ids).

        A ``broker_epoch`` of -1 skips the epoch check (the broker of a single-node install).
        """
        if not self._active:
            return self._not_controller(ProducerIdsResult())
        if broker_epoch != -1:
            b = self._image.brokers.get(broker_id)
            if b is None or b.broker_epoch != broker_epoch:
                return ControllerResult(
                    (), ProducerIdsResult(ErrorCode.STALE_BROKER_EPOCH, f"Stale broker epoch {broker_epoch}")
                )
        if count <= 0:
            return ControllerResult(
                (), ProducerIdsResult(ErrorCode.INVALID_REQUEST, "Count must be positive")
            )
        first = self._image.next_producer_id
        if first + count > LONG_MAX:
            return ControllerResult(
                (), ProducerIdsResult(ErrorCode.UNKNOWN_SERVER_ERROR, "Exhausted all producerIds")
            )
        records: list[MetadataRecord] = []
        self._emit(records, [ProducerIdsRecord(broker_id, broker_epoch, first + count)])
        return ControllerResult(tuple(records), ProducerIdsResult(first_producer_id=first, count=count))

    # ------------------------------------------------------------------ feature versions

    def update_features(
        self, updates: Sequence[FeatureUpdate], *, node_id: int, validate_only: bool = False
    ) -> ControllerResult[FeatureUpdateResult]:
        """UpdateFeatures (rules in ``pylog.cluster.feature_control``): all or nothing."""
        if not self._active:
            return self._not_controller(FeatureUpdateResult())
        records, result = update_features(self._image, updates, node_id)
        out: list[MetadataRecord] = []
        if not validate_only:
            self._emit(out, records)
        return ControllerResult(tuple(out), result)

    # ------------------------------------------------------------------ ACLs and SCRAM credentials

    def create_acls(self, bindings: Sequence[AclBinding]) -> ControllerResult[list[AclCreationResult]]:
        if not self._active:
            return self._not_controller([AclCreationResult() for _ in bindings])
        return self._run(lambda: self._acls.create_acls(bindings))

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> ControllerResult[list[AclDeletionResult]]:
        if not self._active:
            return self._not_controller([AclDeletionResult() for _ in filters])
        return self._run(lambda: self._acls.delete_acls(filters))

    def alter_user_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> ControllerResult[list[ScramAlterResult]]:
        if not self._active:
            users = list(dict.fromkeys(i.name for i in [*deletions, *upsertions]))
            return self._not_controller([ScramAlterResult(u) for u in users])
        return self._run(lambda: self._acls.alter_scram(deletions, upsertions))

    # ------------------------------------------------------------------ client quotas

    def alter_client_quotas(
        self, alterations: Sequence[QuotaAlteration], *, validate_only: bool = False
    ) -> ControllerResult[list[QuotaAlterationResult]]:
        """AlterClientQuotas (rules in ``pylog.cluster.quota_control``)."""
        if not self._active:
            return self._not_controller([QuotaAlterationResult(a.entity) for a in alterations])
        return self._run(lambda: self._quotas.alter(alterations, validate_only))

    def _not_controller(self, response: T) -> ControllerResult[T]:
        base: ControllerResult[T] = ControllerResult((), response)
        return ControllerResult(
            (), base.failed(ErrorCode.NOT_CONTROLLER, "This node is not the active controller.")
        )
