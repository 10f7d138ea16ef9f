"""One module per Kafka API; the tables below say which listener serves which API and hand each
handler the few services it uses."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pylog.protocol.api import supported_versions

from pylog.broker.controller_channel import ControllerChannel, forwarded
from pylog.broker.controller_client import ControllerClient
from pylog.broker.coordinator_shell import durable
from pylog.broker.group_shell import GroupShell
from pylog.broker.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    allocate_producer_ids,
    alter_partition,
    alter_share_group_offsets,
    api_versions,
    broker_heartbeat,
    broker_registration,
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
    describe_producers,
    describe_quorum,
    describe_share_group_offsets,
    describe_transactions,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    metadata_fetch,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    raft,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)
from pylog.broker.isr_manager import IsrManager
from pylog.broker.metadata import MetadataView
from pylog.broker.producer_ids import ProducerIdManager
from pylog.broker.registry import HandlerTable, route
from pylog.broker.replica_manager import ReplicaManager
from pylog.broker.share_shell import ShareShell
from pylog.broker.txn_shell import TxnShell
from pylog.cluster.node_config import NodeSettings
from pylog.cluster.quorum import MetadataQuorum
from pylog.config import BrokerConfig
from pylog.schema_registry.validation import SchemaValidation


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


@dataclass(frozen=True)
class ControllerServices:
    """What the controller listener's handlers are built from."""

    cluster_id: str
    config: BrokerConfig
    settings: NodeSettings
    quorum: MetadataQuorum


def client_handlers(s: BrokerServices) -> HandlerTable:
    """The APIs Kafka clients use, on the broker's client listeners."""
    versions: dict[int, tuple[int, int]] = {}
    shells = (s.groups, s.txn, s.share)
    commit_timeout_s = s.config.int("offsets.commit.timeout.ms") / 1000

    def acked(fn: Any) -> Any:
        """A coordinator API that writes to an internal topic answers once that is replicated."""
        return durable(fn, shells, commit_timeout_s)

    table = HandlerTable(
        [
            route(api_versions.api_versions, table=versions),
            route(produce.produce, replicas=s.replicas, schema_validation=s.schema_validation),
            route(fetch.fetch, replicas=s.replicas, isr=s.isr, stopping=s.stopping),
            route(offset_for_leader_epoch.offset_for_leader_epoch, replicas=s.replicas),
            route(list_offsets.list_offsets, replicas=s.replicas),
            route(metadata.metadata, metadata=s.metadata, controller=s.controller, config=s.config),
            route(describe_cluster.describe_cluster, metadata=s.metadata),
            route(delete_records.delete_records, replicas=s.replicas),
            route(describe_producers.describe_producers, replicas=s.replicas),
            forwarded(create_topics.create_topics, s.channel),
            forwarded(delete_topics.delete_topics, s.channel),
            forwarded(create_partitions.create_partitions, s.channel),
            forwarded(configs.alter_configs, s.channel),
            forwarded(configs.incremental_alter_configs, s.channel),
            forwarded(elect_leaders.elect_leaders, s.channel),
            forwarded(describe_quorum.describe_quorum, s.channel),
            route(configs.describe_configs, config=s.config, metadata=s.metadata, node_id=s.node_id),
            route(find_coordinator.find_coordinator, groups=s.groups, txn=s.txn, metadata=s.metadata),
            route(acked(join_group.join_group), groups=s.groups),
            route(acked(sync_group.sync_group), groups=s.groups),
            route(heartbeat.heartbeat, groups=s.groups),
            route(acked(leave_group.leave_group), groups=s.groups),
            route(acked(offset_commit.offset_commit), groups=s.groups, metadata=s.metadata),
            route(offset_fetch.offset_fetch, groups=s.groups),
            route(acked(offset_delete.offset_delete), groups=s.groups, metadata=s.metadata),
            route(list_groups.list_groups, groups=s.groups),
            route(
                acked(consumer_group_heartbeat.consumer_group_heartbeat), groups=s.groups, metadata=s.metadata
            ),
            route(consumer_group_describe.consumer_group_describe, groups=s.groups, metadata=s.metadata),
            route(
                acked(share_group_heartbeat.share_group_heartbeat),
                groups=s.groups,
                share=s.share,
                metadata=s.metadata,
            ),
            route(share_group_describe.share_group_describe, groups=s.groups, metadata=s.metadata),
            route(
                share_fetch.share_fetch_handler,
                share=s.share,
                metadata=s.metadata,
                replicas=s.replicas,
                node_id=s.node_id,
                stopping=s.stopping,
            ),
            route(acked(share_acknowledge.share_acknowledge_handler), share=s.share, node_id=s.node_id),
            route(
                describe_share_group_offsets.describe_share_group_offsets,
                groups=s.groups,
                share=s.share,
                metadata=s.metadata,
            ),
            route(
                acked(alter_share_group_offsets.alter_share_group_offsets),
                groups=s.groups,
                share=s.share,
                metadata=s.metadata,
            ),
            route(
                acked(delete_share_group_offsets.delete_share_group_offsets),
                groups=s.groups,
                share=s.share,
                metadata=s.metadata,
            ),
            route(describe_groups.describe_groups, groups=s.groups),
            route(acked(delete_groups.delete_groups), groups=s.groups),
            route(acked(init_producer_id.init_producer_id), producer_ids=s.producer_ids, txn=s.txn),
            route(acked(add_partitions_to_txn.add_partitions_to_txn), txn=s.txn, metadata=s.metadata),
            route(acked(add_offsets_to_txn.add_offsets_to_txn), txn=s.txn, groups=s.groups),
            route(acked(end_txn.end_txn), txn=s.txn),
            route(
                acked(txn_offset_commit.txn_offset_commit),
                groups=s.groups,
                txn=s.txn,
                replicas=s.replicas,
                metadata=s.metadata,
            ),
            route(list_transactions.list_transactions, txn=s.txn),
            route(
                write_txn_markers.write_txn_markers,
                replicas=s.replicas,
                groups=s.groups,
                timeout_s=s.config.int("request.timeout.ms") / 1000,
            ),
            route(describe_transactions.describe_transactions, txn=s.txn),
        ],
        supported_versions(),
    )
    versions.update(table.advertised)
    return table


def controller_handlers(s: ControllerServices) -> HandlerTable:
    """The controller's APIs, on its controller listener (and in-process for its own broker)."""
    versions: dict[int, tuple[int, int]] = {}
    q = s.quorum
    table = HandlerTable(
        [
            route(api_versions.api_versions, table=versions),
            route(raft.raft, quorum=q, cluster_id=s.cluster_id),
            route(broker_registration.broker_registration, quorum=q, cluster_id=s.cluster_id),
            route(broker_heartbeat.broker_heartbeat, quorum=q),
            route(alter_partition.alter_partition, quorum=q),
            route(allocate_producer_ids.allocate_producer_ids, quorum=q),
            route(create_topics.create_topics, quorum=q, config=s.config),
            route(delete_topics.delete_topics, quorum=q),
            route(create_partitions.create_partitions, quorum=q),
            route(configs.alter_configs, quorum=q),
            route(configs.incremental_alter_configs, quorum=q),
            route(elect_leaders.elect_leaders, quorum=q),
            route(describe_quorum.describe_quorum, quorum=q, settings=s.settings),
            route(metadata_fetch.metadata_fetch, quorum=q, cluster_id=s.cluster_id),
        ],
        supported_versions(),
    )
    versions.update(table.advertised)
    return table
