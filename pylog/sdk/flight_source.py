"""Reading a topic over Arrow Flight: the brokers' stored Arrow batches, not re-encoded as Kafka batches.

A pylog broker with ``pylog.flight.listeners`` serves its topics over Flight. GetFlightInfo on any
broker answers one endpoint per partition at the Flight server of its leader; the broker that leads a
partition resolves its bounds (offsets, timestamps, the readable end) when asked GetFlightInfo
itself, so offsets are planned by asking each leader for its own partitions. The records are then
read with a few DoGet streams per broker at a time (`STREAMS_PER_BROKER`, a partition each), the
brokers in parallel.

Where Flight is: ``flight=`` (a ``grpc://`` / ``grpc+tls://`` URL of any broker), else the first
broker that names ``pylog.flight.listeners`` in its configs (DescribeConfigs; a wildcard host is
replaced by that broker's Kafka host). ``security``'s SASL user and password go to Flight's basic
authentication, its CA file (``ssl.ca.location``) to ``grpc+tls``.
"""

from __future__ import annotations

import base64
import collections
import json
import queue
import re
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pyarrow as pa

from pylog.sdk.offsets import PartitionRange, UnknownTopicError, parse_offsets, parse_timestamps
from pylog.sdk.schema import STORED_TIMESTAMP_TYPE

if TYPE_CHECKING:
    import pyarrow.flight as flight

    from pylog.sdk.options import ReadOptions

FLIGHT_LISTENERS = "pylog.flight.listeners"  # the broker config naming its Flight addresses
TICKET_VERSION = 1  # pylog's Flight tickets (JSON, see pylog.flight.tickets)
READ_COMMITTED = "read_committed"
_QUEUED_BATCHES = 16  # batches read ahead per read, all brokers together
# DoGet streams a read keeps open at once per broker, each on a partition of its own: the broker
# reads one partition's segments while the client decodes another's batches
STREAMS_PER_BROKER = 3
NOT_LED = "ask GetFlightInfo again"  # a DoGet at a broker that no longer leads the partition
OUT_OF_RANGE = "offset out of range"  # opens the answer to a read outside the partition's log
_MOVED_RETRIES = 5  # times a range is asked again after its leader moved or was not readable yet
_MOVED_BACKOFF_S = 0.1  # the wait before asking again grows by this much each time
_DONE = object()
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----.*?-----END \1-----", re.S)


class FlightReadError(RuntimeError):
    """A Flight call failed; the message is the broker's."""


def flight_source(options: ReadOptions, tiered: bool) -> FlightTopicSource | None:
    """The Flight source for `options` (a read through ``bootstrap_servers``), or None to read
    through the Kafka protocol: ``transport="kafka"``, or ``"auto"`` when the cluster serves no
    Flight or the read takes the topic's remote tier straight from its store (`tiered`: a store this
    client reaches, so the brokers serve the tail only). Flight serves the remote tier too, so
    ``transport="flight"`` reads a tiered topic whole through the brokers."""
    if options.transport == "kafka" or (options.transport == "auto" and tiered):
        return None
    url = flight_location(options)
    if url is None:
        if options.transport == "flight":
            raise ValueError(f"transport='flight': {options.where()} serves no Arrow Flight (no broker "
                             f"names {FLIGHT_LISTENERS}); pass flight='grpc://HOST:PORT' or "
                             f"transport='kafka'")
        return None
    return FlightTopicSource(url, options)


def flight_location(options: ReadOptions) -> str | None:
    """``flight=``, else the address the brokers advertise (asked once per options object)."""
    if options.flight is not None:
        return options.flight
    found = options.discovered.get("flight", _DONE)
    if found is _DONE:
        found = discover_flight(options.bootstrap_servers, options.security)
        options.discovered["flight"] = found
    return found if isinstance(found, str) else None


