"""``KafkaClient``: a cluster seen from a client. Bootstrap, versions, metadata, connections.

``start`` opens a connection to the first bootstrap broker that answers (TLS, SASL and
ApiVersions included); its ApiVersions ranges choose the versions (``version``). Requests then go
to a named broker (``connection(node_id, lane)``: lanes give one broker several independent
pipelines, so a long-polling fetch does not hold up a produce) or to any broker (``request`` with
no node). The metadata cache (`pylog.client.metadata`) resolves partition leaders and group
coordinators for every user of the client. All coroutines run on one event loop; see
`pylog.client.blocking` for the blocking face.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from pylog.client.errors import ConnectFailed, KafkaError, TransportError, UnknownTopicError
from pylog.client.metadata import ClusterMetadata, MetadataCache, TopicMetadata, from_response
from pylog.client.protocol import Channel, ConnectionSettings, KafkaConnection
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.security.client import PLAINTEXT, ClientSecurity, SaslAuthenticationError

READ_COMMITTED = 1
GROUP_KEY = 0
COORDINATOR_RETRIES = 20
RETRY_BACKOFF_S = 0.1  # retry.backoff.ms


def client_security(security: ClientSecurity | Mapping[str, Any] | None) -> ClientSecurity:
    """``security=`` as pylog's clients take it: None (PLAINTEXT), Kafka client settings, or a
    ``ClientSecurity``; raises ValueError naming a setting it does not know or cannot use."""
    if security is None:
        return PLAINTEXT
    if isinstance(security, ClientSecurity):
        return security
    if not isinstance(security, Mapping):
        raise TypeError(f"security must be a dict of Kafka client settings, got {type(security).__name__}")
    return ClientSecurity.from_config(security)


def parse_servers(bootstrap_servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """``"host:port,host2:port"`` or a list of them -> [(host, port)]."""
    items = bootstrap_servers.split(",") if isinstance(bootstrap_servers, str) else list(bootstrap_servers)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        for prefix in ("PLAINTEXT://", "plaintext://", "tcp://"):
            item = item.removeprefix(prefix)
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("bootstrap_servers is empty")
    return out


class KafkaClient:
    """Bootstrap, version negotiation, the metadata cache and per-broker connections."""

    def __init__(self, bootstrap_servers: str | Sequence[str], *, client_id: str = "pylog",
                 request_timeout_s: float = 30.0, connect_timeout_s: float | None = None,
                 security: ClientSecurity | Mapping[str, Any] | None = None) -> None:
        self.bootstrap = parse_servers(bootstrap_servers)
        self.security = client_security(security)
        self.client_id = client_id
        self.timeout_s = request_timeout_s
        self.settings = ConnectionSettings(
            client_id=client_id, security=self.security, request_timeout_s=request_timeout_s,
            connect_timeout_s=(min(request_timeout_s, 10.0) if connect_timeout_s is None
                               else connect_timeout_s))
        self.metadata_cache = MetadataCache()
        self._channels: dict[tuple[int, int], Channel] = {}
        self._bootstrap: KafkaConnection | None = None
        self._next_bootstrap = 0

    @property
    def bootstrap_text(self) -> str:
        return ", ".join(f"{h}:{p}" for h, p in self.bootstrap)

    async def start(self) -> None:
        """Connect to a bootstrap broker (each in turn until one answers)."""
        if self._bootstrap is not None and self._bootstrap.usable:
            return
        if self._bootstrap is not None:
            self._bootstrap.close_when_idle()
            self._bootstrap = None
        errors = []
        n = len(self.bootstrap)
        for i in range(n):
            host, port = self.bootstrap[(self._next_bootstrap + i) % n]
            try:
                self._bootstrap = await KafkaConnection.open(host, port, self.settings)
            except SaslAuthenticationError:
                raise  # wrong credentials are not a reason to try the next broker
            except (ConnectionError, KafkaError) as exc:
                errors.append(str(exc))
                continue
            self._next_bootstrap = (self._next_bootstrap + i + 1) % n
            return
        detail = f" ({'; '.join(errors)})" if errors else ""
        raise ConnectFailed(f"no Kafka broker reachable at {self.bootstrap_text}{detail}")

    async def close(self) -> None:
        """Close every connection (the client may be started again)."""
        channels, self._channels = list(self._channels.values()), {}
        conn, self._bootstrap = self._bootstrap, None
        if conn is not None:
            await conn.close()
        for e in channels:
            await e.aclose()

    # --- versions -----------------------------------------------------------------------------

    def version(self, api_key: int, wanted: tuple[int, int] | None = None) -> int:
        """The version of ``api_key`` to send (the bootstrap broker's ranges, pylog's codec and
        ``wanted``, by default `pylog.client.versions.WANTED`); KafkaError UNSUPPORTED_VERSION."""
        if self._bootstrap is None:
            raise ConnectionError("the client is not started")
        return self._bootstrap.version(api_key, wanted)

    def has(self, api_key: int, wanted: tuple[int, int] | None = None) -> bool:
        return self._bootstrap is not None and self._bootstrap.has(api_key, wanted)

    # --- connections --------------------------------------------------------------------------

    async def any_connection(self) -> KafkaConnection:
        """The bootstrap connection, reopened (through the next bootstrap broker) if it broke."""
        conn = self._bootstrap
        if conn is not None and conn.usable:
            return conn
        await self.start()
        assert self._bootstrap is not None
        return self._bootstrap

    async def connection(self, node_id: int, lane: int = 0) -> KafkaConnection:
        """The connection to broker ``node_id`` on ``lane``, opened (or reopened) if needed."""
        address = self.metadata_cache.brokers.get(node_id)
        if address is None:
            await self.metadata([])
            address = self.metadata_cache.brokers.get(node_id)
            if address is None:
                raise ConnectFailed(f"broker {node_id} is not in the cluster metadata")
        key = (node_id, lane)
        channel = self._channels.get(key)
        if channel is None or (channel.host, channel.port) != address:
            if channel is not None:
                await channel.aclose()
            channel = self._channels[key] = Channel(address[0], address[1], self.settings)
        return await channel.connection()

    async def request(self, api_key: int, body: Any, *, node: int | None = None,
                      wanted: tuple[int, int] | None = None, timeout_s: float | None = None,
                      retry: bool = False) -> Any:
        """One request at the version the target broker offers, to broker ``node`` or else to a
        bootstrap broker; with ``retry``, asked once more (on a fresh connection, another
        bootstrap broker) when the first got no answer: only for requests safe to repeat."""
        for attempt in (0, 1):
            conn = await (self.any_connection() if node is None else self.connection(node))
            try:
                return await conn.request(api_key, conn.version(api_key, wanted), body, timeout_s)
            except TransportError:
                if not retry or attempt:
                    raise
        raise AssertionError("unreachable")

    # --- metadata -----------------------------------------------------------------------------

    async def metadata(self, topics: list[str] | None, *, allow_auto_topic_creation: bool = False,
                       node: int | None = None) -> ClusterMetadata:
        """Metadata of ``topics`` (None: all, []: brokers only); the cache is updated."""
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": allow_auto_topic_creation}
        resp = await self.request(ApiKey.METADATA, body, node=node, retry=True)
        md = from_response(resp)
        self.metadata_cache.update(md)
        return md

    async def topic(self, topic: str, *, allow_auto_topic_creation: bool = False,
                    retries: int = 20, backoff_s: float = RETRY_BACKOFF_S) -> TopicMetadata:
        """A topic's metadata with a leader for every partition (waits out a just-created topic)."""
        for attempt in range(retries + 1):
            md = await self.metadata([topic], allow_auto_topic_creation=allow_auto_topic_creation)
            tm = md.topics.get(topic)
            code = tm.error_code if tm is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not allow_auto_topic_creation:
                break
            ready = (tm is not None and code == 0 and tm.partitions
                     and all(p.leader >= 0 for p in tm.partitions.values()))
            if ready:
                assert tm is not None
                return tm
            if attempt < retries and code in (0, ErrorCode.LEADER_NOT_AVAILABLE,
                                              ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                await asyncio.sleep(backoff_s)
                continue
            if code:
                raise KafkaError(code, f"metadata for topic {topic!r}")
        raise UnknownTopicError(f"unknown topic {topic!r} (the cluster at {self.bootstrap_text} has no "
                                "such topic)")

    async def leader(self, topic: str, partition: int) -> int:
        """The leader of a partition, from the cache or asked for."""
        node = self.metadata_cache.leader(topic, partition)
        if node is None:
            tm = await self.topic(topic)
            pm = tm.partitions.get(partition)
            if pm is None:
                raise UnknownTopicError(f"topic {topic!r} has no partition {partition}")
            node = pm.leader
        return node

    async def coordinator(self, key: str, key_type: int = GROUP_KEY, *, refresh: bool = False
                          ) -> int:
        """The node id of the coordinator of group (or transactional id) ``key``, waiting out a
        coordinator that is loading; KafkaError for any other error."""
        cached = self.metadata_cache.coordinators.get((key_type, key))
        if cached is not None and not refresh:
            return cached
        for attempt in range(COORDINATOR_RETRIES):
            conn = await self.any_connection()
            version = conn.version(ApiKey.FIND_COORDINATOR)
            if version >= 4:
                resp = await conn.request(ApiKey.FIND_COORDINATOR, version,
                                          {"key_type": key_type, "coordinator_keys": [key]})
                c = resp.coordinators[0]
                code, node, host, port = c.error_code, c.node_id, c.host, c.port
            else:
                resp = await conn.request(ApiKey.FIND_COORDINATOR, version,
                                          {"key": key, "key_type": key_type})
                code, node, host, port = resp.error_code, resp.node_id, resp.host, resp.port
            if code in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) \
                    and attempt < COORDINATOR_RETRIES - 1:
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            if code:
                raise KafkaError(code, f"FindCoordinator for {'group' if key_type == GROUP_KEY else 'key'} "
                                 f"{key!r}")
            self.metadata_cache.brokers[node] = (host, port)
            self.metadata_cache.coordinators[(key_type, key)] = node
            return node
        raise AssertionError("unreachable")

    async def list_offsets(self, topic: str, leaders: dict[int, int], times: dict[int, int], *,
                           isolation_level: int = READ_COMMITTED) -> dict[int, tuple[int, int]]:
        """{partition: (offset, timestamp)} for ListOffsets ``times`` (-2 earliest, -1 latest / LSO,
        or ms), one request per leader. Offset -1 means no record at or after the time."""
        by_leader: dict[int, list[int]] = {}
        for p in times:
            by_leader.setdefault(leaders[p], []).append(p)

        async def one(node: int, parts: list[int]) -> dict[int, tuple[int, int]]:
            wanted = [{"partition_index": p, "timestamp": times[p], "max_num_offsets": 1} for p in parts]
            body = {"replica_id": -1, "isolation_level": isolation_level,
                    "topics": [{"name": topic, "partitions": wanted}]}
            resp = await self.request(ApiKey.LIST_OFFSETS, body, node=node, wanted=(2, 7))
            got = {}
            for t in resp.topics:
                for pr in t.partitions:
                    if pr.error_code:
                        raise KafkaError(pr.error_code, f"ListOffsets {topic}-{pr.partition_index}")
                    got[pr.partition_index] = (pr.offset, pr.timestamp)
            return got

        merged: dict[int, tuple[int, int]] = {}
        for r in await asyncio.gather(*(one(n, ps) for n, ps in by_leader.items())):
            merged.update(r)
        return merged
