"""The asyncio shell around `ClientConnection`: sockets, TLS, SASL, ApiVersions, timers.

``KafkaConnection`` is one open connection. ``open`` connects (TLS from the first byte when the
security protocol asks for it), authenticates with SASL PLAIN or SCRAM before any other request
leaves, then asks ApiVersions so that ``version`` can choose what to send (pylog's own nodes skip
that step: they speak the same codec). ``request`` may be called from many tasks at once: requests
are pipelined and answered in order. Each request has a timer; one that fires drops the connection
(every later answer would be late too). ``Channel`` is a broker's address with a connection that
is opened on demand and reopened after a failure, waiting a backoff that doubles from
``reconnect_backoff_s`` to ``reconnect_backoff_max_s`` between failed attempts, and replaced
before a SASL session lifetime granted by the broker runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections import deque
from dataclasses import dataclass
from typing import Any

from pylog.client import versions
from pylog.client.connection import (
    DEFAULT_MAX_IN_FLIGHT_BYTES,
    DEFAULT_MAX_RESPONSE_BYTES,
    ClientConnection,
)
from pylog.client.errors import ConnectFailed, ConnectionBroken, KafkaError, RequestTimedOut
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.security.client import PLAINTEXT, ClientSecurity, SaslAuthenticationError

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 1.0
"""How long closing waits for buffered bytes to leave before the socket is aborted."""
SESSION_MARGIN = 0.85
"""A SASL session is replaced once this share of its lifetime has passed."""


@dataclass(frozen=True)
class ConnectionSettings:
    """How a client connects, in the terms of Kafka's client configs."""

    client_id: str | None = "pylog"
    security: ClientSecurity = PLAINTEXT
    connect_timeout_s: float = 10.0  # socket.connection.setup.timeout.ms, SASL included
    request_timeout_s: float = 30.0  # request.timeout.ms
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    max_in_flight_bytes: int = DEFAULT_MAX_IN_FLIGHT_BYTES
    negotiate_versions: bool = True  # ask ApiVersions after connecting
    reconnect_backoff_s: float = 0.05  # reconnect.backoff.ms
    reconnect_backoff_max_s: float = 1.0  # reconnect.backoff.max.ms


class AuthenticationFailed(ConnectFailed, SaslAuthenticationError):
    """The broker refused the SASL credentials (or the mechanism): retrying will not help."""


