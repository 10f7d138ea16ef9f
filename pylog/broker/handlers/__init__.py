"""One module per Kafka API; the tables below say which listener serves which API and hand each
handler the few services it uses, with the ACL checks Kafka applies to it (``api_acls``:
whole-request checks and per-topic splitting; per-item checks live in the handlers)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pylog.protocol.api import supported_versions
from pylog.protocol.errors import ErrorCode

from pylog.broker.access import api_acls as az
from pylog.broker.access.authorization import Authorization
from pylog.broker.control.controller_channel import ControllerChannel, forwarded
from pylog.broker.control.controller_client import ControllerClient
from pylog.broker.control.metadata import BrokerMetadata, MetadataView
from pylog.broker.coordinators.coordinator_shell import durable
from pylog.broker.coordinators.group_shell import GroupShell
from pylog.broker.coordinators.producer_ids import ProducerIdManager
from pylog.broker.coordinators.share_shell import ShareShell
from pylog.broker.coordinators.telemetry_shell import TelemetryShell
from pylog.broker.coordinators.txn_shell import TxnShell
from pylog.broker.datapath.fetch_session import FetchSessionCache
from pylog.broker.datapath.isr_manager import IsrManager
from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.broker.handlers import (
    acls,
    add_offsets_to_txn,
    add_partitions_to_txn,
    allocate_producer_ids,
    alter_partition,
    alter_partition_reassignments,
    alter_replica_log_dirs,
    alter_share_group_offsets,
    api_versions,
    broker_heartbeat,
    broker_registration,
    client_metrics,
    client_quotas,
    configs,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_share_group_offsets,
    delete_topics,
    describe_cluster,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_quorum,
    describe_share_group_offsets,
    describe_topic_partitions,
    describe_transactions,
    elect_leaders,
    end_txn,
    envelope,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_config_resources,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    metadata_fetch,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    raft,
    raft_voters,
    remote_log_segment,
    sasl,
    scram_credentials,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    streams_group_describe,
    streams_group_heartbeat,
    sync_group,
    telemetry,
    txn_offset_commit,
    unregister_broker,
    update_features,
    write_txn_markers,
)
from pylog.broker.network.context import RequestContext
from pylog.broker.network.feature_gate import GATED, gated
from pylog.broker.network.handler_table import ErrorResponse, HandlerSpec, HandlerTable, route
from pylog.cluster.node_config import NodeSettings
from pylog.cluster.quorum import MetadataQuorum
from pylog.config import BrokerConfig
from pylog.schema_registry.validation import SchemaValidation
from pylog.security.acl_operations import AclOperation
from pylog.security.client import PLAINTEXT, ClientSecurity


@dataclass(frozen=True)
class BrokerServices:
    """What the client listener's handlers are built from (each takes only what it uses)."""

    node_id: int
    config: BrokerConfig
    metadata: MetadataView
    replicas: ReplicaManager
    groups: GroupShell
    share: ShareShell
    txn: TxnShell
    producer_ids: ProducerIdManager
    controller: ControllerClient
    channel: ControllerChannel
    isr: IsrManager
    stopping: Callable[[], bool]
    schema_validation: SchemaValidation
    authz: Authorization
    telemetry: TelemetryShell
    fetch_sessions: FetchSessionCache
    monotonic_ms: Callable[[], int]


@dataclass(frozen=True)
class ControllerServices:
    """What the controller listener's handlers are built from."""

    cluster_id: str
    config: BrokerConfig
    settings: NodeSettings
    quorum: MetadataQuorum
    authz: Authorization
    controller_security: ClientSecurity = PLAINTEXT


