"""``NodeChannel``: this node's Kafka-protocol connection to another node's listener.

Requests are pipelined on one TCP connection and matched to responses by correlation id (a pylog
node answers in request order, as every Kafka broker does). A failure (refused, reset, a frame
that does not parse, a request that times out) fails every request in flight and drops the
connection; the next request connects again. Callers decide whether to retry: Raft tolerates a
lost message, a controller call retries against whoever leads next.

A secured listener is reached with the node's ``ClientSecurity``: TLS from the start, then SASL
before the first request; until that completes no request leaves. When the broker grants a SASL
session lifetime (``connections.max.reauth.ms``), the connection is replaced before it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import struct
from typing import Any

from pylog.protocol import api
from pylog.protocol.errors import ProtocolError
from pylog.security.client import PLAINTEXT, ClientSecurity, SaslAuthenticationError

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 512 * 1024 * 1024


class ChannelError(ConnectionError):
    """The request did not get an answer: no connection, a broken one, or a timeout."""


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
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._connecting: asyncio.Future[None] | None = None
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._ids = itertools.count(1)
        self._closed = False

    @property
    def connected(self) -> bool:
        if self._writer is None or self._writer.is_closing() or not self._ready:
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
        writer = self._writer
        if writer is None or not self._ready:
            raise ChannelError(f"not connected to {self.host}:{self.port}")
        return await self._send(writer, api_key, version, body, deadline, timeout_s)

    async def _send(
        self,
        writer: asyncio.StreamWriter,
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
        writer.write(frame)
        try:
            return await asyncio.wait_for(fut, max(deadline - loop.time(), 0.001))
        except asyncio.TimeoutError:
            self._drop(ChannelError(f"no answer from {self.host}:{self.port} in {timeout_s}s"))
            raise ChannelError(f"request {api_key} to {self.host}:{self.port} timed out") from None
        finally:
            self._pending.pop(corr, None)

    def send_nowait(self, api_key: int, version: int, body: Any) -> asyncio.Future[Any] | None:
        """Queue a request on an open connection without waiting (None when not connected)."""
        writer = self._writer
        if writer is None or writer.is_closing() or not self._ready:
            return None
        corr = next(self._ids) & 0x7FFFFFFF
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[corr] = (api_key, version, fut)
        writer.write(api.encode_request(api_key, version, corr, self.client_id, body))
        return fut

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
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(self.host, self.port, **self.security.connect_kwargs(self.host)),
            self.connect_timeout_s,
        )
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._closed:
            writer.close()
            raise ChannelError("channel closed")
        self._writer = writer
        self._ready = False
        self._session_end = None
        self._reader_task = asyncio.ensure_future(self._read(reader, writer))
        if self.security.uses_sasl:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.connect_timeout_s

            async def raw(api_key: int, version: int, body: Any) -> Any:
                return await self._send(writer, api_key, version, body, deadline, self.connect_timeout_s)

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

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        error: Exception = ChannelError(f"connection to {self.host}:{self.port} closed")
        try:
            while True:
                head = await reader.readexactly(4)
                (size,) = _SIZE.unpack(head)
                if size < 4 or size > self.max_response_bytes:
                    raise ProtocolError(f"response of {size} bytes from {self.host}:{self.port}")
                frame = await reader.readexactly(size)
                (corr,) = _SIZE.unpack_from(frame, 0)
                entry = self._pending.pop(corr, None)
                if entry is None:
                    continue  # the request timed out meanwhile
                api_key, version, fut = entry
                try:
                    _, body = api.decode_response(api_key, version, frame)
                except ProtocolError as exc:
                    if not fut.done():
                        fut.set_exception(ChannelError(f"bad response: {exc}"))
                    raise
                if not fut.done():
                    fut.set_result(body)
        except (asyncio.IncompleteReadError, ConnectionError, OSError, ProtocolError) as exc:
            if not isinstance(exc, asyncio.IncompleteReadError):
                error = ChannelError(f"connection to {self.host}:{self.port} failed: {exc}")
        except asyncio.CancelledError:
            pass
        finally:
            if self._writer is writer:
                self._drop(error)

    def _drop(self, error: Exception) -> None:
        self._ready = False
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        task, self._reader_task = self._reader_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        pending, self._pending = self._pending, {}
        for _, _, fut in pending.values():
            if not fut.done():
                fut.set_exception(error)

    def close(self) -> None:
        self._closed = True
        self._drop(ChannelError("channel closed"))