class KafkaConnection:
    """One open connection to a Kafka listener; ``await KafkaConnection.open(host, port, ...)``."""

    def __init__(self, host: str, port: int, settings: ConnectionSettings) -> None:
        self.host, self.port, self.settings = host, port, settings
        self.peer = f"Kafka broker {host}:{port}"
        self.versions: dict[int, tuple[int, int]] = {}  # the broker's ApiVersions ranges
        self.session_end: float | None = None  # loop time to replace the SASL session by
        self._sansio = ClientConnection(
            settings.client_id, max_response_bytes=settings.max_response_bytes,
            max_in_flight_bytes=settings.max_in_flight_bytes, peer=self.peer)
        self._transport: asyncio.Transport | None = None
        self._waiting: dict[int, tuple[asyncio.Future[Any], asyncio.TimerHandle | None]] = {}
        self._room: deque[_RoomWaiter] = deque()
        self._gone: asyncio.Future[None] | None = None  # set when the socket is closed
        self._error: ConnectionBroken | None = None
        self._close_when_idle = False

    @classmethod
    async def open(cls, host: str, port: int, settings: ConnectionSettings) -> KafkaConnection:
        """Connect, authenticate and negotiate; raises ConnectFailed, AuthenticationFailed when
        the broker refuses the credentials, KafkaError when it refuses ApiVersions."""
        conn = cls(host, port, settings)
        try:
            await asyncio.wait_for(conn._open(), settings.connect_timeout_s)
        except SaslAuthenticationError as exc:
            conn.abort(ConnectionBroken("authentication failed"))
            raise AuthenticationFailed(f"{conn.peer} refused the SASL credentials: {exc}") from None
        except asyncio.TimeoutError:
            conn.abort(ConnectionBroken("connection setup timed out"))
            raise ConnectFailed(f"cannot connect to {conn.peer}: no answer within "
                                f"{settings.connect_timeout_s:g}s") from None
        except (OSError, ConnectionError) as exc:
            conn.abort(ConnectionBroken(str(exc)))
            raise ConnectFailed(f"cannot connect to {conn.peer}: {exc}") from None
        except BaseException:  # an ApiVersions error, a cancellation
            conn.abort(ConnectionBroken("connection setup did not finish"))
            raise
        return conn

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.create_connection(lambda: _Protocol(self), self.host, self.port,
                                     **self.settings.security.connect_kwargs(self.host))
        security = self.settings.security
        if security.uses_sasl:
            lifetime_ms = await security.authenticate(self.request)
            if lifetime_ms > 0:
                self.session_end = loop.time() + lifetime_ms * SESSION_MARGIN / 1000
        if self.settings.negotiate_versions:
            resp = await self.request(ApiKey.API_VERSIONS, 0, {})
            if resp.error_code:
                raise KafkaError(resp.error_code, f"ApiVersions from {self.host}:{self.port}")
            self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}

    # --- state --------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._error is not None

    @property
    def usable(self) -> bool:
        """Open, not retiring, and not about to outlive its SASL session."""
        if self._error is not None or self._close_when_idle:
            return False
        return self.session_end is None or asyncio.get_running_loop().time() < self.session_end

    @property
    def in_flight(self) -> int:
        return self._sansio.in_flight

    def version(self, api_key: int, wanted: tuple[int, int] | None = None) -> int:
        """The version of ``api_key`` to send this broker; KafkaError UNSUPPORTED_VERSION if none."""
        v = versions.choose(api_key, self.versions, wanted)
        if v is None:
            lo, hi = wanted or versions.WANTED.get(api_key, (0, 0))
            name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else str(api_key)
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"{name} v{lo}-{hi} at {self.host}:{self.port}",
                             "the broker does not offer this API")
        return v

    def has(self, api_key: int, wanted: tuple[int, int] | None = None) -> bool:
        return versions.choose(api_key, self.versions, wanted) is not None

    # --- requests -----------------------------------------------------------------------------

    async def request(self, api_key: int, version: int, body: Any, timeout_s: float | None = None) -> Any:
        """Send one request and wait for its decoded response body. Raises RequestTimedOut,
        ConnectionBroken (also for a connection already closed), ValueError for a body the
        codec cannot encode."""
        out = self._sansio.prepare_request(api_key, version, body)
        if self._room or not self._sansio.has_room(out.nbytes):
            await self._wait_room(out.nbytes)
        return await self._send(out, timeout_s)

    async def call(self, api_key: int, body: Any, *, wanted: tuple[int, int] | None = None,
                   timeout_s: float | None = None) -> Any:
        """``request`` at the version ``version`` chooses."""
        return await self.request(api_key, self.version(api_key, wanted), body, timeout_s)

    def _send(self, out: Any, timeout_s: float | None) -> asyncio.Future[Any]:
        if self._error is not None:
            raise ConnectionBroken(f"connection to {self.peer} is closed: {self._error}")
        transport = self._transport
        assert transport is not None
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        timeout = self.settings.request_timeout_s if timeout_s is None else timeout_s
        timer = loop.call_later(timeout, self._timed_out, out.correlation_id, out.api_key,
                                out.api_version, timeout)
        corr = self._sansio.request_sent(out)
        self._waiting[corr] = (fut, timer)
        fut.add_done_callback(lambda f: self._done(corr, f))
        transport.writelines(out.parts)
        return fut

    def _done(self, corr: int, fut: asyncio.Future[Any]) -> None:
        entry = self._waiting.pop(corr, None)
        if entry is not None and entry[1] is not None:
            entry[1].cancel()
        if fut.cancelled():  # the caller gave up: its answer will be skipped when it comes
            self._sansio.abandon(corr)

    async def _wait_room(self, nbytes: int) -> None:
        """Until ``nbytes`` more may be in flight (first come, first served)."""
        loop = asyncio.get_running_loop()
        me = _RoomWaiter(loop.create_future())
        self._room.append(me)
        try:
            while True:
                if self._error is not None:
                    raise ConnectionBroken(f"connection to {self.peer} is closed: {self._error}")
                if self._room[0] is me and self._sansio.has_room(nbytes):
                    return
                await me.woken
                me.woken = loop.create_future()
        finally:
            self._room.remove(me)
            self._wake_room()

    def _wake_room(self) -> None:
        if self._room and not self._room[0].woken.done():
            self._room[0].woken.set_result(None)

    def _timed_out(self, corr: int, api_key: int, version: int, timeout: float) -> None:
        entry = self._waiting.pop(corr, None)
        if entry is None or entry[0].done():
            return
        entry[0].set_exception(RequestTimedOut(
            f"{self.peer} did not answer api {api_key} v{version} within {timeout:g}s"))
        self.abort(ConnectionBroken(f"dropped after api {api_key} v{version} got no answer "
                                    f"within {timeout:g}s"))

    # --- called by the protocol ---------------------------------------------------------------

    def _received(self, nbytes: int) -> None:
        for r in self._sansio.buffer_updated(nbytes):
            entry = self._waiting.get(r.correlation_id)
            if entry is not None and not entry[0].done():
                entry[0].set_result(r.body)
        if self._sansio.error is not None:
            self.abort(self._sansio.error)
            return
        self._wake_room()
        if self._close_when_idle and not self._sansio.in_flight:
            self.abort(ConnectionBroken("retired"))

    def _lost(self, exc: Exception | None) -> None:
        if self._gone is not None and not self._gone.done():
            self._gone.set_result(None)
        detail = f"{exc}" if exc is not None else "closed by the broker"
        self.abort(ConnectionBroken(f"connection to {self.peer} lost: {detail}"))

    # --- closing ------------------------------------------------------------------------------

    def abort(self, error: ConnectionBroken) -> None:
        """Close now; every request in flight fails with ``error``."""
        if self._error is None:
            self._error = self._sansio.error or error
        self._sansio.close(self._error)
        waiting, self._waiting = self._waiting, {}
        for fut, timer in waiting.values():
            if timer is not None:
                timer.cancel()
            if not fut.done():
                fut.set_exception(ConnectionBroken(f"{self._error}"))
                fut.exception()  # a caller that gave up must not leave it "never retrieved"
        for waiter in self._room:
            if not waiter.woken.done():
                waiter.woken.set_result(None)
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()

    def close_when_idle(self) -> None:
        """Take no new work; close once the requests in flight are answered."""
        self._close_when_idle = True
        if not self._sansio.in_flight:
            self.abort(ConnectionBroken("retired"))

    async def close(self) -> None:
        """Close, failing what is in flight; waits briefly for the socket to shut."""
        transport = self._transport
        if transport is not None:
            self._gone = asyncio.get_running_loop().create_future()
        self.abort(ConnectionBroken("closed"))
        if transport is None or self._gone is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._gone), CLOSE_TIMEOUT_S)
        except asyncio.TimeoutError:  # a peer that stopped reading must not hold the close up
            transport.abort()


