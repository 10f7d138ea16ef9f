"""A small asyncio Kafka client on pylog.protocol: just what reading into Arrow and producing need.

One `BrokerConnection` per (broker, lane) pipelines requests: frames go out as they are asked for and
responses are matched to requests in order (Kafka answers in request order on a connection).
`KafkaClient` bootstraps, negotiates versions with ApiVersions, and keeps the cluster's metadata.
All coroutines run on the SDK's I/O loop (see `pylog.sdk.aio`).

``security`` takes Kafka client settings (``{"security.protocol": "SASL_SSL", "sasl.mechanism":
"SCRAM-SHA-256", "sasl.username": ..., "sasl.password": ..., "ssl.ca.location": "ca.pem"}``, see
``pylog.security.client``): connections then start with TLS and authenticate before the first
request, and are replaced before a SASL session lifetime granted by the broker runs out.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pylog.protocol import api
from pylog.protocol.errors import ErrorCode
from pylog.sdk.offsets import UnknownTopicError
from pylog.security.client import PLAINTEXT, ClientSecurity, SaslAuthenticationError
from pylog.tasks import cancel_and_wait

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS = 0, 1, 2, 3, 18

# (lowest we can talk, highest we ask for): Fetch 4 brings read_committed and aborted transactions,
# ListOffsets 2 the isolation level, Produce 3 RecordBatch v2; Fetch stays <= 12 (topic names, not ids)
WANTED_VERSIONS: dict[int, tuple[int, int]] = {
    PRODUCE: (3, 9),
    FETCH: (4, 12),
    LIST_OFFSETS: (2, 7),
    METADATA: (1, 12),
    API_VERSIONS: (0, 0),
}
READ_COMMITTED = 1
CLOSE_TIMEOUT_S = 1.0  # how long closing a connection waits for its buffered bytes to leave


class KafkaError(Exception):
    """A Kafka error code answered by a broker, with where it happened."""

    def __init__(self, code: int, where: str, message: str | None = None) -> None:
        self.code = ErrorCode.of(code)
        detail = f": {message}" if message else ""
        super().__init__(f"{where}: {self.code.name} ({int(code)}){detail}")


@dataclass
class PartitionMetadata:
    partition: int
    leader: int
    error_code: int = 0


@dataclass
class TopicMetadata:
    name: str
    error_code: int
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)


@dataclass
class ClusterMetadata:
    brokers: dict[int, tuple[str, int]]
    topics: dict[str, TopicMetadata]


def client_security(security: ClientSecurity | Mapping[str, Any] | None) -> ClientSecurity:
    """``security=`` as the SDK functions take it: None (PLAINTEXT), Kafka client settings, or a
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


