"""One client connection: frames in, handlers run, responses out in request order.

Requests are dispatched as soon as their frame is complete, in arrival order, so
the synchronous part of every handler (an append, a read) happens in request
order. A handler may return an awaitable (fetch long-poll, admin requests that
wait for the metadata quorum); its slot in the per-connection response queue
stays open and later responses queue behind it, because Kafka clients match
responses to requests by position. Reading pauses while the requests still
waiting hold ``queued.max.request.bytes`` (or ``queued.max.requests`` of them are
owed). A request the broker cannot serve (a broken frame, an unknown API) closes
the connection once the answers owed to the requests before it are written, as
a broker reading one request at a time would have written them.

Security: a TLS listener's connection arrives here after the handshake (its principal is the
client certificate's subject, or ANONYMOUS). On a SASL listener the connection's
``SaslAuthenticator`` answers SaslHandshake / SaslAuthenticate itself; until it completes only
ApiVersions is served, any other request closes the connection, and frames are bounded by
``sasl.server.max.receive.size`` (checked on the size prefix, before anything is buffered). A
failed authentication is answered after ``connection.failed.authentication.delay.ms`` (KIP-306,
so a client retrying wrong credentials cannot hammer the broker); the connection then waits a
little for the client to close it, so the client reads the answer before the end of the stream.
Once the session of a re-authenticating client (``connections.max.reauth.ms``) expires, any
request but a new SaslHandshake closes it.

Client quotas (``pylog.broker.network.throttling``): every answered request is counted against its
client's quotas; an answer that earns a throttle time leaves at once with ``throttle_time_ms`` set,
and the connection is then not read until that time has passed (KIP-219).

Request metrics (``pylog.metrics.counters``) split a request's time as Kafka does: request queue
(from the read that brought it to its dispatch), local and remote (the handler), response queue
(from its encoded answer to the write that hands it to the transport: answers owed before it, the
rest of the read being served) and response send (until the transport's buffer has drained, which
a connection whose client reads slowly checks on a backing-off timer, not per write).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket
import types
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol, cast

from pylog.protocol import api
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode, FrameTooLarge, ProtocolError, UnsupportedApi
from pylog.protocol.framing import FrameReader

from pylog.broker.network import handler_table
from pylog.broker.network.context import RequestContext
from pylog.broker.network.legacy import unsupported_version_response
from pylog.broker.network.throttling import QuotaEnforcer, with_throttle, without_records
from pylog.metrics.counters import ApiStats, ListenerStats, RequestStats
from pylog.security.principal import ANONYMOUS, KafkaPrincipal, ssl_principal
from pylog.security.sasl_server import SaslAuthenticator

if TYPE_CHECKING:
    from pylog.broker.access.audit_shell import AuditShell
    from pylog.clock import Clock
    from pylog.security.listener import ListenerSecurity


class Acceptor(Protocol):
    """What a connection needs of the listener that accepted it (`pylog.broker.network.server`'s
    ``KafkaServer``): its handlers, limits, security, counters, and admission."""

    table: handler_table.HandlerTable
    clock: Clock
    listener: str
    security: ListenerSecurity
    client_quotas: QuotaEnforcer | None
    audit: AuditShell | None
    request_stats: RequestStats
    listener_stats: ListenerStats
    max_request_bytes: int
    max_queued_requests: int
    max_queued_request_bytes: int

    def accept(self, conn: KafkaConnection, address: str) -> tuple[str, float] | None: ...

    def forget(self, conn: KafkaConnection, address: str) -> None: ...

log = logging.getLogger(__name__)

FAILED_AUTH_LINGER_S = 2.0
"""How long a connection whose authentication failed waits for the client to close it."""

DRAIN_POLL_S = (0.001, 0.05)
"""First and longest wait between checks of a transport whose buffer holds answers being sent."""

Parts = list[Any]  # a response frame as bytes-like pieces, size prefix first
Timing = tuple[ApiStats, int, int]  # an answer's request stats, when it was read, when it was ready


class _Slot:
    """A response position; ``parts`` None with ``done`` True means nothing to write."""

    __slots__ = ("done", "nbytes", "parts", "timing")

    def __init__(
        self, parts: Parts | None = None, done: bool = False, nbytes: int = 0, timing: Timing | None = None
    ) -> None:
        self.parts = parts
        self.done = done
        self.nbytes = nbytes  # the request's size, while its handler is still waiting
        self.timing = timing


_DISCARD = memoryview(bytearray(64 * 1024))
"""Where bytes go that a closing connection no longer reads."""


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, server: Acceptor) -> None:
        self.server = server
        self.clock = server.clock
        self.table = server.table
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.address = "?"
        self.security = server.security
        self.principal: KafkaPrincipal = ANONYMOUS
        self.sasl: SaslAuthenticator | None = None
        self.decoder = FrameReader(server.max_request_bytes)
        if self.security.sasl is not None:
            self.sasl = SaslAuthenticator(self.security.sasl)
            self.decoder.max_frame_bytes = min(server.max_request_bytes, self.security.max_receive_size)
        self._queue: deque[_Slot] = deque()
        self._tasks: set[asyncio.Task] = set()
        self._closing = False
        self._close_when_drained = False
        self._read_paused = False
        self._write_paused = False
        self._linger_s = 0.0
        self._waiting_bytes = 0  # requests whose handlers still wait (acks=all, long polls)
        self._unthrottle: asyncio.TimerHandle | None = None  # set while a quota throttles this client
        self._held: deque[memoryview] = deque()  # frames read but not served while throttled
        self._out: list[Any] | None = None  # responses of the read being served, sent in one write
        self.software: tuple[str | None, str | None] = (None, None)  # from ApiVersions v3+
        self.last_active = self.clock.monotonic_s()
        self._read_ns = self.clock.monotonic_ns()  # when the bytes being served were read
        self._timed: list[Timing] = []  # answers on their way to the transport's next write
        self._draining: list[tuple[Timing, int]] = []  # answers written while its buffer was not empty
        self._drain_check: asyncio.TimerHandle | None = None
        self._drain_wait_s = DRAIN_POLL_S[0]

    # --- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport subclasses
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.address = str(peer[0]) if peer else "?"
        refused = self.server.accept(self, self.address)
        if refused is not None:
            reason, hold_s = refused
            log.warning("refusing connection from %s: %s", self.peer, reason)
            self._closing = True
            if hold_s > 0:  # a connection over its creation rate is held, then closed (as Kafka does)
                transport.pause_reading()
                asyncio.get_running_loop().call_later(hold_s, transport.abort)
            else:
                transport.abort()
            return
        if self.security.ssl_context is not None and self.sasl is None:
            try:
                self.principal = ssl_principal(
                    transport.get_extra_info("peercert"), self.security.principal_rules
                )
            except PermissionError as exc:
                self.server.listener_stats.failed_authentications += 1
                log.warning("closing connection from %s: %s", self.peer, exc)
                self._audit_authentication(False, "", "SSL", str(exc))
                self.close()
                return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        if self._unthrottle is not None:
            self._unthrottle.cancel()
            self._unthrottle = None
        self.server.forget(self, self.address)
        self._held.clear()
        self._stop_drain_check()
        for task in list(self._tasks):
            task.cancel()
        self._queue.clear()

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._draining:
            self._check_drained()
        self._update_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._closing or self._close_when_drained:
            return _DISCARD  # nothing more is read from this client
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        if self._closing or self._close_when_drained:
            return
        self.last_active = self.clock.monotonic_s()
        self._read_ns = self.clock.monotonic_ns()
        try:
            frames = self.decoder.buffer_updated(nbytes)
        except ProtocolError as exc:
            tls = isinstance(exc, FrameTooLarge) and (exc.size or 0) >> 16 == 0x1603  # a ClientHello's bytes
            hint = " (a TLS handshake on a listener without TLS?)" if tls else ""
            log.warning("closing connection from %s: %s%s", self.peer, exc, hint)
            self._close_after_pending()  # requests read before the broken frame are still answered
            return
        self._serve(frames)
        try:
            self.decoder.raise_pending()  # a broken frame followed the ones just served
        except ProtocolError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            self._serve(self._take_held(), throttled=False)  # what came before it is still answered
            self._close_after_pending()
            return
        self._update_reading()

    def _serve(self, frames: list[memoryview], *, throttled: bool = True) -> None:
        """Dispatch frames in order; once a quota throttles this client the rest wait for the
        throttle to end, as if they had not been read yet (Kafka reads one request at a time)."""
        # Responses completed while handling this read leave in one write.
        out: list[Any] = []
        self._out = out
        try:
            for i, frame in enumerate(frames):
                if self._closing or self._close_when_drained:
                    break
                if throttled and self._unthrottle is not None:
                    self._held.extend(frames[i:])
                    break
                self._dispatch(frame)
        finally:
            self._out = None
            if out:
                self._send(out)

    def _take_held(self) -> list[memoryview]:
        held = list(self._held)
        self._held.clear()
        return held

    # --- dispatch ---------------------------------------------------------------------------

    def _dispatch(self, frame: memoryview) -> None:
        try:
            request = api.decode_request(frame)
        except UnsupportedApi as exc:
            self._unsupported(frame, exc)
            return
        except ProtocolError as exc:
            log.warning("closing connection from %s: malformed request: %s", self.peer, exc)
            self._close_after_pending()
            return
        except Exception:
            log.exception("closing connection from %s: request failed to decode", self.peer)
            self._close_after_pending()
            return
        header = request.header
        key, version = header.api_key, header.api_version
        spec = self.table.lookup(key)
        if spec is None or version > spec.max_version:
            log.warning("closing connection from %s: api %s v%s is not served", self.peer, key, version)
            self._close_after_pending()
            return
        if version < self.table.served_floor(key):
            self._answer_obsolete(frame, header)
            return
        if self.sasl is not None and not self._sasl_admits(key, version, header, request.body):
            return
        if key == ApiKey.API_VERSIONS and version >= 3:  # KIP-511: the client names its software
            self.software = (request.body.client_software_name, request.body.client_software_version)
        ctx = RequestContext(
            key,
            version,
            header.correlation_id,
            header.client_id,
            self.peer,
            self.server.listener,
            self.principal,
            self.security.protocol,
            client_software_name=self.software[0],
            client_software_version=self.software[1],
        )
        quotas = self.server.client_quotas
        if quotas is not None:
            quotas.before(ctx, request.body)
        started = self.clock.monotonic_ns()
        try:
            result = spec.fn(ctx, request.body)
        except Exception:
            log.exception("handler %s v%d failed for %s", spec.name, version, self.peer)
            self.server.request_stats.failed(key, ErrorCode.UNKNOWN_SERVER_ERROR)
            self._push(self._error_parts(ctx, request.body))
            return
        busy_ns = self.clock.monotonic_ns() - started
        if type(result) not in _NEVER_AWAITABLE and _awaitable(result):
            slot = _Slot(nbytes=len(frame))
            self._queue.append(slot)
            self._waiting_bytes += slot.nbytes
            task = asyncio.ensure_future(result)
            self._tasks.add(task)
            size, body = len(frame), request.body
            queue_ns = started - self._read_ns
            task.add_done_callback(
                lambda t: self._finished(t, slot, ctx, body, size, busy_ns, started, queue_ns)
            )
            return
        read_ns = self._read_ns
        if result is handler_table.NO_RESPONSE or result is handler_table.CLOSE_CONNECTION:
            if result is handler_table.NO_RESPONSE:
                self._unanswered(ctx, request.body, len(frame), busy_ns)
            else:
                self._close_after_pending()
            ready = self.clock.monotonic_ns()
            self.server.request_stats.record(
                key, version, ready - started, busy_ns, result, request.body, started - read_ns
            ).unanswered(ready - read_ns)
            return
        parts = self._respond(ctx, request.body, result, len(frame), busy_ns)
        ready = self.clock.monotonic_ns()
        stats = self.server.request_stats.record(
            key, version, ready - started, busy_ns, result, request.body, started - read_ns
        )
        self._push(parts, (stats, read_ns, ready))

    def _sasl_admits(self, key: int, version: int, header: Any, body: Any) -> bool:
        """Run SASL requests through the authenticator; say whether anything else may be served."""
        sasl = self.sasl
        assert sasl is not None
        now_ms = self.server.clock.monotonic_ms()
        if key == ApiKey.SASL_HANDSHAKE:
            answer, close = sasl.handshake(body.mechanism)
            if close:
                error = ErrorCode.of(answer["error_code"]).name
                reason = f"SASL mechanism {body.mechanism!r} refused ({error})"
                self._audit_authentication(False, "", "SASL_HANDSHAKE", reason)
        elif key == ApiKey.SASL_AUTHENTICATE and not sasl.authenticated:
            wait = sasl.wait_before(body.auth_bytes)
            if wait is None:
                self._sasl_authenticate(version, header.correlation_id, body.auth_bytes)
            else:  # an OAUTHBEARER key being fetched: answer in this request's place once it is
                slot = _Slot()
                self._queue.append(slot)
                task = asyncio.ensure_future(wait)
                self._tasks.add(task)
                auth_bytes = bytes(body.auth_bytes)
                task.add_done_callback(
                    lambda t: self._sasl_resumed(t, slot, version, header.correlation_id, auth_bytes)
                )
            return False
        elif not sasl.authenticated and not (key == ApiKey.API_VERSIONS and not sasl.in_exchange):
            log.warning("closing connection from %s: api %s before SASL authentication", self.peer, key)
            self._audit_authentication(False, "", _api_name(key), "request before SASL authentication")
            self._close_after_pending()
            return False
        elif sasl.authenticated and sasl.expired(now_ms):
            log.info("closing connection from %s: its SASL session expired", self.peer)
            self._close_after_pending()
            return False
        else:
            return True
        parts = api.encode_response_parts(key, version, header.correlation_id, answer)
        if close:
            self._answer_then_close(parts, self.security.failed_auth_delay_ms / 1000)
        else:
            self._push(parts)
        return False

    def _sasl_authenticate(self, version: int, correlation_id: int, auth_bytes: bytes) -> None:
        sasl = self.sasl
        assert sasl is not None
        clock = self.server.clock
        answer, close = sasl.authenticate(version, auth_bytes, clock.monotonic_ms(), clock.wall_ms())
        if sasl.authenticated:
            assert sasl.principal is not None
            if sasl.reauthentications:
                log.info("%s re-authenticated as %s", self.peer, sasl.principal)
            self.principal = sasl.principal
            self.decoder.max_frame_bytes = self.server.max_request_bytes
            self.server.listener_stats.successful_authentications += 1
            self._audit_authentication(True, str(sasl.principal), "SASL_AUTHENTICATE", sasl.mechanism or "")
        elif close:
            self.server.listener_stats.failed_authentications += 1
            reason = sasl.failure_reason or answer["error_message"]
            log.warning("authentication failed for %s: %s", self.peer, reason)
            self._audit_authentication(False, "", "SASL_AUTHENTICATE", f"{sasl.mechanism}: {reason}")
        parts = api.encode_response_parts(ApiKey.SASL_AUTHENTICATE, version, correlation_id, answer)
        if close:
            self._answer_then_close(parts, self.security.failed_auth_delay_ms / 1000)
        else:
            self._push(parts)

    def _audit_authentication(self, ok: bool, principal: str, operation: str, reason: str) -> None:
        audit = self.server.audit
        if audit is not None:
            audit.authenticated(ok, principal, self.address, self.server.listener, operation, reason)

    def _sasl_resumed(
        self, task: asyncio.Task, slot: _Slot, version: int, correlation_id: int, auth_bytes: bytes
    ) -> None:
        """The wait before a SaslAuthenticate ended: the placeholder goes, the answer takes its place."""
        self._tasks.discard(task)
        if self._closing or task.cancelled():
            return
        slot.done = True
        self._flush()
        self._sasl_authenticate(version, correlation_id, auth_bytes)
        self._flush()

    def _answer_then_close(self, parts: Parts, delay_s: float) -> None:
        """Read nothing more; after ``delay_s`` write ``parts`` (behind what is owed), then let the
        client close first, for at most ``FAILED_AUTH_LINGER_S``: a client that reads the answer
        and our close in one go may drop the answer and report only a lost connection."""
        self._close_when_drained = True
        slot = _Slot()
        self._queue.append(slot)
        self._update_reading()

        def answer() -> None:
            if self._closing:
                return
            slot.parts, slot.done = parts, True
            self._linger_s = FAILED_AUTH_LINGER_S
            self._flush()

        if delay_s > 0:
            asyncio.get_running_loop().call_later(delay_s, answer)
        else:
            answer()

    def _finished(
        self,
        task: asyncio.Task,
        slot: _Slot,
        ctx: RequestContext,
        body: Any,
        request_bytes: int,
        busy_ns: int,
        started_ns: int,
        queue_ns: int,
    ) -> None:
        self._tasks.discard(task)
        self._waiting_bytes -= slot.nbytes
        slot.nbytes = 0
        if self._closing or task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("handler %s v%d failed for %s", ctx.api_key, ctx.api_version, self.peer, exc_info=exc)
            self.server.request_stats.failed(ctx.api_key, ErrorCode.UNKNOWN_SERVER_ERROR)
            slot.parts = self._error_parts(ctx, body)
            if slot.parts is None:
                self.close()
                return
        else:
            result = task.result()
            read_ns = started_ns - queue_ns
            if result is handler_table.CLOSE_CONNECTION or result is handler_table.NO_RESPONSE:
                if result is handler_table.CLOSE_CONNECTION:
                    self._close_when_drained = True
                else:
                    self._unanswered(ctx, body, request_bytes, busy_ns)
                ready = self.clock.monotonic_ns()
                self.server.request_stats.record(
                    ctx.api_key, ctx.api_version, ready - started_ns, busy_ns, result, body, queue_ns
                ).unanswered(ready - read_ns)
            else:
                slot.parts = self._respond(ctx, body, result, request_bytes, busy_ns)
                ready = self.clock.monotonic_ns()
                stats = self.server.request_stats.record(
                    ctx.api_key, ctx.api_version, ready - started_ns, busy_ns, result, body, queue_ns
                )
                if slot.parts is None:
                    return
                slot.timing = (stats, read_ns, ready)
        slot.done = True
        self._flush()

    def _respond(
        self, ctx: RequestContext, req: Any, body: Any, request_bytes: int, busy_ns: int
    ) -> Parts | None:
        """The response's frame parts, after counting the request against its client's quotas: a
        throttled answer carries its throttle time (a consumer's fetch then no records) and the
        connection is muted for that long."""
        quotas = self.server.client_quotas
        if quotas is None or not quotas.active:
            return self._encode(ctx, body)
        started = self.clock.monotonic_ns()
        parts = self._encode(ctx, body)
        if parts is None:
            return None
        throttle = quotas.after(
            ctx,
            req,
            request_bytes=request_bytes,
            response_bytes=sum(p.nbytes if isinstance(p, memoryview) else len(p) for p in parts),
            busy_ns=busy_ns + self.clock.monotonic_ns() - started,
            answered=True,
        )
        if throttle <= 0:
            return parts
        self.server.request_stats.throttled(
            ctx.api_key, req, throttle, ctx.principal.name, ctx.client_id or ""
        )
        if ctx.api_key == ApiKey.FETCH:
            body = without_records(body)
        self._throttle(throttle)
        return self._encode(ctx, with_throttle(ctx.api_key, body, throttle))

    def _unanswered(self, ctx: RequestContext, req: Any, request_bytes: int, busy_ns: int) -> None:
        """A request answered by silence (acks=0 produce) still counts; a throttle mutes the client."""
        quotas = self.server.client_quotas
        if quotas is None or not quotas.active:
            return
        throttle = quotas.after(
            ctx, req, request_bytes=request_bytes, response_bytes=0, busy_ns=busy_ns, answered=False
        )
        if throttle > 0:
            self.server.request_stats.throttled(
                ctx.api_key, req, throttle, ctx.principal.name, ctx.client_id or ""
            )
            self._throttle(throttle)

    def _throttle(self, throttle_ms: int) -> None:
        """Read nothing from this client for ``throttle_ms`` (a longer throttle replaces a shorter)."""
        if self.transport is None or self._closing:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + throttle_ms / 1000
        current = self._unthrottle
        if current is not None:
            if current.when() >= until:
                return
            current.cancel()
        self._unthrottle = loop.call_at(until, self._end_throttle)
        self._update_reading()

    def _end_throttle(self) -> None:
        self._unthrottle = None
        if self._held and not self._closing:
            self._read_ns = self.clock.monotonic_ns()  # held as if unread: the throttle is its own time
            self._serve(self._take_held())
        self._update_reading()

    def _encode(self, ctx: RequestContext, body: Any) -> Parts | None:
        try:
            return api.encode_response_parts(ctx.api_key, ctx.api_version, ctx.correlation_id, body)
        except Exception:
            log.exception("response %s v%d failed to encode for %s", ctx.api_key, ctx.api_version, self.peer)
            return self._error_parts(ctx, None)

    def _push(self, parts: Parts | None, timing: Timing | None = None) -> None:
        """Queue (or write straight away) a response that is complete; None closes the connection."""
        if parts is None:
            self._close_after_pending()
            return
        if not self._queue:
            if timing is not None:
                self._timed.append(timing)
            self._write(parts)
        else:
            self._queue.append(_Slot(parts, True, timing=timing))

    def _flush(self) -> None:
        queue = self._queue
        out: Parts = []
        while queue and queue[0].done:
            slot = queue.popleft()
            if slot.parts is not None:
                out.extend(slot.parts)
                if slot.timing is not None:
                    self._timed.append(slot.timing)
        if out:
            self._write(out)
        if self._close_when_drained and not queue:
            if self._linger_s > 0:
                self._linger()
            else:
                self.close()
            return
        self._update_reading()

    def _write(self, parts: Parts) -> None:
        if self._out is not None:
            self._out.extend(parts)
        else:
            self._send(parts)

    def _send(self, parts: Parts) -> None:
        transport = self.transport
        if transport is None or self._closing:
            return
        timed = self._timed
        if not timed:
            transport.writelines(parts)
            self.last_active = self.clock.monotonic_s()
            return
        self._timed = []
        written = self.clock.monotonic_ns()
        transport.writelines(parts)
        self.last_active = self.clock.monotonic_s()
        if transport.get_write_buffer_size():  # the client reads slower than we write: sent later
            self._draining.extend((t, written) for t in timed)
            if self._drain_check is None:
                self._drain_wait_s = DRAIN_POLL_S[0]
                self._drain_check = asyncio.get_running_loop().call_later(
                    self._drain_wait_s, self._check_drained
                )
            return
        done = self.clock.monotonic_ns()
        if self._draining:  # an empty buffer: what was written before has left too
            self._sent_drained(done)
        for stats, read_ns, ready_ns in timed:
            stats.sent(read_ns, ready_ns, written, done)

    def _check_drained(self) -> None:
        """Answers written to a transport whose buffer was not empty are sent once it is."""
        self._drain_check = None
        transport = self.transport
        if transport is None or self._closing or not self._draining:
            return
        if transport.get_write_buffer_size():
            self._drain_wait_s = min(self._drain_wait_s * 2, DRAIN_POLL_S[1])
            self._drain_check = asyncio.get_running_loop().call_later(self._drain_wait_s, self._check_drained)
            return
        self._sent_drained(self.clock.monotonic_ns())

    def _sent_drained(self, done: int) -> None:
        draining, self._draining = self._draining, []
        for (stats, read_ns, ready_ns), written in draining:
            stats.sent(read_ns, ready_ns, written, done)
        self._stop_drain_check()

    def _stop_drain_check(self) -> None:
        if self._drain_check is not None:
            self._drain_check.cancel()
            self._drain_check = None
        self._draining = []

    # --- errors -----------------------------------------------------------------------------

    def _unsupported(self, frame: memoryview, exc: UnsupportedApi) -> None:
        header = exc.header
        if header is None:
            log.warning("closing connection from %s: %s", self.peer, exc)
            self._close_after_pending()
            return
        if header.api_key == ApiKey.API_VERSIONS:
            # A newer ApiVersions than we know: answer 35 in a v0 body listing what we serve.
            body = {
                "error_code": ErrorCode.UNSUPPORTED_VERSION,
                "api_keys": [
                    {"api_key": k, "min_version": lo, "max_version": hi}
                    for k, (lo, hi) in self.table.advertised.items()
                ],
            }
            self._push(api.encode_response_parts(ApiKey.API_VERSIONS, 0, header.correlation_id, body))
            return
        spec = self.table.lookup(header.api_key)
        if spec is not None and 0 <= header.api_version < self.table.served_floor(header.api_key):
            self._answer_obsolete(frame, header)
            return
        log.warning(
            "closing connection from %s: unsupported api %s v%s",
            self.peer,
            header.api_key,
            header.api_version,
        )
        self._close_after_pending()

    def _answer_obsolete(self, frame: memoryview, header: Any) -> None:
        """A version inside our advertised range that we do not serve: UNSUPPORTED_VERSION."""
        spec = self.table.lookup(header.api_key)
        error_response = spec.error_response if spec is not None else None
        parts = unsupported_version_response(frame, header, error_response)
        if parts is None:
            log.warning(
                "closing connection from %s: api %s v%s is obsolete",
                self.peer,
                header.api_key,
                header.api_version,
            )
        self._push(parts)

    def _error_parts(self, ctx: RequestContext, body: Any) -> Parts | None:
        """UNKNOWN_SERVER_ERROR for every entry of the request, or None (close instead)."""
        try:
            spec = self.table.lookup(ctx.api_key)
            if spec is None or spec.error_response is None or body is None:
                return None
            err = spec.error_response(body, ErrorCode.UNKNOWN_SERVER_ERROR)
            return api.encode_response_parts(ctx.api_key, ctx.api_version, ctx.correlation_id, err)
        except Exception:
            log.exception("no error response for api %s v%s", ctx.api_key, ctx.api_version)
            return None

    # --- flow control -----------------------------------------------------------------------

    def _close_after_pending(self) -> None:
        """Close once the responses already owed are written; read nothing more meanwhile."""
        if not self._queue:
            self.close()
            return
        self._close_when_drained = True
        self._update_reading()

    def _linger(self) -> None:
        """Everything owed is written: wait (reading and discarding) for the client's close."""
        if self.transport is None or self._closing:
            return
        asyncio.get_running_loop().call_later(self._linger_s, self.close)
        self._linger_s = 0.0
        if self._read_paused:
            self._read_paused = False
            self.transport.resume_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self._closing or (self._close_when_drained and not self._queue):
            return
        busy = (
            self._write_paused
            or self._unthrottle is not None
            or self._close_when_drained
            or len(self._queue) >= self.server.max_queued_requests
            or self._waiting_bytes >= self.server.max_queued_request_bytes
        )
        if busy and not self._read_paused:
            self._read_paused = True
            self.transport.pause_reading()
        elif not busy and self._read_paused:
            self._read_paused = False
            self.transport.resume_reading()

    @property
    def idle(self) -> bool:
        return not self._queue and not self._tasks

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        if self._unthrottle is not None:
            self._unthrottle.cancel()
            self._unthrottle = None
        self._stop_drain_check()
        for task in list(self._tasks):
            task.cancel()
        if self.transport is not None:
            if self._out:
                self.transport.writelines(self._out)  # answers owed before the bad frame
                self._out.clear()
            self.transport.close()  # writes what is already buffered, then closes


_NEVER_AWAITABLE: set[type] = set()
"""Answer types seen not to be awaitable (the response messages): ``inspect.isawaitable``'s ABC
check runs once per type, not once per request."""


def _awaitable(result: object) -> bool:
    if inspect.isawaitable(result):
        return True
    if type(result) is not types.GeneratorType:  # a generator's awaitability is its own flag
        _NEVER_AWAITABLE.add(type(result))
    return False


def _api_name(key: int) -> str:
    try:
        return ApiKey(key).name
    except ValueError:
        return str(key)
