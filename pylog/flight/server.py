"""The broker's Arrow Flight server: GetFlightInfo plans a topic read, DoGet streams one partition's
records from the local segments, DoPut produces an Arrow stream to a topic.

pyarrow.flight serves on its own gRPC threads; nothing here touches the broker's event loop. Reads
open the partitions' directories read-only (``pylog.sdk``'s data-directory source, as
``pylog.read_topic(data_dir=...)`` does): bounded by the high watermark the broker publishes, and for
read_committed by the last stable offset, control batches and aborted transactions dropped, rows
zero-copy slices of the segments. Writes go through the node's own Kafka client (acks=all), so
they take the produce path every producer takes.

GetFlightInfo answers one endpoint per partition at the Flight server of its leader (each broker
registers its Flight address with its listeners, as ``PYLOG_FLIGHT``); the ranges of partitions led
here are resolved at once, the others' by their leader when DoGet begins.

Descriptors, tickets and actions that carry a Flight SQL message (a protobuf Any) go to
``pylog.flight.sql``; callers are authenticated by ``pylog.flight.auth`` (Basic, or the bearer
token a Handshake issues).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.flight as flight

from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.cluster.node_config import Listener
from pylog.flight.auth import AuthFactory, BearerTokens, HandshakeAuth
from pylog.flight.sources import LeaderTier, leader_source, partition_scan
from pylog.flight.tickets import (
    READ_COMMITTED,
    BadRequest,
    FlightTicket,
    ReadRequest,
    is_flight_sql,
    parse_read_request,
)
from pylog.flight.tls_front import TlsFront
from pylog.schema_registry.auth import Authenticator
from pylog.sdk.dir_source import DirTopicSource
from pylog.sdk.flight_source import NOT_LED, OUT_OF_RANGE, TailEnd
from pylog.sdk.offsets import OffsetOutOfRangeError, UnknownTopicError
from pylog.sdk.scan import TopicScan
from pylog.sdk.schema import output_columns, output_schema
from pylog.security.acl_operations import AclOperation
from pylog.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from pylog.flight.sql import Caller as SqlCaller
    from pylog.flight.sql import FlightSql

log = logging.getLogger(__name__)

AUTH_MIDDLEWARE = "pylog-auth"
# The name a broker registers its Flight server under, beside its Kafka listeners; Kafka clients
# never see it (Metadata answers the endpoints of the listener a client connected to).
FLIGHT_LISTENER = "PYLOG_FLIGHT"
SHUTDOWN_S = 5.0  # how long a broker's stop waits for Flight calls in progress
TAIL_CHECK_S = 0.02  # how often a tailing DoGet looks at the readable end while it waits


@dataclass
class FlightNode:
    """What the Flight server reads of its broker (all safe from other threads).

    ``led(topic)``: {partition: log directory} of the partitions this broker leads;
    ``leaders(topic)``: {partition: leader id} in the metadata image, None for an unknown topic;
    ``locate(node id)``: the Flight location that node registered, if any;
    ``authorize(principal, host, op, topic)``; ``produce_to``: (bootstrap servers, client
    security) of the node's own client; ``log_end(topic, partition)``: the log end offset of a
    partition this broker leads (None otherwise); ``tier(topic, partition)``: the remote segments of
    a partition this broker leads (None: nothing remote); ``readable_end(topic, partition,
    read_committed)``: its last stable offset or high watermark now, on the leader (None elsewhere)."""

    node_id: int
    led: Callable[[str], dict[int, Path]]
    leaders: Callable[[str], dict[int, int] | None]
    locate: Callable[[int], str | None]
    authorize: Callable[[KafkaPrincipal, str, int, str], bool]
    produce_to: Callable[[], tuple[str, Any]]
    authenticator: Authenticator | None = None
    acls: Callable[[], bool] = field(default=lambda: False)
    topics: Callable[[], list[str]] = field(default=lambda: [])  # the cluster's topic names
    subjects: Callable[[], set[str]] = field(default=lambda: set())  # the schema registry's live subjects
    clock: Clock = SYSTEM_CLOCK  # ages bearer tokens and held statements
    log_end: Callable[[str, int], int | None] = field(default=lambda topic, partition: None)
    tier: Callable[[str, int], LeaderTier | None] = field(default=lambda topic, partition: None)
    readable_end: Callable[[str, int, bool], int | None] = field(
        default=lambda topic, partition, committed: None)


def _peer_host(context: flight.ServerCallContext) -> str:
    """``ipv4:127.0.0.1:5555`` / ``ipv6:[::1]:5555`` -> the address."""
    peer = context.peer() or ""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return rest.rpartition(":")[0] if kind == "ipv4" else peer


class FlightService(flight.FlightServerBase):
    def __init__(self, location: str, node: FlightNode,
                 tls_certificates: list[tuple[bytes, bytes]] | None = None,
                 front: Callable[[str, int, int], TlsFront] | None = None) -> None:
        """``front(host, port, backend port)``: the TLS listener that asks for client certificates
        (`pylog.flight.tls_front`), in front of this server, which then listens on loopback."""
        tokens = BearerTokens(node.clock)
        where = urlsplit(location)
        super().__init__("grpc://127.0.0.1:0" if front is not None else location,
                         tls_certificates=tls_certificates or None, auth_handler=HandshakeAuth(),
                         middleware={AUTH_MIDDLEWARE: AuthFactory(node.authenticator, tokens,
                                                                  certificates=front is not None)})
        self.node = node
        self._sql: FlightSql | None = None  # made on the first Flight SQL call (it needs DuckDB, protobuf)
        self._sql_lock = threading.Lock()
        try:
            self.front = None if front is None else front(where.hostname or "", where.port or 0, self.port)
        except BaseException:
            self.shutdown()
            raise
        self.tls = bool(tls_certificates) or self.front is not None
        self.public_port = self.front.port if self.front is not None else self.port
        host = where.hostname or ""
        self.host = socket.getfqdn() if host in ("0.0.0.0", "::", "") else host
        self.url = flight_url(self.host, self.public_port, tls=self.tls)
        self.ready = threading.Event()  # set once the broker serves clients
        self.stopping = threading.Event()  # set when the broker stops: streams end at their next batch

    @property
    def listener(self) -> Listener:
        """This server as a listener of the broker's registration, so other brokers can point
        clients at it."""
        return Listener(FLIGHT_LISTENER, self.host, self.public_port, "SSL" if self.tls else "PLAINTEXT")

    def _check_ready(self) -> None:
        if not self.ready.is_set():
            raise flight.FlightUnavailableError(f"node {self.node.node_id} is starting")

    # --- access -----------------------------------------------------------------------------

    def _caller(self, context: flight.ServerCallContext) -> tuple[KafkaPrincipal | None, str]:
        """(principal, client host) of a call: its credentials' user, else, behind a TLS front, the
        user its client certificate maps to."""
        principal = getattr(context.get_middleware(AUTH_MIDDLEWARE), "principal", None)
        if self.front is None:
            return principal, _peer_host(context)
        relayed = self.front.caller(context.peer() or "")
        if relayed is None:
            raise flight.FlightUnauthenticatedError("this Flight server takes calls over TLS with a client "
                                                    "certificate only")
        return principal or relayed[0], relayed[1]

    def _principal(self, context: flight.ServerCallContext) -> KafkaPrincipal | None:
        return self._caller(context)[0]

    def _allowed(self, context: flight.ServerCallContext, op: int, topic: str) -> bool:
        principal, host = self._caller(context)
        if not self.node.acls():
            return True
        return bool(self.node.authorize(principal or ANONYMOUS, host, op, topic))  # open listener: anonymous

    def _require(self, context: flight.ServerCallContext, op: int, topic: str) -> None:
        self._check_ready()
        if not self._allowed(context, op, topic):
            principal = self._principal(context) or ANONYMOUS
            raise flight.FlightUnauthorizedError(
                f"User {principal} is not authorized to {AclOperation(op).name} topic {topic!r}")

    @property
    def sql(self) -> FlightSql:
        with self._sql_lock:
            if self._sql is None:
                try:
                    from pylog.flight.sql import FlightSql
                except ModuleNotFoundError as exc:
                    raise NotImplementedError(f"Flight SQL needs {exc.name}, which this broker lacks: "
                                              f"pip install 'pylog[flight]'") from None
                self._sql = FlightSql(self.node, self.node.clock)
            return self._sql

    def _sql_caller(self, context: flight.ServerCallContext) -> SqlCaller:
        self._check_ready()
        from pylog.flight.sql import Caller

        return Caller(lambda op, topic: self._allowed(context, op, topic), str(self._principal(context)))

    # --- reads ------------------------------------------------------------------------------

    def get_flight_info(self, context: flight.ServerCallContext,
                        descriptor: flight.FlightDescriptor) -> flight.FlightInfo:
        if descriptor.command and is_flight_sql(descriptor.command):
            return self.sql.flight_info(descriptor, self._sql_caller(context))
        try:
            req = parse_read_request(descriptor.path, descriptor.command)
        except BadRequest as exc:
            raise flight.FlightServerError(str(exc)) from None
        self._require(context, AclOperation.READ, req.topic)
        leaders = self.node.leaders(req.topic)
        if leaders is None:
            raise flight.FlightServerError(f"unknown topic {req.topic!r}")
        chosen = sorted(leaders) if req.partitions is None else sorted(set(req.partitions))
        missing = [p for p in chosen if p not in leaders]
        if missing:
            raise flight.FlightServerError(
                f"topic {req.topic!r} has partitions {sorted(leaders)}, not {missing}")
        led = self.node.led(req.topic)
        columns = output_columns(req.columns, False)
        sources = self._sources(req.topic, {p: led[p] for p in chosen if p in led}, req.isolation)
        try:
            return self._flight_info(descriptor, req, chosen, leaders, columns, sources)
        finally:
            for source in sources.values():
                source.close()

    def _sources(self, topic: str, led: dict[int, Path], isolation: str) -> dict[int, DirTopicSource]:
        """{partition: the source reading it}: one per log directory, opening only these partitions."""
        by_dir: dict[Path, list[int]] = {}
        for p, log_dir in led.items():
            by_dir.setdefault(log_dir, []).append(p)
        out = {}
        for log_dir, ps in by_dir.items():
            tiers = [t for t in (self.node.tier(topic, p) for p in ps) if t is not None]
            source = leader_source(topic, ps, log_dir, isolation, tiers)
            out.update(dict.fromkeys(ps, source))
        return out

    def _flight_info(self, descriptor: flight.FlightDescriptor, req: ReadRequest, chosen: list[int],
                     leaders: dict[int, int], columns: list[str],
                     sources: dict[int, DirTopicSource]) -> flight.FlightInfo:
        endpoints = []
        rows = 0
        for p in chosen:
            if p in sources:  # here: the range is resolved now, its size known
                (r,) = self._plan(req.topic, p, sources[p], req.isolation, req.start_offset, req.end_offset,
                                  req.start_timestamp, req.end_timestamp)
                ticket = FlightTicket(req.topic, p, r.start, r.end, columns, req.isolation)
                endpoints.append(flight.FlightEndpoint(ticket.encode(), [self.url]))
                rows = rows + r.count if rows >= 0 else rows
                continue
            url = self.node.locate(leaders[p])
            if url is None:
                raise flight.FlightServerError(
                    f"{req.topic}-{p} has no leader serving Arrow Flight (leader: node {leaders[p]})")
            ticket = FlightTicket(req.topic, p, req.start_offset, req.end_offset, columns, req.isolation,
                                  req.start_timestamp, req.end_timestamp)  # its leader resolves the bounds
            endpoints.append(flight.FlightEndpoint(ticket.encode(), [url]))
            rows = -1
        return flight.FlightInfo(output_schema(columns), descriptor, endpoints, rows, -1)

    def _plan(self, topic: str, partition: int, source: DirTopicSource, isolation: str, start: int | None,
              end: int | None, start_ts: int | None = None, end_ts: int | None = None) -> list[Any]:
        scan = partition_scan(topic, partition, source, isolation, start=start, end=end,
                              start_ts=start_ts, end_ts=end_ts)
        try:
            return scan.plan()
        except OffsetOutOfRangeError as exc:
            written = self.node.log_end(topic, partition)
            if start is not None and written is not None and start <= written:
                # written here but above the high watermark, as on a leader just elected whose
                # followers have not fetched yet (Kafka's OFFSET_NOT_AVAILABLE): a client asks again
                raise flight.FlightUnavailableError(
                    f"{topic}-{partition}: offset {start} is not readable yet on node {self.node.node_id} "
                    f"(its high watermark is behind its log end {written}); ask again") from None
            raise flight.FlightServerError(f"{OUT_OF_RANGE}: {exc}") from None
        except (UnknownTopicError, ValueError) as exc:
            raise flight.FlightServerError(str(exc)) from None

    def do_get(self, context: flight.ServerCallContext, ticket: flight.Ticket) -> flight.FlightDataStream:
        if is_flight_sql(ticket.ticket):
            return self.sql.do_get(ticket.ticket, self._sql_caller(context))
        try:
            t = FlightTicket.decode(ticket.ticket)
        except BadRequest as exc:
            raise flight.FlightServerError(str(exc)) from None
        self._require(context, AclOperation.READ, t.topic)
        led = self._leading(t)
        if t.max_wait_ms is not None:
            return self._tail(t, led, context)
        source = self._sources(t.topic, {t.partition: led}, t.isolation)[t.partition]
        try:
            (r,) = self._plan(t.topic, t.partition, source, t.isolation, t.start, t.end,
                              t.start_timestamp, t.end_timestamp)  # still readable; bounds resolved
        except BaseException:
            source.close()
            raise
        scan = partition_scan(t.topic, t.partition, source, t.isolation, start=r.start, end=r.end,
                              columns=t.columns)
        schema = output_schema(t.columns)
        return flight.GeneratorStream(schema, self._closing(source, self._batches(scan, t, context)))

    @staticmethod
    def _closing(source: DirTopicSource, batches: Iterator[Any]) -> Iterator[Any]:
        """`batches`, then the source they were read from closed (also when the stream ends early)."""
        try:
            yield from batches
        finally:
            source.close()

    def _leading(self, t: FlightTicket) -> Path:
        """The log directory of the ticket's partition, which this broker must lead."""
        led = self.node.led(t.topic)
        if t.partition not in led:
            raise flight.FlightServerError(
                f"{t.topic}-{t.partition} is not led by node {self.node.node_id}; {NOT_LED}")
        return led[t.partition]

    def _tail(self, t: FlightTicket, log_dir: Path,
              context: flight.ServerCallContext) -> flight.FlightDataStream:
        """A tailing read: wait up to the ticket's max wait for records at or above its start, then
        stream what is readable (up to its end at most), closed by a `TailEnd`."""
        assert t.start is not None and t.max_wait_ms is not None  # checked by FlightTicket.decode
        committed = t.isolation == READ_COMMITTED
        clock = self.node.clock
        deadline = clock.monotonic_s() + t.max_wait_ms / 1000
        while not (self.stopping.is_set() or context.is_cancelled()):
            readable = self.node.readable_end(t.topic, t.partition, committed)
            if readable is None or readable > t.start or clock.monotonic_s() >= deadline:
                break
            self.stopping.wait(min(TAIL_CHECK_S, max(0.0, deadline - clock.monotonic_s())))
        log_dir = self._leading(t)  # leadership may have moved meanwhile
        source = self._sources(t.topic, {t.partition: log_dir}, t.isolation)[t.partition]
        try:
            (r,) = self._plan(t.topic, t.partition, source, t.isolation, t.start, None)
        except BaseException:
            source.close()
            raise
        end = r.end if t.end is None else max(r.start, min(r.end, t.end))
        scan = partition_scan(t.topic, t.partition, source, t.isolation, start=r.start, end=end,
                              columns=t.columns)
        schema = output_schema(t.columns)
        closing = pa.RecordBatch.from_pylist([], schema=schema), pa.py_buffer(TailEnd(end, r.end).encode())

        def stream() -> Iterator[Any]:
            if end > r.start:
                yield from self._batches(scan, t, context)
            yield closing

        return flight.GeneratorStream(schema, self._closing(source, stream()))

    def _batches(self, scan: TopicScan, t: FlightTicket,
                 context: flight.ServerCallContext) -> Iterator[pa.RecordBatch]:
        """The ticket's rows as the scan reads them; ends when the client cancels or the broker stops."""
        try:
            for batch in scan.to_arrow_batch_reader():
                if context.is_cancelled():
                    return
                if self.stopping.is_set():
                    raise flight.FlightUnavailableError(f"node {self.node.node_id} is stopping")
                yield batch
        except FileNotFoundError as exc:
            raise flight.FlightServerError(
                f"{t.topic}-{t.partition} moved while it was read: {exc}") from None

    def list_flights(self, context: flight.ServerCallContext, criteria: bytes) -> Iterator[flight.FlightInfo]:
        return iter(())

    def get_schema(self, context: flight.ServerCallContext,
                   descriptor: flight.FlightDescriptor) -> flight.SchemaResult:
        if descriptor.command and is_flight_sql(descriptor.command):
            return flight.SchemaResult(self.sql.schema(descriptor, self._sql_caller(context)))
        return flight.SchemaResult(self.get_flight_info(context, descriptor).schema)

    def do_action(self, context: flight.ServerCallContext, action: flight.Action) -> Iterator[flight.Result]:
        """Flight SQL's actions (prepared statements)."""
        return self.sql.do_action(action, self._sql_caller(context))

    def list_actions(self, context: flight.ServerCallContext) -> list[tuple[str, str]]:
        return [("CreatePreparedStatement", "Flight SQL: prepare a query"),
                ("ClosePreparedStatement", "Flight SQL: forget a prepared query")]

    # --- writes -----------------------------------------------------------------------------

    def do_put(self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor,
               reader: flight.MetadataRecordBatchReader, writer: flight.FlightMetadataWriter) -> None:
        if descriptor.command and is_flight_sql(descriptor.command):
            raise NotImplementedError("pylog's Flight SQL is read-only: no updates, ingestion or parameters")
        try:
            req = parse_read_request(descriptor.path, descriptor.command)
        except BadRequest as exc:
            raise flight.FlightServerError(str(exc)) from None
        self._require(context, AclOperation.WRITE, req.topic)
        if self.node.leaders(req.topic) is None:
            raise flight.FlightServerError(f"unknown topic {req.topic!r}")
        table = reader.read_all()
        from pylog.sdk.writer import write_topic

        bootstrap, security = self.node.produce_to()
        try:
            result = write_topic(table, req.topic, bootstrap_servers=bootstrap, security=security)
        except (ValueError, TypeError) as exc:
            raise flight.FlightServerError(f"cannot write these rows to {req.topic!r}: {exc}") from None
        answer = {"topic": req.topic, "records": result.records,
                  "offsets": {str(p): list(r) for p, r in result.offsets.items()}}
        writer.write(pa.py_buffer(json.dumps(answer).encode()))