class BrokerConnection:
    """One TCP connection; `request` may be called concurrently, responses are matched in order."""

    def __init__(self, host: str, port: int, client_id: str, timeout_s: float,
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.host, self.port, self.client_id, self.timeout_s = host, port, client_id, timeout_s
        self.security = security
        self.session_end: float | None = None  # loop time before which to replace a SASL session
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: collections.deque[tuple[int, int, int, asyncio.Future[Any]]] = collections.deque()
        self._next_id = 0
        self._read_task: asyncio.Task[None] | None = None
        self._broken: BaseException | None = None

    async def open(self) -> None:
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, limit=1 << 20,
                                        **self.security.connect_kwargs(self.host)), self.timeout_s)
        except (OSError, asyncio.TimeoutError) as exc:
            raise ConnectionError(f"cannot connect to Kafka broker {self.host}:{self.port}: {exc}") from None
        loop = asyncio.get_running_loop()
        self._read_task = loop.create_task(self._read_loop())
        if self.security.uses_sasl:
            try:
                lifetime_ms = await self.security.authenticate(self.request)
            except SaslAuthenticationError as exc:
                await self.close()
                raise SaslAuthenticationError(
                    f"Kafka broker {self.host}:{self.port} refused the SASL credentials: {exc}") from None
            if lifetime_ms > 0:
                self.session_end = loop.time() + lifetime_ms * 0.85 / 1000

    @property
    def usable(self) -> bool:
        """Open, and not about to outlive its SASL session."""
        if self._broken is not None:
            return False
        return self.session_end is None or asyncio.get_running_loop().time() < self.session_end

    async def request(self, api_key: int, version: int, body: Any) -> Any:
        if self._broken is not None:
            raise ConnectionError(f"connection to {self.host}:{self.port} is closed: {self._broken}")
        assert self._writer is not None
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        correlation_id = self._next_id
        frame = api.encode_request(api_key, version, correlation_id, self.client_id, body)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((correlation_id, api_key, version, fut))
        self._writer.write(frame)
        await self._writer.drain()
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self.timeout_s)
        except asyncio.TimeoutError:
            self._fail(TimeoutError(f"no response from {self.host}:{self.port} within {self.timeout_s}s"))
            raise TimeoutError(f"Kafka broker {self.host}:{self.port} did not answer "
                               f"api {api_key} v{version} within {self.timeout_s}s") from None

    async def _read_loop(self) -> None:
        assert self._reader is not None
        try:
            while True:
                size = int.from_bytes(await self._reader.readexactly(4), "big", signed=True)
                if size < 0:
                    raise ConnectionError(f"negative frame size {size}")
                frame = await self._reader.readexactly(size)
                if not self._pending:
                    raise ConnectionError("response without a request")
                correlation_id, api_key, version, fut = self._pending.popleft()
                try:
                    got_id, body = api.decode_response(api_key, version, memoryview(frame))
                    if got_id != correlation_id:
                        raise ConnectionError(f"correlation id {got_id}, expected {correlation_id}")
                except Exception as exc:  # a frame we cannot read breaks the connection
                    if not fut.done():
                        fut.set_exception(exc)
                    raise
                if not fut.done():
                    fut.set_result(body)
        except asyncio.IncompleteReadError:
            self._fail(ConnectionError(f"{self.host}:{self.port} closed the connection"))
        except Exception as exc:
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        if self._broken is None:
            self._broken = exc
        while self._pending:
            *_, fut = self._pending.popleft()
            if not fut.done():
                fut.set_exception(ConnectionError(f"connection to {self.host}:{self.port} failed: {exc}"))
                fut.exception()  # a caller that gave up (cancelled) must not leave it "never retrieved"
        if self._writer is not None:
            self._writer.close()

    async def close(self) -> None:
        self._fail(ConnectionError("closed"))
        if self._read_task is not None:
            await cancel_and_wait(self._read_task)
        if self._writer is not None:
            try:  # a peer that stopped reading must not hold the close up
                await asyncio.wait_for(self._writer.wait_closed(), CLOSE_TIMEOUT_S)
            except asyncio.TimeoutError:
                self._writer.transport.abort()
            except (OSError, ConnectionError):
                pass