def client_handlers(s: BrokerServices) -> HandlerTable:
    """The APIs Kafka clients use, on the broker's client listeners."""
    versions: dict[int, tuple[int, int]] = {}
    shells = (s.groups, s.txn, s.share)
    commit_timeout_s = s.config.int("offsets.commit.timeout.ms") / 1000
    authz = s.authz
    Op = AclOperation

    def acked(fn: Any) -> Any:
        """A coordinator API that writes to an internal topic answers once that is replicated."""
        return durable(fn, shells, commit_timeout_s)

    def topic_name_of_id(t: Any) -> str | None:
        topic = s.metadata.image.topic(t.topic_id)
        return topic.name if topic is not None else None

    def topics(
        field: str, name: str, response: str, op: AclOperation, denied: ErrorResponse, **kw: Any
    ) -> az.TopicRule:
        return az.TopicRule(field, az.by_name(name), response, op, denied, **kw)

    def follower(req: Any) -> bool:
        state = getattr(req, "replica_state", None)
        return getattr(req, "replica_id", -1) >= 0 or (state is not None and state.replica_id >= 0)

    def follower_fetch(ctx: RequestContext, req: Any) -> int | None:
        """A follower's fetch needs CLUSTER_ACTION (then every topic); a consumer's READ per topic."""
        if not follower(req) or authz.cluster(ctx, Op.CLUSTER_ACTION):
            return None
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED

    produce_txn = lambda ctx, req: (  # noqa: E731
        None if req.transactional_id is None else az.transactional_id(authz)(ctx, req)
    )
    group_read = az.group(authz, Op.READ)
    specs = _feature_gated(
        [
            route(
                api_versions.api_versions,
                table=versions,
                image=lambda: s.metadata.image,
                kraft_version=lambda: s.metadata.kraft_version,
            ),
            route(sasl.sasl_handshake),
            route(sasl.sasl_authenticate),
            az.per_topic(
                route(produce.produce, replicas=s.replicas, schema_validation=s.schema_validation),
                authz,
                topics("topic_data", "name", "responses", Op.WRITE, produce.error_response, pre=produce_txn),
            ),
            az.per_topic(
                route(
                    fetch.fetch,
                    replicas=s.replicas,
                    isr=s.isr,
                    stopping=s.stopping,
                    sessions=s.fetch_sessions,
                    monotonic_ms=s.monotonic_ms,
                    authz=authz,
                ),
                authz,
                topics(
                    "topics",
                    "topic",
                    "responses",
                    Op.READ,
                    fetch.error_response,
                    pre=follower_fetch,
                    bypass=lambda ctx, req: follower(req),
                ),
            ),
            az.per_topic(
                route(offset_for_leader_epoch.offset_for_leader_epoch, replicas=s.replicas),
                authz,
                topics(
                    "topics",
                    "topic",
                    "topics",
                    Op.DESCRIBE,
                    offset_for_leader_epoch.error_response,
                    bypass=lambda ctx, req: authz.cluster(ctx, Op.CLUSTER_ACTION),
                ),
            ),
            az.per_topic(
                route(list_offsets.list_offsets, replicas=s.replicas),
                authz,
                topics("topics", "name", "topics", Op.DESCRIBE, list_offsets.error_response),
            ),
            az.metadata(
                route(metadata.metadata, metadata=s.metadata, controller=s.controller, config=s.config,
                      node_id=s.node_id), authz
            ),
            route(describe_cluster.describe_cluster, metadata=s.metadata, authz=authz, node_id=s.node_id),
            route(
                describe_topic_partitions.describe_topic_partitions,
                metadata=s.metadata,
                config=s.config,
                authz=authz,
            ),
            az.per_topic(
                route(delete_records.delete_records, replicas=s.replicas, metadata=s.metadata),
                authz,
                topics("topics", "name", "topics", Op.DELETE, delete_records.error_response),
            ),
            route(describe_log_dirs.describe_log_dirs, replicas=s.replicas, authz=authz),
            route(alter_replica_log_dirs.alter_replica_log_dirs, replicas=s.replicas, authz=authz),
            az.per_topic(
                route(describe_producers.describe_producers, replicas=s.replicas),
                authz,
                topics("topics", "name", "topics", Op.READ, describe_producers.error_response),
            ),
            forwarded(create_topics.create_topics, s.channel),
            forwarded(delete_topics.delete_topics, s.channel),
            forwarded(create_partitions.create_partitions, s.channel),
            forwarded(configs.alter_configs, s.channel),
            route(
                configs.incremental_alter_configs_forwarded, channel=s.channel, node_id=s.node_id, authz=authz
            ),
            forwarded(elect_leaders.elect_leaders, s.channel),
            forwarded(alter_partition_reassignments.alter_partition_reassignments, s.channel),
            forwarded(list_partition_reassignments.list_partition_reassignments, s.channel),
            forwarded(unregister_broker.unregister_broker, s.channel),
            forwarded(update_features.update_features, s.channel),
            forwarded(describe_quorum.describe_quorum, s.channel),
            forwarded(raft_voters.add_raft_voter, s.channel),
            forwarded(raft_voters.remove_raft_voter, s.channel),
            forwarded(acls.create_acls, s.channel),
            forwarded(acls.delete_acls, s.channel),
            forwarded(scram_credentials.alter_user_scram_credentials, s.channel),
            forwarded(client_quotas.alter_client_quotas, s.channel),
            route(client_quotas.describe_client_quotas, metadata=s.metadata, authz=authz),
            route(telemetry.get_telemetry_subscriptions, telemetry=s.telemetry),
            route(telemetry.push_telemetry, telemetry=s.telemetry),
            route(client_metrics.client_metrics, telemetry=s.telemetry, authz=authz),
            route(list_config_resources.list_config_resources, metadata=s.metadata, authz=authz),
            route(acls.describe_acls, authz=authz),
            route(scram_credentials.describe_user_scram_credentials, metadata=s.metadata, authz=authz),
            route(
                configs.describe_configs, config=s.config, metadata=s.metadata, node_id=s.node_id, authz=authz
            ),
            route(
                find_coordinator.find_coordinator,
                groups=s.groups,
                txn=s.txn,
                metadata=s.metadata,
                authz=authz,
            ),
            az.requires(
                route(acked(join_group.join_group), groups=s.groups, metadata=s.metadata), group_read
            ),
            az.requires(
                route(acked(sync_group.sync_group), groups=s.groups, metadata=s.metadata), group_read
            ),
            az.requires(route(heartbeat.heartbeat, groups=s.groups, metadata=s.metadata), group_read),
            az.requires(route(acked(leave_group.leave_group), groups=s.groups), group_read),
            az.per_topic(
                route(acked(offset_commit.offset_commit), groups=s.groups, metadata=s.metadata),
                authz,
                topics(
                    "topics",
                    "name",
                    "topics",
                    Op.READ,
                    offset_commit.error_response,
                    pre=az.group(authz, Op.READ, "group_id"),
                ),
            ),
            route(offset_fetch.offset_fetch, groups=s.groups, authz=authz),
            az.requires(
                az.per_topic(
                    route(acked(offset_delete.offset_delete), groups=s.groups, metadata=s.metadata),
                    authz,
                    topics("topics", "name", "topics", Op.READ, offset_delete.refused_topics),
                ),
                az.group(authz, Op.DELETE),
            ),
            route(list_groups.list_groups, groups=s.groups, authz=authz),
            az.requires(
                route(
                    acked(consumer_group_heartbeat.consumer_group_heartbeat),
                    groups=s.groups,
                    metadata=s.metadata,
                ),
                az.all_of(group_read, az.subscribed_topics(authz)),
            ),
            route(
                consumer_group_describe.consumer_group_describe,
                groups=s.groups,
                metadata=s.metadata,
                authz=authz,
            ),
            az.requires(
                route(
                    acked(share_group_heartbeat.share_group_heartbeat),
                    groups=s.groups,
                    share=s.share,
                    metadata=s.metadata,
                ),
                az.all_of(group_read, az.subscribed_topics(authz)),
            ),
            route(
                share_group_describe.share_group_describe, groups=s.groups, metadata=s.metadata, authz=authz
            ),
            az.requires(
                route(
                    acked(streams_group_heartbeat.streams_group_heartbeat),
                    groups=s.groups,
                    metadata=s.metadata,
                    authz=authz,
                    creator=streams_group_heartbeat.InternalTopicCreator(s.controller),
                ),
                group_read,
            ),
            route(
                streams_group_describe.streams_group_describe,
                groups=s.groups,
                metadata=s.metadata,
                authz=authz,
            ),
            az.requires(
                az.per_topic(
                    route(
                        share_fetch.share_fetch_handler,
                        share=s.share,
                        metadata=s.metadata,
                        replicas=s.replicas,
                        node_id=s.node_id,
                        stopping=s.stopping,
                    ),
                    authz,
                    az.TopicRule(
                        "topics", topic_name_of_id, "responses", Op.READ, share_fetch.error_response
                    ),
                ),
                group_read,
                az.top_level,
            ),
            az.requires(
                az.per_topic(
                    route(
                        acked(share_acknowledge.share_acknowledge_handler),
                        share=s.share,
                        metadata=s.metadata,
                        node_id=s.node_id,
                    ),
                    authz,
                    az.TopicRule(
                        "topics",
                        topic_name_of_id,
                        "responses",
                        Op.READ,
                        share_acknowledge.error_response,
                    ),
                ),
                group_read,
                az.top_level,
            ),
            route(
                describe_share_group_offsets.describe_share_group_offsets,
                groups=s.groups,
                share=s.share,
                metadata=s.metadata,
                authz=authz,
            ),
            route(
                describe_share_group_offsets.share_group_state,
                groups=s.groups,
                share=s.share,
                metadata=s.metadata,
                authz=authz,
            ),
            az.requires(
                az.per_topic(
                    route(
                        acked(alter_share_group_offsets.alter_share_group_offsets),
                        groups=s.groups,
                        share=s.share,
                        metadata=s.metadata,
                    ),
                    authz,
                    topics(
                        "topics", "topic_name", "responses", Op.READ, alter_share_group_offsets.error_response
                    ),
                ),
                group_read,
                az.top_level,
            ),
            az.requires(
                az.per_topic(
                    route(
                        acked(delete_share_group_offsets.delete_share_group_offsets),
                        groups=s.groups,
                        share=s.share,
                        metadata=s.metadata,
                    ),
                    authz,
                    topics(
                        "topics",
                        "topic_name",
                        "responses",
                        Op.READ,
                        delete_share_group_offsets.error_response,
                    ),
                ),
                az.group(authz, Op.DELETE),
                az.top_level,
            ),
            route(describe_groups.describe_groups, groups=s.groups, authz=authz),
            route(acked(delete_groups.delete_groups), groups=s.groups, authz=authz),
            az.requires(
                route(acked(init_producer_id.init_producer_id), producer_ids=s.producer_ids, txn=s.txn),
                az.init_producer_id(authz),
            ),
            route(
                acked(add_partitions_to_txn.add_partitions_to_txn),
                txn=s.txn,
                metadata=s.metadata,
                authz=authz,
            ),
            az.requires(
                route(acked(add_offsets_to_txn.add_offsets_to_txn), txn=s.txn, groups=s.groups),
                az.all_of(az.transactional_id(authz), group_read),
            ),
            az.requires(route(acked(end_txn.end_txn), txn=s.txn), az.transactional_id(authz)),
            az.per_topic(
                route(
                    acked(txn_offset_commit.txn_offset_commit),
                    groups=s.groups,
                    txn=s.txn,
                    replicas=s.replicas,
                    metadata=s.metadata,
                ),
                authz,
                topics(
                    "topics",
                    "name",
                    "topics",
                    Op.READ,
                    txn_offset_commit.error_response,
                    pre=az.all_of(az.transactional_id(authz), group_read),
                ),
            ),
            route(list_transactions.list_transactions, txn=s.txn, authz=authz),
            az.requires(
                route(
                    write_txn_markers.write_txn_markers,
                    replicas=s.replicas,
                    groups=s.groups,
                    timeout_s=s.config.int("request.timeout.ms") / 1000,
                ),
                az.cluster(authz, Op.CLUSTER_ACTION),
            ),
            route(describe_transactions.describe_transactions, txn=s.txn, authz=authz),
        ],
        lambda: s.metadata.image,
    )
    table = HandlerTable(specs, supported_versions())
    versions.update(table.advertised)
    return table