async def stop_flight(servers: list[FlightService], timeout_s: float = SHUTDOWN_S) -> None:
    """Shut the servers down without holding the event loop. Shutting down waits for the calls in
    progress, so it runs on daemon threads and is waited for at most ``timeout_s``: a client that
    stopped reading mid-stream cannot hold the broker's stop."""
    for server in servers:
        server.stopping.set()
        if server.front is not None:
            server.front.close()  # no new TLS connections; the relayed ones end with it
    threads = [threading.Thread(target=server.shutdown, name="flight-shutdown", daemon=True)
               for server in servers]
    for thread in threads:
        thread.start()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while any(t.is_alive() for t in threads) and loop.time() < deadline:
        await asyncio.sleep(0.05)
    for server in servers:
        if server._sql is not None:
            server._sql.close()  # the DuckDB connections of statements never fetched


def flight_url(host: str, port: int, *, tls: bool) -> str:
    return f"{'grpc+tls' if tls else 'grpc'}://{f'[{host}]' if ':' in host else host}:{port}"


def _front(context: ssl.SSLContext, rules: tuple[Any, ...], host: str, port: int, backend: int) -> TlsFront:
    return TlsFront(host, port, context, rules, backend)


def start_flight(listeners: str, node: FlightNode,
                 tls_certificates: Callable[[], list[tuple[bytes, bytes]]],
                 mutual_tls: Callable[[], tuple[ssl.SSLContext, tuple[Any, ...]] | None] = lambda: None,
                 ) -> list[FlightService]:
    """One Flight server per ``grpc://HOST:PORT`` or ``grpc+tls://HOST:PORT`` of
    ``pylog.flight.listeners`` (port 0: a free one); ``tls_certificates()``: the (certificate
    chain, private key) PEM pairs a TLS server presents; ``mutual_tls()``: when the TLS listener
    asks for client certificates, its server context and principal mapping rules (a `TlsFront`
    then terminates TLS)."""
    servers: list[FlightService] = []
    try:
        for raw in (u.strip() for u in listeners.split(",")):
            if not raw:
                continue
            scheme = urlsplit(raw).scheme
            if scheme not in ("grpc", "grpc+tls"):
                raise ValueError(f"pylog.flight.listeners: {raw!r}: expected grpc://HOST:PORT or "
                                 f"grpc+tls://HOST:PORT")
            mutual = mutual_tls() if scheme == "grpc+tls" else None
            if mutual is not None:
                servers.append(FlightService(raw, node, front=functools.partial(_front, *mutual)))
            else:
                servers.append(FlightService(raw, node, tls_certificates() if scheme == "grpc+tls" else None))
            log.info("Arrow Flight on %s%s", servers[-1].url, " (client certificates)" if mutual else "")
    except BaseException:
        for s in servers:
            if s.front is not None:
                s.front.close()
            s.shutdown()
        raise
    return servers
