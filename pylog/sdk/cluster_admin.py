"""The shape of a cluster and the admin requests that change it, over pylog's Kafka client.

`ClusterAdmin` asks any broker (brokers forward the controller's APIs): Metadata for brokers, racks
and every partition's leader, replicas and ISR; ListPartitionReassignments for the moves in flight;
AlterPartitionReassignments, ElectLeaders, IncrementalAlterConfigs and UnregisterBroker to change
it. `ClusterState` is what the CLI, `LocalCluster` and the cluster widget show. Coroutines run on
the client's I/O loop; `ClusterAdminSync` is the blocking face.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pylog.client.cluster import KafkaClient
from pylog.client.errors import KafkaError
from pylog.protocol.api import ApiKey
from pylog.sdk import aio

T = TypeVar("T")
TopicPartition = tuple[str, int]

METADATA_TOPIC = "__cluster_metadata"
PREFERRED_ELECTION = 0
BROKER_RESOURCE, TOPIC_RESOURCE = 4, 2
SET, DELETE = 0, 1


@dataclass(frozen=True)
class BrokerState:
    node_id: int
    host: str
    port: int
    rack: str | None
    replicas: int = 0
    leaders: int = 0


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def offline(self) -> bool:
        return self.leader < 0

    @property
    def under_replicated(self) -> bool:
        """Fewer in-sync replicas than assigned ones (replicas being added do not count yet)."""
        return len(self.isr) < len(self.replicas) - len(self.adding)

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)


@dataclass
class ClusterState:
    cluster_id: str | None
    controller_id: int
    brokers: dict[int, BrokerState]
    partitions: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    internal_topics: set[str] = field(default_factory=set)

    @property
    def assignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        """Every partition's replicas as they will be once the moves in flight are done."""
        return {tp: p.target for tp, p in self.partitions.items()}

    @property
    def under_replicated(self) -> list[PartitionState]:
        return [p for _, p in sorted(self.partitions.items()) if p.under_replicated and not p.offline]

    @property
    def offline(self) -> list[PartitionState]:
        return [p for _, p in sorted(self.partitions.items()) if p.offline]

    @property
    def reassignments(self) -> list[PartitionState]:
        return [p for _, p in sorted(self.partitions.items()) if p.reassigning]

    def racks(self) -> dict[int, str | None]:
        return {b.node_id: b.rack for b in self.brokers.values()}

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON output and the widget)."""

        def part(p: PartitionState) -> dict[str, Any]:
            return {"topic": p.topic, "partition": p.partition, "leader": p.leader,
                    "replicas": list(p.replicas), "isr": list(p.isr),
                    "adding_replicas": list(p.adding), "removing_replicas": list(p.removing)}

        return {
            "cluster_id": self.cluster_id,
            "controller_id": self.controller_id,
            "brokers": [
                {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
                 "replicas": b.replicas, "leaders": b.leaders}
                for b in sorted(self.brokers.values(), key=lambda b: b.node_id)
            ],
            "partitions": len(self.partitions),
            "under_replicated": [part(p) for p in self.under_replicated],
            "offline": [part(p) for p in self.offline],
            "reassignments": [part(p) for p in self.reassignments],
        }


@dataclass(frozen=True)
class LogDirState:
    """One log directory of a broker (DescribeLogDirs): its partitions {(topic, partition): (size
    in bytes, offset lag)}, the replicas moving into it (future replicas), its volume's bytes."""

    broker: int
    path: str
    error: int
    partitions: dict[TopicPartition, tuple[int, int]]
    future: dict[TopicPartition, tuple[int, int]]
    total_bytes: int
    usable_bytes: int

    @property
    def size_bytes(self) -> int:
        return sum(size for size, _ in self.partitions.values())