def discover_flight(bootstrap_servers: Any, security: Any = None) -> str | None:
    """The first Flight address a broker of the cluster names in ``pylog.flight.listeners``, or
    None (no broker serves Flight, or the cluster does not answer DescribeConfigs)."""
    from pylog.sdk.admin import Admin
    from pylog.sdk.client import KafkaError

    async def ask(admin: Any) -> str | None:
        info = await admin.cluster([])
        for node in sorted(info.brokers):
            url = advertised_flight((await admin.broker_configs(node)).get(FLIGHT_LISTENERS),
                                    info.brokers[node].host)
            if url is not None:
                return url
        return None

    try:
        with Admin(bootstrap_servers, security=security) as admin:
            return admin.run(ask)
    except (KafkaError, OSError, TimeoutError):
        return None


def advertised_flight(listeners: str | None, kafka_host: str) -> str | None:
    """The first usable address of a ``pylog.flight.listeners`` value: a wildcard host becomes the
    broker's Kafka host; an address with port 0 (chosen at start, unknown here) is skipped."""
    for raw in (listeners or "").split(","):
        parts = urlsplit(raw.strip())
        if parts.scheme not in ("grpc", "grpc+tls") or not parts.port:
            continue
        host = parts.hostname or ""
        if host in ("", "0.0.0.0", "::"):
            host = kafka_host
        return f"{parts.scheme}://{f'[{host}]' if ':' in host else host}:{parts.port}"
    return None


def ticket(topic: str, partition: int, start: int, end: int, columns: Sequence[str],
           max_wait_ms: int | None = None) -> bytes:
    """A DoGet ticket for ``[start, end)`` of one partition (the server checks it like any other);
    with ``max_wait_ms``, a tailing read: at most up to ``end``, waiting that long for records."""
    doc: dict[str, Any] = {"v": TICKET_VERSION, "topic": topic, "partition": partition, "start": start,
                           "end": end, "start_timestamp": None, "end_timestamp": None,
                           "columns": list(columns), "isolation": READ_COMMITTED}
    if max_wait_ms is not None:
        doc["max_wait_ms"] = max_wait_ms
    return json.dumps(doc, separators=(",", ":")).encode()


@dataclass(frozen=True)
class TailEnd:
    """The metadata ending a tailing DoGet: the offset the next read starts at, and the partition's
    readable end (high watermark, or last stable offset) when the read was planned."""

    next_offset: int
    readable_end: int

    def encode(self) -> bytes:
        return json.dumps({"next_offset": self.next_offset, "readable_end": self.readable_end}).encode()

    @classmethod
    def decode(cls, raw: bytes) -> TailEnd:
        doc = json.loads(raw)
        return cls(int(doc["next_offset"]), int(doc["readable_end"]))


def _ticket_range(raw: bytes) -> tuple[int, int | None, int | None]:
    doc = json.loads(raw)
    return int(doc["partition"]), doc.get("start"), doc.get("end")


