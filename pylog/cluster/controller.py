"""``QuorumController``: admin commands validated against the metadata, turned into records.

It is the one entry point of the quorum shell; each request family's rules live in their own
module, handed the working image and ``_collect``: topics (``topic_control``), configs
(``config_control``), brokers (``broker_control``), partitions (``replica_control``), the remote
tier (``remote_log_control``), producer ids (``producer_id_control``), features
(``feature_control``), ACLs and SCRAM credentials (``acl_control``), client quotas
(``quota_control``). What stays here is the working image, activation, and NOT_CONTROLLER.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
    AlterConfigsResource,
    ConfigControl,
    ConfigResult,
    IncrementalAlterConfigsResource,
)
from pylog.cluster.feature_control import FeatureUpdate, FeatureUpdateResult, update_features
from pylog.cluster.image import MetadataImage
from pylog.cluster.placement import assign_replicas
from pylog.cluster.producer_id_control import ProducerIdControl, ProducerIdsResult
from pylog.cluster.quota_control import QuotaAlteration, QuotaAlterationResult, QuotaControl
from pylog.cluster.records import BrokerEndpoint, MetadataRecord
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
from pylog.cluster.topic_control import (
    METADATA_TOPIC,
    CreatePartitionsResult,
    CreateTopicResult,
    DeleteTopicResult,
    NewPartitions,
    NewTopic,
    TopicControl,
    validate_topic_name,
)
from pylog.config import BrokerConfig
from pylog.protocol.errors import ErrorCode
from pylog.security.acl import AclBinding, AclBindingFilter

__all__ = [
    "METADATA_TOPIC",
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
        return fail(self.response)


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
        self._topics = TopicControl(
            lambda: self._image,
            self._collect,
            rng,
            default_num_partitions=default_num_partitions,
            default_replication_factor=default_replication_factor,
            delete_topic_enable=delete_topic_enable,
            broker_settings=self.broker_settings,
        )
        self._configs = ConfigControl(lambda: self._image, self._collect, self.broker_settings)
        self._producer_ids = ProducerIdControl(lambda: self._image, self._collect)

    @property
    def default_num_partitions(self) -> int:
        return self._topics.default_num_partitions

    @property
    def default_replication_factor(self) -> int:
        return self._topics.default_replication_factor

    @property
    def delete_topic_enable(self) -> bool:
        return self._topics.delete_topic_enable

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

    # ------------------------------------------------------------------ topics (topic_control)

    def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> ControllerResult[list[CreateTopicResult]]:
        if not self._active:
            return self._not_controller([CreateTopicResult(t.name) for t in topics])
        return self._run(lambda: self._topics.create_topics(topics, validate_only=validate_only))

    def delete_topics(
        self, names: Sequence[str] = (), topic_ids: Sequence[uuid.UUID] = ()
    ) -> ControllerResult[list[DeleteTopicResult]]:
        if not self._active:
            items = [(n, None) for n in names] + [(None, i) for i in topic_ids]
            return self._not_controller([DeleteTopicResult(n, i) for n, i in items])
        return self._run(lambda: self._topics.delete_topics(names, topic_ids))

    def create_partitions(
        self, topics: Sequence[NewPartitions], *, validate_only: bool = False
    ) -> ControllerResult[list[CreatePartitionsResult]]:
        if not self._active:
            return self._not_controller([CreatePartitionsResult(t.name) for t in topics])
        return self._run(lambda: self._topics.create_partitions(topics, validate_only=validate_only))

    # ------------------------------------------------------------------ configs (config_control)

    def alter_configs(
        self, resources: Sequence[AlterConfigsResource], *, validate_only: bool = False
    ) -> ControllerResult[list[ConfigResult]]:
        """AlterConfigs: each resource's overrides become exactly ``configs``."""
        if not self._active:
            return self._not_controller([ConfigResult(r.resource_type, r.resource_name) for r in resources])
        return self._run(lambda: self._configs.alter_configs(resources, validate_only))

    def incremental_alter_configs(
        self, resources: Sequence[IncrementalAlterConfigsResource], *, validate_only: bool = False
    ) -> ControllerResult[list[ConfigResult]]:
        if not self._active:
            return self._not_controller([ConfigResult(r.resource_type, r.resource_name) for r in resources])
        return self._run(lambda: self._configs.incremental_alter_configs(resources, validate_only))

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
        return self._run(lambda: self._producer_ids.allocate(broker_id, broker_epoch, count))

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
            items: list[ScramDeletion | ScramUpsertion] = [*deletions, *upsertions]
            users = list(dict.fromkeys(i.name for i in items))
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