class KafkaClient:
    """Bootstrap, version negotiation, metadata and per-broker connections."""

    def __init__(self, bootstrap_servers: str | Sequence[str], *, client_id: str = "pylog-sdk",
                 request_timeout_s: float = 30.0,
                 security: ClientSecurity | Mapping[str, Any] | None = None) -> None:
        self.bootstrap = parse_servers(bootstrap_servers)
        self.security = client_security(security)
        self.client_id = client_id
        self.timeout_s = request_timeout_s
        self.versions: dict[int, int] = {}
        self.metadata_cache = ClusterMetadata({}, {})
        self._connections: dict[tuple[int, int], BrokerConnection] = {}
        self._connecting: dict[tuple[int, int], asyncio.Future[BrokerConnection]] = {}
        self._bootstrap_conn: BrokerConnection | None = None

    async def start(self) -> None:
        errors = []
        for host, port in self.bootstrap:
            conn = BrokerConnection(host, port, self.client_id, self.timeout_s, self.security)
            try:
                await conn.open()
                resp = await conn.request(API_VERSIONS, 0, {})
            except SaslAuthenticationError:
                raise  # wrong credentials are not a reason to try the next broker
            except (ConnectionError, TimeoutError) as exc:
                errors.append(str(exc))
                await conn.close()
                continue
            if resp.error_code:
                await conn.close()
                raise KafkaError(resp.error_code, f"ApiVersions from {host}:{port}")
            ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            self.versions = self._negotiate(ranges)
            self._bootstrap_conn = conn
            return
        where = ", ".join(f"{h}:{p}" for h, p in self.bootstrap)
        detail = f" ({'; '.join(errors)})" if errors else ""
        raise ConnectionError(f"no Kafka broker reachable at {where}{detail}")

    @staticmethod
    def _negotiate(broker: dict[int, tuple[int, int]]) -> dict[int, int]:
        codec = api.supported_versions()
        chosen = {}
        for key, (lo, hi) in WANTED_VERSIONS.items():
            if key not in broker:
                continue
            b_lo, b_hi = broker[key]
            c_lo, c_hi = codec.get(key, (lo, hi))
            version = min(hi, b_hi, c_hi)
            if version >= max(lo, b_lo, c_lo):
                chosen[key] = version
        return chosen

    def version(self, api_key: int) -> int:
        v = self.versions.get(api_key)
        if v is None:
            lo, hi = WANTED_VERSIONS[api_key]
            raise ConnectionError(f"the broker does not support Kafka API {api_key} versions {lo}-{hi}")
        return v

    async def close(self) -> None:
        conns = list(self._connections.values())
        if self._bootstrap_conn is not None:
            conns.append(self._bootstrap_conn)
        self._connections.clear()
        self._bootstrap_conn = None
        for conn in conns:
            await conn.close()

    async def connection(self, node_id: int, lane: int = 0) -> BrokerConnection:
        """The connection to a broker (lanes give one broker several concurrent request streams)."""
        key = (node_id, lane)
        conn = self._connections.get(key)
        if conn is not None and conn.usable:
            return conn
        if conn is not None:
            self._connections.pop(key, None)
            await conn.close()
        pending = self._connecting.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._connect(node_id))
            self._connecting[key] = pending
            try:
                self._connections[key] = await pending
            finally:
                self._connecting.pop(key, None)
            return self._connections[key]
        return await asyncio.shield(pending)

    async def _connect(self, node_id: int) -> BrokerConnection:
        address = self.metadata_cache.brokers.get(node_id)
        if address is None:
            await self.metadata([])
            address = self.metadata_cache.brokers.get(node_id)
            if address is None:
                raise ConnectionError(f"broker {node_id} is not in the cluster metadata")
        conn = BrokerConnection(address[0], address[1], self.client_id, self.timeout_s, self.security)
        await conn.open()
        return conn

    async def any_connection(self) -> BrokerConnection:
        if self._bootstrap_conn is not None and self._bootstrap_conn.usable:
            return self._bootstrap_conn
        if self._bootstrap_conn is not None:
            await self._bootstrap_conn.close()
            self._bootstrap_conn = None
        await self.start()
        assert self._bootstrap_conn is not None
        return self._bootstrap_conn

    async def metadata(self, topics: list[str] | None, *, allow_auto_topic_creation: bool = False
                       ) -> ClusterMetadata:
        version = self.version(METADATA)
        body = {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": allow_auto_topic_creation,
        }
        resp = await (await self.any_connection()).request(METADATA, version, body)
        brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
        out = {}
        for t in resp.topics:
            tm = TopicMetadata(t.name, t.error_code)
            for p in t.partitions:
                pm = PartitionMetadata(p.partition_index, p.leader_id, p.error_code)
                tm.partitions[p.partition_index] = pm
            out[t.name] = tm
        self.metadata_cache.brokers.update(brokers)
        self.metadata_cache.topics.update(out)
        return ClusterMetadata(brokers, out)

    async def topic(self, topic: str, *, allow_auto_topic_creation: bool = False,
                    retries: int = 20, backoff_s: float = 0.1) -> TopicMetadata:
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
        raise UnknownTopicError(f"unknown topic {topic!r} (the cluster at "
                           f"{', '.join(f'{h}:{p}' for h, p in self.bootstrap)} has no such topic)")

    async def list_offsets(self, topic: str, leaders: dict[int, int], times: dict[int, int]
                           ) -> dict[int, tuple[int, int]]:
        """{partition: (offset, timestamp)} for ListOffsets `times` (-2 earliest, -1 latest/LSO, or ms),
        one request per leader, read_committed. Offset -1 means no record at or after the time."""
        by_leader: dict[int, list[int]] = {}
        for p in times:
            by_leader.setdefault(leaders[p], []).append(p)
        version = self.version(LIST_OFFSETS)

        async def one(node: int, parts: list[int]) -> dict[int, tuple[int, int]]:
            wanted = [{"partition_index": p, "timestamp": times[p]} for p in parts]
            body = {"replica_id": -1, "isolation_level": READ_COMMITTED,
                    "topics": [{"name": topic, "partitions": wanted}]}
            resp = await (await self.connection(node)).request(LIST_OFFSETS, version, body)
            got = {}
            for t in resp.topics:
                for pr in t.partitions:
                    if pr.error_code:
                        raise KafkaError(pr.error_code, f"ListOffsets {topic}-{pr.partition_index}")
                    got[pr.partition_index] = (pr.offset, pr.timestamp)
            return got

        results = await asyncio.gather(*(one(n, ps) for n, ps in by_leader.items()))
        merged: dict[int, tuple[int, int]] = {}
        for r in results:
            merged.update(r)
        return merged