class FlightTopicSource:
    """`OffsetSource` + reader over the brokers' Flight servers (a `pylog.sdk.scan.TopicSource`)."""

    def __init__(self, url: str, options: ReadOptions) -> None:
        import pyarrow.flight as flight

        self.url = url
        self._flight = flight
        security = options.fetch.security if options.fetch is not None else None
        headers = []
        if security is not None and security.uses_sasl and security.username is not None:
            secret = base64.b64encode(f"{security.username}:{security.password or ''}".encode())
            headers.append((b"authorization", b"Basic " + secret))
        timeout = options.fetch.request_timeout_s if options.fetch is not None else 30.0
        self._call = flight.FlightCallOptions(headers=headers, timeout=timeout)
        raw = options.security or {}
        self._ca = _setting(raw, "ssl.ca.location", "ssl.cafile", "ssl.truststore.location")
        # a client certificate, for a broker whose TLS listener asks for one (ssl.client.auth)
        self._cert = _setting(raw, "ssl.certificate.location", "ssl.certfile", "ssl.keystore.location")
        self._key = _setting(raw, "ssl.key.location", "ssl.keyfile") or self._cert
        self._clients: dict[str, flight.FlightClient] = {}
        self._lock = threading.Lock()
        self._options = options
        self._where: dict[str, dict[int, str]] = {}  # topic -> partition -> its leader's Flight URL
        # topic -> the ranges resolved by the answer `_where` came from, used by the next
        # `offset_bounds` (a read asks for the partitions, then at once for their bounds)
        self._fresh: dict[str, dict[int, tuple[str, int, int]]] = {}

    # --- calls ---------------------------------------------------------------------------------

    def _client(self, location: str) -> flight.FlightClient:
        with self._lock:
            client = self._clients.get(location)
            if client is None:
                tls: dict[str, bytes] = {}
                if location.startswith("grpc+tls") and self._ca is not None:
                    with open(self._ca, "rb") as f:
                        tls["tls_root_certs"] = f.read()
                if location.startswith("grpc+tls") and self._cert is not None and self._key is not None:
                    tls["cert_chain"] = _pem(self._cert, "CERTIFICATE")
                    tls["private_key"] = _pem(self._key, "PRIVATE KEY")
                client = self._clients[location] = self._flight.FlightClient(location, **tls)
            return client

    def _info(self, location: str, topic: str, **command: Any
              ) -> dict[int, tuple[str, int | None, int | None]]:
        """{partition: (location, start, end)} as the broker at `location` plans the read (start /
        end are None where another broker leads the partition)."""
        flight = self._flight
        descriptor = flight.FlightDescriptor.for_command(json.dumps({"topic": topic, **command}).encode())
        try:
            info = self._client(location).get_flight_info(descriptor, self._call)
        except flight.FlightServerError as exc:
            message = _message(exc)
            if message.startswith("unknown topic") or " has partitions " in message:
                raise UnknownTopicError(message) from None
            raise FlightReadError(f"GetFlightInfo of {topic!r} at {location}: {message}") from None
        except flight.FlightError as exc:
            raise FlightReadError(f"GetFlightInfo of {topic!r} at {location}: {_message(exc)}") from None
        out = {}
        for ep in info.endpoints:
            p, start, end = _ticket_range(ep.ticket.ticket)
            out[p] = (ep.locations[0].uri.decode() if ep.locations else location, start, end)
        return out

    def _resolved(self, topic: str, partitions: list[int], **bounds: Any
                  ) -> dict[int, tuple[str, int, int]]:
        """{partition: (leader's Flight URL, start, end)} resolved by each partition's leader."""
        where = self._leaders(topic)
        fresh = self._fresh.pop(topic, {})
        out = {p: fresh[p] for p in partitions if p in fresh} if not bounds else {}
        for _ in range(3):
            by_location: dict[str, list[int]] = {}
            for p in partitions:
                if p not in out:
                    by_location.setdefault(where[p], []).append(p)
            for location, ps in by_location.items():
                for p, (at, start, end) in self._info(location, topic, partitions=ps, **bounds).items():
                    if start is not None and end is not None:
                        out[p] = (at, start, end)
            if len(out) == len(partitions):
                return out
            where = self._leaders(topic, refresh=True)  # a leader moved: ask where they are now
        missing = sorted(set(partitions) - set(out))
        raise FlightReadError(f"{topic} partitions {missing}: no broker resolved their range over Flight")

    def place(self, topic: str, partition: int, location: str) -> None:
        """Read `partition` from `location` (a planner's endpoint, e.g. a Spark task's) without asking
        GetFlightInfo first; a location that no longer leads it is asked again when read."""
        self._where.setdefault(topic, {})[partition] = location

    def locations(self, topic: str) -> dict[int, str]:
        """{partition: the Flight URL of the broker that serves it} (its endpoint's location)."""
        return dict(self._leaders(topic))

    def _location(self, topic: str, partition: int, refresh: bool = False) -> str:
        where = self._where.get(topic, {})
        if refresh or partition not in where:
            where = self._leaders(topic, refresh=True)
        if partition not in where and self._asked(topic) is not None:  # not one the read chose
            info = self._info(self.url, topic, partitions=[partition])
            where.update({p: at for p, (at, _, _) in info.items()})
        if partition not in where:
            raise FlightReadError(f"{topic} has no partition {partition} over Flight")
        return where[partition]

    def _leaders(self, topic: str, refresh: bool = False) -> dict[int, str]:
        if refresh or topic not in self._where:
            asked = self._asked(topic)
            info = self._info(self.url, topic, **({} if asked is None else {"partitions": asked}))
            self._where[topic] = {p: at for p, (at, _, _) in info.items()}
            self._fresh[topic] = {p: (at, start, end) for p, (at, start, end) in info.items()
                                  if start is not None and end is not None}
        return self._where[topic]

    def _asked(self, topic: str) -> list[int] | None:
        """The partitions a read of chosen ``partitions`` asks GetFlightInfo about (those and any its
        bounds name), so a broker plans only them; None: the whole topic."""
        if self._options.partitions is None:
            return None
        asked = set(self._options.partitions)
        for name, spec in self._options.bounds().items():
            parsed = parse_timestamps(spec, topic, name=name) if name.endswith("timestamp") else \
                parse_offsets(spec, topic, name=name)
            if isinstance(parsed, dict):
                asked.update(parsed)
        return sorted(asked)

    # --- OffsetSource --------------------------------------------------------------------------

    def partitions(self, topic: str) -> list[int]:
        return sorted(self._leaders(topic))

    def offset_bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        return {p: (start, end) for p, (_, start, end) in self._resolved(topic, partitions).items()}

    def offsets_for_times(self, topic: str, times: dict[int, int]) -> dict[int, int | None]:
        """The leaders resolve ``start_timestamp``: no later record resolves to the readable end,
        which the read treats as "none" does."""
        out: dict[int, int | None] = {}
        by_time: dict[int, list[int]] = {}
        for p, ts in times.items():
            by_time.setdefault(ts, []).append(p)
        for ts, ps in by_time.items():
            for p, (_, start, _) in self._resolved(topic, sorted(ps), start_timestamp=max(ts, 0)).items():
                out[p] = start
        return out

    # --- reading -------------------------------------------------------------------------------

    def read(self, ranges: list[PartitionRange], columns: Sequence[str]
             ) -> Iterator[tuple[PartitionRange, pa.RecordBatch]]:
        """Each range's batches (in order within a range, ranges interleaved): up to
        `STREAMS_PER_BROKER` DoGets at a time per broker, the brokers in parallel. A range whose
        broker no longer leads it (a leader change) or is down is asked again from its new leader, before
        any of its rows was read."""
        ranges = [r for r in ranges if r.count > 0]
        if not ranges:
            return
        asked = list(columns) or ["offset"]  # a ticket names at least one column
        by_location: dict[str, list[PartitionRange]] = {}
        for r in ranges:
            by_location.setdefault(self._location(r.topic, r.partition), []).append(r)
        out: queue.Queue[Any] = queue.Queue(maxsize=_QUEUED_BATCHES)
        stop = threading.Event()

        def put(item: Any) -> bool:
            while not stop.is_set():
                try:
                    out.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def stream(location: str, mine: collections.deque[PartitionRange]) -> None:
            try:
                while True:
                    try:
                        r = mine.popleft()  # the next range of this broker no stream has taken
                    except IndexError:
                        return
                    at = location
                    for attempt in range(_MOVED_RETRIES + 1):
                        raw = ticket(r.topic, r.partition, r.start, r.end, asked)
                        try:
                            reader = self._client(at).do_get(self._flight.Ticket(raw), self._call)
                            first = reader.read_chunk()  # a moved partition fails here, before any row
                        except (self._flight.FlightServerError, self._flight.FlightUnavailableError) as exc:
                            gone = isinstance(exc, self._flight.FlightUnavailableError)
                            if attempt == _MOVED_RETRIES or not (gone or NOT_LED in str(exc)):
                                raise
                            time.sleep(_MOVED_BACKOFF_S * (attempt + 1))  # a new leader catching up
                            at = self._location(r.topic, r.partition, refresh=True)
                            continue
                        except StopIteration:
                            break
                        if not put((r, _stored(first.data, columns))):
                            reader.cancel()
                            return
                        for chunk in reader:
                            if not put((r, _stored(chunk.data, columns))):
                                reader.cancel()
                                return
                        break
            except BaseException as exc:  # handed to the reading thread
                put(exc)
            finally:
                put(_DONE)

        threads = []
        for loc, mine in by_location.items():
            todo = collections.deque(mine)
            threads += [threading.Thread(target=stream, args=(loc, todo), name=f"flight-read {loc}",
                                         daemon=True)
                        for _ in range(min(STREAMS_PER_BROKER, len(mine)))]
        for t in threads:
            t.start()
        running = len(threads)
        try:
            while running:
                item = out.get()
                if item is _DONE:
                    running -= 1
                elif isinstance(item, BaseException):
                    raise _readable(item, self._flight)
                else:
                    yield item
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=5)

    def tail(self, topic: str, partition: int, start: int, end: int, columns: Sequence[str], wait_ms: int,
             *, relocate: bool = False) -> tuple[list[pa.RecordBatch], TailEnd]:
        """One tailing DoGet at the partition's leader (``relocate``: asked where it is first): the
        batches of ``[start, at most end)`` readable within ``wait_ms``, and where to go on."""
        at = self._location(topic, partition, refresh=relocate)
        raw = ticket(topic, partition, start, end, list(columns) or ["offset"], max_wait_ms=wait_ms)
        batches, tail_end = [], None
        for chunk in self._client(at).do_get(self._flight.Ticket(raw), self._call):
            if chunk.app_metadata is not None:
                tail_end = TailEnd.decode(chunk.app_metadata.to_pybytes())
            if chunk.data.num_rows:
                batches.append(_stored(chunk.data, columns))
        if tail_end is None:
            raise FlightReadError(f"the tailing read of {topic}-{partition} at {at} ended without its end")
        return batches, tail_end

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            c.close()

    def __enter__(self) -> FlightTopicSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _setting(raw: Any, *names: str) -> str | None:
    """The first of ``names`` set in a client security dict."""
    return next((str(raw[k]) for k in names if isinstance(raw, dict) and raw.get(k)), None)