class ClusterAdmin:
    """Cluster-shaping admin requests on one `KafkaClient`; `await start()`, use, `await close()`."""

    def __init__(self, bootstrap_servers: str | Sequence[str], *, request_timeout_s: float = 30.0,
                 security: Any = None, client_id: str = "pylog-cluster-admin") -> None:
        self.client = KafkaClient(bootstrap_servers, client_id=client_id,
                                  request_timeout_s=request_timeout_s, security=security)

    async def start(self) -> None:
        await self.client.start()

    async def close(self) -> None:
        await self.client.close()

    async def _request(self, key: int, body: dict[str, Any]) -> Any:
        """One request to a bootstrap broker; once more through another if that one went away."""
        await self.start()
        return await self.client.request(key, body, retry=True)

    # ------------------------------------------------------------------ reading

    async def state(self) -> ClusterState:
        """Brokers, racks and every partition, with the reassignments in flight."""
        md = await self._request(ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False})
        moving = await self.list_reassignments()
        replicas: dict[int, int] = {}
        leaders: dict[int, int] = {}
        parts: dict[TopicPartition, PartitionState] = {}
        internal = set()
        for t in md.topics:
            if getattr(t, "is_internal", False) or str(t.name).startswith("__"):
                internal.add(t.name)
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                _, adding, removing = moving.get(tp, ((), (), ()))
                state = PartitionState(t.name, p.partition_index, p.leader_id, tuple(p.replica_nodes),
                                       tuple(p.isr_nodes), tuple(adding), tuple(removing))
                parts[tp] = state
                for r in state.replicas:
                    replicas[r] = replicas.get(r, 0) + 1
                if state.leader >= 0:
                    leaders[state.leader] = leaders.get(state.leader, 0) + 1
        brokers = {
            b.node_id: BrokerState(b.node_id, b.host, b.port, getattr(b, "rack", None),
                                   replicas.get(b.node_id, 0), leaders.get(b.node_id, 0))
            for b in md.brokers
        }
        controller = await self.active_controller()
        if controller is None:
            controller = getattr(md, "controller_id", -1)
        return ClusterState(getattr(md, "cluster_id", None), controller, brokers, parts, internal)

    async def active_controller(self) -> int | None:
        """The metadata quorum's leader (DescribeQuorum): brokers of a KRaft cluster name any live
        broker as the controller in Metadata, since they forward; None without a quorum to ask."""
        try:
            resp = await self._request(ApiKey.DESCRIBE_QUORUM, {"topics": [
                {"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]})
        except KafkaError:
            return None
        if resp.error_code or not resp.topics or not resp.topics[0].partitions:
            return None
        leader = resp.topics[0].partitions[0].leader_id
        return leader if leader >= 0 else None

    async def list_reassignments(self) -> dict[TopicPartition, tuple[tuple[int, ...], tuple[int, ...],
                                                                        tuple[int, ...]]]:
        """{(topic, partition): (replicas, adding, removing)} of every move in flight."""
        resp = await self._request(ApiKey.LIST_PARTITION_REASSIGNMENTS, {"timeout_ms": 30000, "topics": None})
        if resp.error_code:
            raise KafkaError(resp.error_code, "ListPartitionReassignments", resp.error_message)
        return {
            (t.name, p.partition_index): (tuple(p.replicas), tuple(p.adding_replicas),
                                          tuple(p.removing_replicas))
            for t in resp.topics for p in t.partitions
        }

    # ------------------------------------------------------------------ changing

    async def alter_reassignments(self, targets: Mapping[TopicPartition, Sequence[int] | None]
                                  ) -> dict[TopicPartition, tuple[int, str | None]]:
        """Move each partition to its replicas (None: cancel its move); {tp: (error, message)}."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), replicas in targets.items():
            by_topic.setdefault(topic, []).append(
                {"partition_index": partition, "replicas": None if replicas is None else list(replicas)})
        resp = await self._request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
            "timeout_ms": 30000, "allow_replication_factor_change": True,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
        if resp.error_code:
            raise KafkaError(resp.error_code, "AlterPartitionReassignments", resp.error_message)
        return {(t.name, p.partition_index): (p.error_code, p.error_message)
                for t in resp.responses for p in t.partitions}

    async def elect_preferred_leaders(self, partitions: Sequence[TopicPartition] | None
                                      ) -> dict[TopicPartition, int]:
        """Preferred-leader election; {tp: error} (ELECTION_NOT_NEEDED: it already leads)."""
        wanted = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            wanted = [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]
        resp = await self._request(ApiKey.ELECT_LEADERS, {
            "election_type": PREFERRED_ELECTION, "topic_partitions": wanted, "timeout_ms": 30000})
        return {(r.topic, p.partition_id): p.error_code
                for r in resp.replica_election_results for p in r.partition_result}

    async def alter_configs(self, changes: Mapping[tuple[int, str], Mapping[str, str | None]]) -> None:
        """IncrementalAlterConfigs: {(resource type, name): {config: value, or None to delete}}."""
        resources = [
            {"resource_type": rtype, "resource_name": name,
             "configs": [{"name": k, "config_operation": DELETE if v is None else SET, "value": v}
                         for k, v in cfgs.items()]}
            for (rtype, name), cfgs in changes.items()
        ]
        resp = await self._request(ApiKey.INCREMENTAL_ALTER_CONFIGS,
                                   {"resources": resources, "validate_only": False})
        for r in resp.responses:
            if r.error_code:
                raise KafkaError(r.error_code, f"IncrementalAlterConfigs {r.resource_name!r}",
                                 r.error_message)

    async def unregister_broker(self, broker_id: int) -> tuple[int, str | None]:
        resp = await self._request(ApiKey.UNREGISTER_BROKER, {"broker_id": broker_id})
        return resp.error_code, resp.error_message

    # ------------------------------------------------------------------ log directories

    async def describe_log_dirs(self, brokers: Sequence[int] | None = None,
                                topics: Sequence[str] | None = None) -> list[LogDirState]:
        """Every log directory of ``brokers`` (default: all), with the partitions of ``topics``
        (default: all) in each (DescribeLogDirs, asked of each broker)."""
        if brokers is None:
            brokers = sorted((await self.state()).brokers)
        wanted = None
        if topics is not None:
            md = await self._request(ApiKey.METADATA, {"topics": [{"name": t} for t in topics],
                                                       "allow_auto_topic_creation": False})
            wanted = [{"topic": t.name, "partitions": [p.partition_index for p in t.partitions]}
                      for t in md.topics]
        out = []
        for node in brokers:
            await self.start()
            resp = await self.client.request(ApiKey.DESCRIBE_LOG_DIRS, {"topics": wanted}, node=node)
            if getattr(resp, "error_code", 0):
                raise KafkaError(resp.error_code, f"DescribeLogDirs of broker {node}")
            for r in resp.results:
                current: dict[TopicPartition, tuple[int, int]] = {}
                future: dict[TopicPartition, tuple[int, int]] = {}
                for t in r.topics:
                    for p in t.partitions:
                        into = future if p.is_future_key else current
                        into[(t.name, p.partition_index)] = (p.partition_size, p.offset_lag)
                out.append(LogDirState(node, r.log_dir, r.error_code, current, future,
                                       getattr(r, "total_bytes", -1), getattr(r, "usable_bytes", -1)))
        return out

    async def alter_replica_log_dirs(self, moves: Mapping[tuple[str, int, int], str]
                                     ) -> dict[tuple[str, int, int], int]:
        """Move replicas between the log directories of their broker: {(topic, partition, broker):
        absolute directory} -> {same key: error code} (AlterReplicaLogDirs, to each broker)."""
        by_broker: dict[int, dict[str, dict[str, list[int]]]] = {}
        for (topic, partition, broker), path in moves.items():
            by_broker.setdefault(broker, {}).setdefault(path, {}).setdefault(topic, []).append(partition)
        out: dict[tuple[str, int, int], int] = {}
        for broker, dirs in by_broker.items():
            await self.start()
            body = {"dirs": [{"path": path, "topics": [{"name": t, "partitions": ps} for t, ps in ts.items()]}
                             for path, ts in dirs.items()]}
            resp = await self.client.request(ApiKey.ALTER_REPLICA_LOG_DIRS, body, node=broker)
            for t in resp.results:
                for p in t.partitions:
                    out[(t.topic_name, p.partition_index, broker)] = p.error_code
        return out


class ClusterAdminSync:
    """Blocking `ClusterAdmin` (the SDK's I/O loop); a context manager."""

    def __init__(self, bootstrap_servers: str | Sequence[str], **kwargs: Any) -> None:
        self.aio = ClusterAdmin(bootstrap_servers, **kwargs)

    def __enter__(self) -> ClusterAdminSync:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return aio.run(coro)

    def state(self) -> ClusterState:
        return self._run(self.aio.state())

    def list_reassignments(self) -> dict[TopicPartition, tuple[tuple[int, ...], tuple[int, ...],
                                                                tuple[int, ...]]]:
        return self._run(self.aio.list_reassignments())

    def alter_reassignments(self, targets: Mapping[TopicPartition, Sequence[int] | None]
                            ) -> dict[TopicPartition, tuple[int, str | None]]:
        return self._run(self.aio.alter_reassignments(targets))

    def elect_preferred_leaders(self, partitions: Sequence[TopicPartition] | None
                                ) -> dict[TopicPartition, int]:
        return self._run(self.aio.elect_preferred_leaders(partitions))

    def alter_configs(self, changes: Mapping[tuple[int, str], Mapping[str, str | None]]) -> None:
        self._run(self.aio.alter_configs(changes))

    def unregister_broker(self, broker_id: int) -> tuple[int, str | None]:
        return self._run(self.aio.unregister_broker(broker_id))

    def describe_log_dirs(self, brokers: Sequence[int] | None = None,
                          topics: Sequence[str] | None = None) -> list[LogDirState]:
        return self._run(self.aio.describe_log_dirs(brokers, topics))

    def alter_replica_log_dirs(self, moves: Mapping[tuple[str, int, int], str]
                               ) -> dict[tuple[str, int, int], int]:
        return self._run(self.aio.alter_replica_log_dirs(moves))

    def close(self) -> None:
        self._run(self.aio.close())
