"""This node's Kafka-protocol connections to other nodes' listeners.

``node_channel`` is the channel the controller side uses (Raft between voters, the quorum fetcher,
observers, the controller channel that carries registration, heartbeats and forwarded admin
requests): pylog's client transport (`pylog.client.protocol.Channel`), reconnecting on demand,
secured with the node's ``ClientSecurity`` (TLS from the start, SASL before the first request, the
session replaced before the lifetime the broker grants runs out), and with no ApiVersions round
trip (nodes speak the same codec) and no backoff of its own (its callers retry on their own
schedule: Raft tolerates a lost message, a controller call retries against whoever leads next).

``NodeChannel`` is the broker-to-broker connection the replica fetcher and the transaction markers
use: requests pipelined on one TCP connection and matched to responses by correlation id; a
failure (refused, reset, a frame that does not parse, a request that times out) fails every
request in flight and drops the connection; the next request connects again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import struct
from typing import Any

from pylog.client.errors import TransportError
from pylog.client.protocol import Channel, ConnectionSettings
from pylog.protocol import api
from pylog.protocol.errors import ProtocolError
from pylog.protocol.framing import FrameReader
from pylog.security.client import PLAINTEXT, ClientSecurity, SaslAuthenticationError

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 512 * 1024 * 1024
CONNECT_TIMEOUT_S = 2.0

ChannelError = TransportError
"""The request did not get an answer: no connection, a broken one, or a timeout."""


def node_channel(host: str, port: int, *, client_id: str, security: ClientSecurity = PLAINTEXT,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S,
                 max_response_bytes: int = MAX_RESPONSE_BYTES) -> Channel:
    """A connection to another node's listener; ``request(api_key, version, body, timeout_s)``
    raises ChannelError, ``close()`` drops it."""
    settings = ConnectionSettings(
        client_id=client_id, security=security, connect_timeout_s=connect_timeout_s,
        max_response_bytes=max_response_bytes, negotiate_versions=False,
        reconnect_backoff_s=0.0, reconnect_backoff_max_s=0.0)
    return Channel(host, port, settings)


class NodeChannel:
    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str,
        connect_timeout_s: float = 2.0,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.host, self.port = host, port
        self.security = security
        self._ready = False  # connected and, on a SASL listener, authenticated
        self._session_end: float | None = None  # loop time to reconnect before the SASL session ends
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self.max_response_bytes = max_response_bytes
        self._transport: asyncio.Transport | None = None
        self._protocol: _ResponseFrames | None = None
        self._connecting: asyncio.Future[None] | None = None
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._ids = itertools.count(1)
        self._closed = False

    @property
    def connected(self) -> bool:
        if self._transport is None or self._transport.is_closing() or not self._ready:
            return False
        if (
            self._session_end is not None
            and not self._pending
            and asyncio.get_running_loop().time() >= self._session_end
        ):
            self._drop(ChannelError("SASL session ending; reconnecting"))
            return False
        return True

    async def request(self, api_key: int, version: int, body: Any, timeout_s: float) -> Any:
        """Send one request and wait for its decoded response body; raises ChannelError."""
        if self._closed:
            raise ChannelError("channel closed")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        await self._connect(deadline)
        transport = self._transport
        if transport is None or not self._ready:
            raise ChannelError(f"not connected to {self.host}:{self.port}")
        return await self._send(transport, api_key, version, body, deadline, timeout_s)

    async def _send(
        self,
        transport: asyncio.Transport,
        api_key: int,
        version: int,
        body: Any,
        deadline: float,
        timeout_s: float,
    ) -> Any:
        loop = asyncio.get_running_loop()
        corr = next(self._ids) & 0x7FFFFFFF
        frame = api.encode_request(api_key, version, corr, self.client_id, body)
        fut: asyncio.Future[Any] = loop.create_future()
        self._pending[corr] = (api_key, version, fut)
        transport.write(frame)
        try:
            return await asyncio.wait_for(fut, max(deadline - loop.time(), 0.001))
        except asyncio.TimeoutError:
            self._drop(ChannelError(f"no answer from {self.host}:{self.port} in {timeout_s}s"))
            raise ChannelError(f"request {api_key} to {self.host}:{self.port} timed out") from None
        finally:
            self._pending.pop(corr, None)

    async def _connect(self, deadline: float) -> None:
        if self.connected:
            return
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.ensure_future(self._open())
            # A waiter that timed out leaves the attempt's failure unread; read it here.
            self._connecting.add_done_callback(lambda f: f.cancelled() or f.exception())
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(asyncio.shield(self._connecting), max(deadline - loop.time(), 0.001))
        except asyncio.TimeoutError:
            raise ChannelError(f"connecting to {self.host}:{self.port} timed out") from None
        except OSError as exc:
            raise ChannelError(f"cannot connect to {self.host}:{self.port}: {exc}") from None

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        transport, protocol = await asyncio.wait_for(
            loop.create_connection(
                lambda: _ResponseFrames(self, self.max_response_bytes),
                self.host,
                self.port,
                **self.security.connect_kwargs(self.host),
            ),
            self.connect_timeout_s,
        )
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._closed:
            transport.close()
            raise ChannelError("channel closed")
        self._transport, self._protocol = transport, protocol
        self._ready = False
        self._session_end = None
        if self.security.uses_sasl:
            deadline = loop.time() + self.connect_timeout_s

            async def raw(api_key: int, version: int, body: Any) -> Any:
                return await self._send(transport, api_key, version, body, deadline, self.connect_timeout_s)

            try:
                lifetime_ms = await self.security.authenticate(raw)
            except SaslAuthenticationError as exc:
                self._drop(ChannelError(f"{self.host}:{self.port} refused this node's credentials: {exc}"))
                raise ChannelError(
                    f"{self.host}:{self.port} refused this node's credentials: {exc}"
                ) from None
            if lifetime_ms > 0:
                self._session_end = loop.time() + lifetime_ms * 0.85 / 1000
        self._ready = True

    # --- called by the connection's protocol --------------------------------------------------

    def _on_frame(self, protocol: _ResponseFrames, frame: memoryview) -> None:
        if protocol is not self._protocol:
            return
        if len(frame) < 4:
            self._drop(ChannelError(f"a response of {len(frame)} bytes from {self.host}:{self.port}"))
            return
        (corr,) = _SIZE.unpack_from(frame, 0)
        entry = self._pending.pop(corr, None)
        if entry is None:
            return  # the request timed out meanwhile
        api_key, version, fut = entry
        try:
            _, body = api.decode_response(api_key, version, frame)
        except ProtocolError as exc:
            if not fut.done():
                fut.set_exception(ChannelError(f"bad response: {exc}"))
            self._drop(ChannelError(f"connection to {self.host}:{self.port} failed: {exc}"))
            return
        if not fut.done():
            fut.set_result(body)

    def _on_lost(self, protocol: _ResponseFrames, error: ChannelError) -> None:
        if protocol is self._protocol:
            self._drop(error)

    def _drop(self, error: Exception) -> None:
        self._ready = False
        transport, self._transport = self._transport, None
        self._protocol = None
        if transport is not None:
            transport.close()
        pending, self._pending = self._pending, {}
        for _, _, fut in pending.values():
            if not fut.done():
                fut.set_exception(error)

    def close(self) -> None:
        self._closed = True
        self._drop(ChannelError("channel closed"))


class _ResponseFrames(asyncio.BufferedProtocol):
    """The connection's bytes, split into response frames as they arrive (the size prefix is
    checked before any body is kept; a large fetch response is read straight into its own
    buffer, never joined from chunks)."""

    def __init__(self, channel: NodeChannel, max_response_bytes: int) -> None:
        self.channel = channel
        self.decoder = FrameReader(max_response_bytes)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        channel = self.channel
        try:
            frames = self.decoder.buffer_updated(nbytes)
        except ProtocolError as exc:
            channel._on_lost(self, ChannelError(f"connection to {channel.host}:{channel.port} failed: {exc}"))
            return
        for frame in frames:
            channel._on_frame(self, frame)

    def connection_lost(self, exc: Exception | None) -> None:
        channel = self.channel
        detail = f" failed: {exc}" if exc is not None else " closed"
        channel._on_lost(self, ChannelError(f"connection to {channel.host}:{channel.port}{detail}"))