def _pem(path: str, kind: str) -> bytes:
    """The PEM blocks of `kind` (``CERTIFICATE``; ``PRIVATE KEY`` matches any private key) in a file
    that may hold both a certificate chain and its key."""
    with open(path, encoding="ascii", errors="replace") as f:
        text = f.read()
    found = [m.group(0) for m in _PEM_BLOCK.finditer(text)
             if (m.group(1) == kind if kind == "CERTIFICATE" else kind in m.group(1))]
    if not found:
        raise ValueError(f"{path} holds no {kind} in PEM")
    return "\n".join(found).encode()


def _stored(batch: pa.RecordBatch, columns: Sequence[str]) -> pa.RecordBatch:
    """A DoGet batch as the SDK's sources yield them: the asked columns, timestamps as stored."""
    if not columns:
        return batch.select([])
    i = batch.schema.get_field_index("timestamp")
    if i >= 0 and batch.schema.field(i).type != STORED_TIMESTAMP_TYPE:
        batch = batch.set_column(i, pa.field("timestamp", STORED_TIMESTAMP_TYPE),
                                 batch.column(i).view(STORED_TIMESTAMP_TYPE))
    return batch


def _message(exc: Exception) -> str:
    """A Flight error's own message, without gRPC's detail suffix."""
    text = str(exc)
    return text.split(". Detail:", 1)[0].split(". gRPC client debug context:", 1)[0]


def _readable(exc: BaseException, flight: Any) -> BaseException:
    if isinstance(exc, flight.FlightError):
        return FlightReadError(f"reading over Arrow Flight: {_message(exc)}")
    return exc
