"""Admin queries over pylog's Kafka client, for the widgets and the ``pylog`` CLI: any
Kafka-compatible cluster.

The group / cluster APIs (ListGroups, FindCoordinator, DescribeGroups, OffsetFetch, OffsetCommit,
ListOffsets, Metadata with replicas / ISR, DescribeLogDirs) and the topic ones (CreateTopics,
DeleteTopics, DescribeConfigs) go through `KafkaClient`, at the versions it negotiates.
Coroutines run on the client's I/O loop; `Admin` is the blocking face.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from pylog.config_defs import ConfigSource
from pylog.protocol.api import ApiKey, PylogApiKey
from pylog.protocol.errors import ErrorCode
from pylog.sdk import aio
from pylog.sdk.client import KafkaClient, KafkaConnection, KafkaError

T = TypeVar("T")

EARLIEST, LATEST = -2, -1
EARLIEST_LOCAL, LATEST_TIERED = -4, -5  # ListOffsets v8 / v9 (KIP-405, KIP-1005)
READ_UNCOMMITTED = 0
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
ADMIN_TIMEOUT_MS = 30000


class GroupListing(NamedTuple):
    """A group as ListGroups names it (``group_type`` and ``state`` empty when the broker's
    version of ListGroups has none)."""

    group_id: str
    protocol_type: str
    state: str
    group_type: str = ""


@dataclass
class Broker:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class PartitionInfo:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]
    error_code: int = 0


@dataclass
class ClusterInfo:
    cluster_id: str | None
    controller_id: int
    brokers: dict[int, Broker]
    topics: dict[str, dict[int, PartitionInfo]]
    topic_errors: dict[str, int] = field(default_factory=dict)
    internal_topics: set[str] = field(default_factory=set)
    topic_ids: dict[str, Any] = field(default_factory=dict)


@dataclass
class GroupMember:
    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None
    assignment: dict[str, list[int]]


@dataclass
class GroupDescription:
    group: str
    state: str
    protocol_type: str
    protocol: str
    members: list[GroupMember]
    coordinator: Broker | None
    error_code: int = 0
    group_type: str = "classic"  # "consumer" (KIP-848) and "share" (KIP-932) groups too


@dataclass
class ShareOffset:
    """A share partition: where the group's unfinished records start, and (pylog brokers) how many
    records are in flight and acquired now (None when the broker does not say)."""

    start_offset: int
    in_flight: int | None
    acquired: int | None


def decode_assignment(data: bytes | memoryview | None) -> dict[str, list[int]]:
    """Kafka's ConsumerProtocolAssignment (v0-v3: version, [topic, [partition]], user data) ->
    {topic: [partitions]}; anything that is not one (another protocol type) decodes to {}."""
    if not data:
        return {}
    buf = bytes(data)
    try:
        (version,) = struct.unpack_from(">h", buf, 0)
        if version < 0:
            return {}
        pos = 2
        (n_topics,) = struct.unpack_from(">i", buf, pos)
        pos += 4
        out: dict[str, list[int]] = {}
        for _ in range(max(0, n_topics)):
            (n,) = struct.unpack_from(">h", buf, pos)
            pos += 2
            topic = buf[pos : pos + n].decode()
            pos += n
            (count,) = struct.unpack_from(">i", buf, pos)
            pos += 4
            parts = list(struct.unpack_from(f">{max(0, count)}i", buf, pos))
            pos += 4 * max(0, count)
            out.setdefault(topic, []).extend(parts)
        return out
    except (struct.error, UnicodeDecodeError):
        return {}


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode(errors="replace")
    return str(value)


class AsyncAdmin:
    """Admin queries on one `KafkaClient`; create, `await start()`, use, `await close()`."""

    def __init__(self, bootstrap_servers: str | Sequence[str], *, client_id: str = "pylog-widgets",
                 request_timeout_s: float = 10.0, security: Any = None) -> None:
        self.client = KafkaClient(bootstrap_servers, client_id=client_id,
                                  request_timeout_s=request_timeout_s, security=security)
        self._started = False

    async def start(self) -> None:
        if self._started:
            return
        await self.client.start()
        self._started = True

    async def close(self) -> None:
        self._started = False
        await self.client.close()

    def has(self, key: int) -> bool:
        return self.client.has(key)

    def version(self, key: int) -> int:
        return self.client.version(key)

    async def _bootstrap(self) -> KafkaConnection:
        return await self.client.any_connection()

    async def cluster(self, topics: list[str] | None = None) -> ClusterInfo:
        """Metadata for `topics` (None: all topics) with replicas, ISR and offline replicas."""
        version = self.version(ApiKey.METADATA)
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False}
        resp = await (await self._bootstrap()).request(ApiKey.METADATA, version, body)
        brokers = {b.node_id: Broker(b.node_id, b.host, b.port, getattr(b, "rack", None))
                   for b in resp.brokers}
        self.client.metadata_cache.brokers.update({b.node_id: (b.host, b.port) for b in brokers.values()})
        out: dict[str, dict[int, PartitionInfo]] = {}
        errors: dict[str, int] = {}
        for t in resp.topics:
            if t.error_code:
                errors[t.name] = t.error_code
            parts = {}
            for p in t.partitions:
                parts[p.partition_index] = PartitionInfo(
                    p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes),
                    list(getattr(p, "offline_replicas", None) or []), p.error_code)
            out[t.name] = parts
        cluster_id = getattr(resp, "cluster_id", None)
        internal = {t.name for t in resp.topics if getattr(t, "is_internal", False)}
        ids = {t.name: getattr(t, "topic_id", None) for t in resp.topics}
        return ClusterInfo(cluster_id, getattr(resp, "controller_id", -1), brokers, out, errors,
                           internal, ids)

    async def list_offsets(self, topic: str, partitions: dict[int, PartitionInfo], timestamp: int
                           ) -> dict[int, int | None]:
        """{partition: offset} for `timestamp` (-2 log start, -1 high watermark; -4 local log start
        and -5 latest tiered offset need ListOffsets v8 / v9) from each leader, read_uncommitted like
        Kafka's consumer-groups tool; None where the partition answered an error."""
        wanted = {EARLIEST_LOCAL: (8, 9), LATEST_TIERED: (9, 9)}.get(timestamp)
        version = self.client.version(ApiKey.LIST_OFFSETS, wanted) if wanted else \
            self.version(ApiKey.LIST_OFFSETS)
        by_leader: dict[int, list[int]] = {}
        for p, info in partitions.items():
            by_leader.setdefault(info.leader, []).append(p)

        async def one(node: int, parts: list[int]) -> dict[int, int | None]:
            if node < 0:
                return dict.fromkeys(parts)
            body = {"replica_id": -1, "isolation_level": READ_UNCOMMITTED,
                    "topics": [{"name": topic, "partitions": [
                        {"partition_index": p, "timestamp": timestamp, "max_num_offsets": 1}
                        for p in parts]}]}
            resp = await (await self.client.connection(node)).request(ApiKey.LIST_OFFSETS, version, body)
            got: dict[int, int | None] = {}
            for t in resp.topics:
                for pr in t.partitions:
                    got[pr.partition_index] = None if pr.error_code else pr.offset
            return got

        merged: dict[int, int | None] = {}
        for r in await asyncio.gather(*(one(n, ps) for n, ps in by_leader.items())):
            merged.update(r)
        return merged

    async def list_groups(self) -> list[GroupListing]:
        """Every group, from every broker (each lists the groups it coordinates), by id."""
        info = await self.cluster([])
        nodes: Sequence[int | None] = sorted(info.brokers) or [None]

        async def one(node: int | None) -> list[GroupListing]:
            resp = await self.client.request(ApiKey.LIST_GROUPS, {}, node=node)
            if resp.error_code:
                raise KafkaError(resp.error_code, "ListGroups")
            return [GroupListing(g.group_id, _text(g.protocol_type), _text(getattr(g, "group_state", "")),
                                 _text(getattr(g, "group_type", ""))) for g in resp.groups]

        seen: dict[str, GroupListing] = {}
        for listed in await asyncio.gather(*(one(n) for n in nodes)):
            for g in listed:
                seen.setdefault(g.group_id, g)
        return [seen[k] for k in sorted(seen)]

    async def find_coordinator(self, group: str) -> Broker:
        node = await self.client.coordinator(group)
        host, port = self.client.metadata_cache.brokers[node]
        return Broker(node, host, port)

    async def describe_group(self, group: str) -> GroupDescription:
        coordinator = await self.find_coordinator(group)
        version = self.version(ApiKey.DESCRIBE_GROUPS)
        conn = await self.client.connection(coordinator.node_id)
        resp = await conn.request(ApiKey.DESCRIBE_GROUPS, version, {"groups": [group]})
        g = resp.groups[0]
        members = []
        consumer = _text(g.protocol_type) in ("consumer", "")
        for m in g.members:
            members.append(GroupMember(
                _text(m.member_id), _text(m.client_id), _text(m.client_host).lstrip("/"),
                getattr(m, "group_instance_id", None),
                decode_assignment(m.member_assignment) if consumer else {}))
        desc = GroupDescription(group, _text(g.group_state), _text(g.protocol_type), _text(g.protocol_data),
                                members, coordinator, g.error_code)
        if desc.protocol_type == "share" and self.has(ApiKey.SHARE_GROUP_DESCRIBE):
            return await self._describe_new(ApiKey.SHARE_GROUP_DESCRIBE, desc, conn, "share")
        if desc.protocol_type == "consumer" and self.has(ApiKey.CONSUMER_GROUP_DESCRIBE):
            return await self._describe_new(ApiKey.CONSUMER_GROUP_DESCRIBE, desc, conn, "consumer")
        return desc

    async def _describe_new(self, key: int, desc: GroupDescription, conn: KafkaConnection,
                            group_type: str) -> GroupDescription:
        """Members and assignments of a KIP-848 / KIP-932 group (DescribeGroups has no assignment
        for them); a classic group answers GROUP_ID_NOT_FOUND and keeps `desc`."""
        resp = await conn.request(key, self.version(key), {"group_ids": [desc.group]})
        g = resp.groups[0]
        if g.error_code:
            return desc
        members = [
            GroupMember(_text(m.member_id), _text(m.client_id), _text(m.client_host).lstrip("/"),
                        getattr(m, "instance_id", None),
                        {_text(tp.topic_name): sorted(tp.partitions) for tp in m.assignment.topic_partitions})
            for m in g.members
        ]
        return GroupDescription(desc.group, _text(g.group_state), desc.protocol_type, _text(g.assignor_name),
                                members, desc.coordinator, 0, group_type)

    async def share_offsets(self, group: str, coordinator: Broker) -> dict[tuple[str, int], ShareOffset]:
        """Start offset (and pylog's in-flight / acquired counts) of every share partition of `group`:
        pylog brokers answer PylogShareGroupState, others DescribeShareGroupOffsets (no counts)."""
        conn = await self.client.connection(coordinator.node_id)
        out = {}
        if PylogApiKey.SHARE_GROUP_STATE in conn.versions:
            resp = await conn.request(PylogApiKey.SHARE_GROUP_STATE, 0, {"group_id": group})
            if resp.error_code:
                raise KafkaError(resp.error_code, f"PylogShareGroupState for group {group!r}")
            for t in resp.topics:
                for sp in t.partitions:
                    if not sp.error_code and sp.start_offset >= 0:
                        out[(_text(t.topic_name), sp.partition_index)] = ShareOffset(
                            sp.start_offset, sp.in_flight_records if sp.in_flight_records >= 0 else None,
                            sp.acquired_records if sp.acquired_records >= 0 else None)
            return out
        key = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS
        resp = await conn.request(key, self.version(key), {"groups": [{"group_id": group, "topics": None}]})
        g = resp.groups[0]
        if g.error_code:
            raise KafkaError(g.error_code, f"DescribeShareGroupOffsets for group {group!r}")
        for t in g.topics:
            for p in t.partitions:
                if not p.error_code and p.start_offset >= 0:
                    out[(_text(t.topic_name), p.partition_index)] = ShareOffset(p.start_offset, None, None)
        return out

    async def committed_offsets(self, group: str, coordinator: Broker) -> dict[tuple[str, int], int]:
        """{(topic, partition): committed offset} of every partition the group has committed."""
        version = self.version(ApiKey.OFFSET_FETCH)
        conn = await self.client.connection(coordinator.node_id)
        if version >= 8:
            body: dict[str, Any] = {"groups": [{"group_id": group, "topics": None}], "require_stable": False}
        elif version >= 2:
            body = {"group_id": group, "topics": None}
        else:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "OffsetFetch",
                             "v2+ is needed to fetch all topics")
        resp = await conn.request(ApiKey.OFFSET_FETCH, version, body)
        if version >= 8:
            g = resp.groups[0]
            code, topics = g.error_code, g.topics
        else:
            code, topics = resp.error_code, resp.topics
        if code:
            raise KafkaError(code, f"OffsetFetch for group {group!r}")
        out = {}
        for t in topics:
            for p in t.partitions:
                if not p.error_code and p.committed_offset >= 0:
                    out[(t.name, p.partition_index)] = p.committed_offset
        return out

    async def log_dir_sizes(self, topic: str) -> dict[int, int] | None:
        """{partition: bytes on disk} from DescribeLogDirs (summed over brokers' leader replicas), or
        None when the broker does not offer the API."""
        if not self.has(ApiKey.DESCRIBE_LOG_DIRS):
            return None
        version = self.version(ApiKey.DESCRIBE_LOG_DIRS)
        info = await self.cluster([topic])
        parts = info.topics.get(topic, {})
        sizes: dict[int, int] = {}
        for node in sorted({p.leader for p in parts.values() if p.leader >= 0}):
            conn = await self.client.connection(node)
            body = {"topics": [{"topic": topic, "partitions": sorted(p for p, i in parts.items()
                                                                     if i.leader == node)}]}
            resp = await conn.request(ApiKey.DESCRIBE_LOG_DIRS, version, body)
            for result in resp.results:
                if result.error_code:
                    continue
                for t in result.topics:
                    for p in t.partitions:
                        if t.name == topic and not p.is_future_key:
                            sizes[p.partition_index] = sizes.get(p.partition_index, 0) + p.partition_size
        return sizes


    async def commit_offsets(self, group: str, offsets: Mapping[tuple[str, int], int]
                             ) -> dict[tuple[str, int], int]:
        """OffsetCommit as an admin does it (no generation, no member: the group must be empty);
        {(topic, partition): error code}."""
        node = await self.client.coordinator(group)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(
                {"partition_index": partition, "committed_offset": offset, "committed_leader_epoch": -1,
                 "committed_metadata": ""})
        body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None, "retention_time_ms": -1,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
        resp = await self.client.request(ApiKey.OFFSET_COMMIT, body, node=node)
        return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    async def topic_configs(self, topics: Sequence[str]) -> dict[str, dict[str, tuple[str | None, str]]]:
        """{topic: {config: (value, source)}} of every config (DescribeConfigs); sources by
        Kafka's names (DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG, ...)."""
        body = {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": t,
                               "configuration_keys": None} for t in topics],
                "include_synonyms": False, "include_documentation": False}
        resp = await self.client.request(ApiKey.DESCRIBE_CONFIGS, body)
        out: dict[str, dict[str, tuple[str | None, str]]] = {}
        for r in resp.results:
            if r.error_code:
                raise KafkaError(r.error_code, f"DescribeConfigs {r.resource_name!r}", r.error_message)
            out[r.resource_name] = {c.name: (c.value, _source(c.config_source)) for c in r.configs}
        return out

    async def broker_configs(self, broker_id: int) -> dict[str, str | None]:
        """{config: value} of one broker (DescribeConfigs of its BROKER resource, asked of it)."""
        body = {"resources": [{"resource_type": BROKER_RESOURCE, "resource_name": str(broker_id),
                               "configuration_keys": None}],
                "include_synonyms": False, "include_documentation": False}
        resp = await self.client.request(ApiKey.DESCRIBE_CONFIGS, body, node=broker_id)
        out: dict[str, str | None] = {}
        for r in resp.results:
            if r.error_code:
                raise KafkaError(r.error_code, f"DescribeConfigs broker {broker_id}", r.error_message)
            out.update({c.name: c.value for c in r.configs})
        return out

    async def create_topics(self, topics: Mapping[str, tuple[int, int, Mapping[str, str]]]
                            ) -> list[tuple[str, int, str | None]]:
        """CreateTopics for {name: (partitions, replication factor, configs)} (-1: the broker's
        default); [(name, error code, error message)]."""
        body = {"topics": [{"name": name, "num_partitions": n, "replication_factor": rf, "assignments": [],
                            "configs": [{"name": k, "value": v} for k, v in configs.items()]}
                           for name, (n, rf, configs) in topics.items()],
                "timeout_ms": ADMIN_TIMEOUT_MS, "validate_only": False}
        resp = await self.client.request(ApiKey.CREATE_TOPICS, body)
        return [(t.name, t.error_code, getattr(t, "error_message", None)) for t in resp.topics]

    async def delete_topics(self, topics: Sequence[str]) -> list[tuple[str, int, str | None]]:
        """DeleteTopics; [(name, error code, error message)]."""
        if self.version(ApiKey.DELETE_TOPICS) >= 6:
            body: dict[str, Any] = {"topics": [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
                                    "timeout_ms": ADMIN_TIMEOUT_MS}
        else:
            body = {"topic_names": list(topics), "timeout_ms": ADMIN_TIMEOUT_MS}
        resp = await self.client.request(ApiKey.DELETE_TOPICS, body)
        return [(r.name, r.error_code, getattr(r, "error_message", None)) for r in resp.responses]


def _source(code: int) -> str:
    return ConfigSource(code).name if code in ConfigSource._value2member_map_ else str(code)


class Admin:
    """Blocking `AsyncAdmin`: one client, reused across calls; a context manager."""

    def __init__(self, bootstrap_servers: str | Sequence[str], **kwargs: Any) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.aio = AsyncAdmin(bootstrap_servers, **kwargs)

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, make: Any) -> Any:
        """Run ``make(async_admin)`` (a coroutine function) on the SDK's I/O loop, started first."""
        async def go() -> Any:
            await self.aio.start()
            return await make(self.aio)
        return _run(go())

    def close(self) -> None:
        _run(self.aio.close())


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return aio.run(coro)