@dataclass
class _RoomWaiter:
    woken: asyncio.Future[None]


class _Protocol(asyncio.BufferedProtocol):
    """Bytes from the socket go straight into the connection's frame buffers."""

    def __init__(self, conn: KafkaConnection) -> None:
        self.conn = conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn._transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.conn._sansio.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self.conn._received(nbytes)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn._lost(exc)


class Channel:
    """A broker's address and the connection to it: opened on demand, reopened with backoff."""

    def __init__(self, host: str, port: int, settings: ConnectionSettings) -> None:
        self.host, self.port, self.settings = host, port, settings
        self._conn: KafkaConnection | None = None
        self._opening: asyncio.Future[KafkaConnection] | None = None
        self._backoff = 0.0
        self._retry_at = 0.0
        self._closed = False

    @property
    def connected(self) -> bool:
        return self._conn is not None and self._conn.usable

    async def connection(self, timeout_s: float | None = None) -> KafkaConnection:
        """The open connection, opening one if needed (one attempt shared by every caller)."""
        conn = self._conn
        if conn is not None and conn.usable:
            return conn
        if self._closed:
            raise ConnectionBroken(f"connection to {self.host}:{self.port} is closed")
        if conn is not None:
            self._conn = None
            conn.close_when_idle()
        if self._opening is None or self._opening.done():
            self._opening = asyncio.ensure_future(self._open())
            self._opening.add_done_callback(lambda f: f.cancelled() or f.exception())
        timeout = self.settings.connect_timeout_s if timeout_s is None else timeout_s
        try:
            return await asyncio.wait_for(asyncio.shield(self._opening), timeout)
        except asyncio.TimeoutError:
            raise ConnectFailed(f"connecting to {self.host}:{self.port} timed out") from None

    async def _open(self) -> KafkaConnection:
        loop = asyncio.get_running_loop()
        wait = self._retry_at - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        try:
            conn = await KafkaConnection.open(self.host, self.port, self.settings)
        except (ConnectionError, KafkaError):  # refused, unreachable, TLS or SASL refused
            s = self.settings
            self._backoff = min(max(self._backoff * 2, s.reconnect_backoff_s), s.reconnect_backoff_max_s)
            self._retry_at = loop.time() + self._backoff
            raise
        self._backoff = 0.0
        if self._closed:
            conn.abort(ConnectionBroken("closed"))
            raise ConnectionBroken(f"connection to {self.host}:{self.port} is closed")
        self._conn = conn
        return conn

    async def request(self, api_key: int, version: int, body: Any, timeout_s: float | None = None) -> Any:
        """``request`` on the connection, opened first if needed, all within ``timeout_s``."""
        loop = asyncio.get_running_loop()
        timeout = self.settings.request_timeout_s if timeout_s is None else timeout_s
        deadline = loop.time() + timeout
        conn = await self.connection(timeout)
        return await conn.request(api_key, version, body, max(deadline - loop.time(), 0.001))

    def close(self) -> None:
        """Close now (from synchronous code): requests in flight fail."""
        self._closed = True
        if self._opening is not None and not self._opening.done():
            self._opening.cancel()
        if self._conn is not None:
            self._conn.abort(ConnectionBroken("closed"))
            self._conn = None

    async def aclose(self) -> None:
        """Close, waiting briefly for the socket to shut."""
        self._closed = True
        conn, self._conn = self._conn, None
        if self._opening is not None and not self._opening.done():
            self._opening.cancel()
        if conn is not None:
            await conn.close()