def controller_handlers(s: ControllerServices) -> HandlerTable:
    """The controller's APIs, on its controller listener (and in-process for its own broker).
    Brokers' own APIs need CLUSTER_ACTION; a client's admin request forwarded in an Envelope is
    authorized as that client. Admin tools that bootstrap from the controllers (KIP-919) find
    here the APIs Kafka's controllers serve them: DescribeCluster (the controllers),
    DescribeQuorum, DescribeConfigs, the config, ACL, SCRAM and feature changes."""
    versions: dict[int, tuple[int, int]] = {}
    q, authz = s.quorum, s.authz
    view = BrokerMetadata(q, s.cluster_id)  # the committed image, read as a broker reads it
    listener = s.settings.controller_listener_name
    node_only = az.cluster(authz, AclOperation.CLUSTER_ACTION)
    cell: list[HandlerTable] = []
    table = HandlerTable(
        [
            route(
                api_versions.api_versions,
                table=versions,
                image=lambda: q.image,
                kraft_version=lambda: q.kraft_version,
            ),
            route(sasl.sasl_handshake),
            route(sasl.sasl_authenticate),
            route(envelope.envelope, table=lambda: cell[0], authz=authz),
            az.requires(route(raft.raft, quorum=q, cluster_id=s.cluster_id), node_only),
            az.requires(
                route(broker_registration.broker_registration, quorum=q, cluster_id=s.cluster_id), node_only
            ),
            az.requires(route(broker_heartbeat.broker_heartbeat, quorum=q), node_only),
            az.requires(route(alter_partition.alter_partition, quorum=q), node_only),
            az.requires(route(remote_log_segment.remote_log_segment, quorum=q), node_only),
            az.requires(route(allocate_producer_ids.allocate_producer_ids, quorum=q), node_only),
            route(create_topics.create_topics, quorum=q, config=s.config, authz=authz),
            route(delete_topics.delete_topics, quorum=q, authz=authz),
            route(create_partitions.create_partitions, quorum=q, authz=authz),
            route(configs.alter_configs, quorum=q, authz=authz),
            route(configs.incremental_alter_configs, quorum=q, authz=authz),
            az.requires(route(elect_leaders.elect_leaders, quorum=q), az.cluster(authz, AclOperation.ALTER)),
            az.requires(
                route(alter_partition_reassignments.alter_partition_reassignments, quorum=q),
                az.cluster(authz, AclOperation.ALTER),
            ),
            az.requires(
                route(list_partition_reassignments.list_partition_reassignments, quorum=q),
                az.cluster(authz, AclOperation.DESCRIBE),
            ),
            az.requires(
                route(unregister_broker.unregister_broker, quorum=q), az.cluster(authz, AclOperation.ALTER)
            ),
            az.requires(
                route(describe_quorum.describe_quorum, quorum=q, listener=listener),
                az.cluster(authz, AclOperation.DESCRIBE),
            ),
            az.requires(
                route(metadata_fetch.metadata_fetch, quorum=q, cluster_id=s.cluster_id, listener=listener),
                node_only,
            ),
            az.requires(
                route(
                    raft_voters.add_raft_voter,
                    quorum=q,
                    cluster_id=s.cluster_id,
                    listener=listener,
                    security=s.controller_security,
                ),
                az.cluster(authz, AclOperation.ALTER),
            ),
            az.requires(
                route(
                    raft_voters.remove_raft_voter,
                    quorum=q,
                    cluster_id=s.cluster_id,
                    timeout_s=s.config.int("controller.quorum.request.timeout.ms") / 1000 * 15,
                ),
                az.cluster(authz, AclOperation.ALTER),
            ),
            az.requires(
                route(raft_voters.update_raft_voter, quorum=q, cluster_id=s.cluster_id, listener=listener),
                node_only,
            ),
            route(acls.create_acls, quorum=q, authz=authz),
            route(acls.delete_acls, quorum=q, authz=authz),
            route(scram_credentials.alter_user_scram_credentials, quorum=q, authz=authz),
            route(client_quotas.alter_client_quotas, quorum=q, authz=authz),
            az.requires(
                route(update_features.update_features, quorum=q), az.cluster(authz, AclOperation.ALTER)
            ),
            route(
                describe_cluster.describe_cluster_controllers,
                quorum=q,
                settings=s.settings,
                cluster_id=s.cluster_id,
                authz=authz,
            ),
            route(
                configs.describe_configs,
                config=s.config,
                metadata=view,
                node_id=s.settings.node_id,
                authz=authz,
            ),
            route(acls.describe_acls, authz=authz),
            route(scram_credentials.describe_user_scram_credentials, metadata=view, authz=authz),
        ],
        supported_versions(),
    )
    cell.append(table)
    versions.update(table.advertised)
    return table


def _feature_gated(specs: list[HandlerSpec], image: Callable[[], Any]) -> list[HandlerSpec]:
    """The APIs a finalized feature level turns on answer UNSUPPORTED_VERSION below it."""
    return [gated(spec, image) if spec.api_key in GATED else spec for spec in specs]
