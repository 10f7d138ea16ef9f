"""Mutual TLS for Arrow Flight: the broker terminates TLS itself when its TLS listener asks for
client certificates (``ssl.client.auth=required`` or ``requested``).

pyarrow's Flight server can verify a client certificate but does not show a call the certificate's
subject, which the broker needs to name the caller as its Kafka listener does. So the front accepts
TLS with a context built from the listener's own ``ssl.*`` settings (offering HTTP/2 by ALPN, as
gRPC requires), maps the certificate's subject through the listener's
``ssl.principal.mapping.rules`` (`pylog.security.principal.ssl_principal`, the Kafka listener's
mapping), and relays the connection to the Flight server, which listens on loopback only. Each
relayed connection leaves from a loopback port the front records with its caller: a call arriving
from a recorded port is that client's; one from any other port did not come through TLS and is
refused. The relay copies bytes in Python, so a TLS listener without client certificates keeps
gRPC's own TLS.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
from typing import Any

from pylog.security.principal import KafkaPrincipal, ssl_principal

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S = 10.0
CHUNK = 256 * 1024  # bytes relayed per read


class TlsFront:
    """A TLS listener on ``host:port`` relaying each connection to the Flight server at
    ``127.0.0.1:backend_port``; ``caller(peer)`` names the client of a relayed call."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext, rules: tuple[Any, ...],
                 backend_port: int) -> None:
        self.context, self.rules, self.backend_port = context, rules, backend_port
        self._callers: dict[int, tuple[KafkaPrincipal, str]] = {}  # relay port -> (principal, client host)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="flight-tls", daemon=True)
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._relay, host, port, ssl=context,
                                 ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S), self._loop).result()
        self.port: int = self._server.sockets[0].getsockname()[1]

    def caller(self, peer: str) -> tuple[KafkaPrincipal, str] | None:
        """(principal, client host) of a call whose gRPC peer is ``ipv4:127.0.0.1:PORT``; None when
        the call did not come through this front."""
        kind, _, rest = peer.partition(":")
        host, _, port = rest.rpartition(":")
        if kind != "ipv4" or host != "127.0.0.1" or not port.isdigit():
            return None
        return self._callers.get(int(port))

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client_host = str((writer.get_extra_info("peername") or ("?",))[0])
        try:
            principal = ssl_principal(writer.get_extra_info("peercert"), self.rules)
        except PermissionError as exc:  # no mapping rule matches the subject: refused, as Kafka does
            log.info("Arrow Flight: refused a TLS client from %s: %s", client_host, exc)
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.backend_port,
                                                                 local_addr=("127.0.0.1", 0))
        except OSError as exc:
            log.warning("Arrow Flight: cannot reach the Flight server for %s: %s", client_host, exc)
            writer.close()
            return
        port = up_writer.get_extra_info("sockname")[1]
        self._callers[port] = (principal, client_host)
        copies = [asyncio.ensure_future(_copy(reader, up_writer)),
                  asyncio.ensure_future(_copy(up_reader, writer))]
        try:
            await asyncio.wait(copies, return_when=asyncio.FIRST_COMPLETED)  # one side ended: both end
        finally:
            for task in copies:
                task.cancel()
            self._callers.pop(port, None)
            for w in (writer, up_writer):
                w.close()

    def close(self) -> None:
        async def stop() -> None:
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Bytes from `reader` to `writer` until `reader` ends or either connection fails."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError, ssl.SSLError):
        return
