"""A listening socket: accepts connections for one handler table, with the listener's security
(TLS, SASL), the node's connection limits and the idle timeout."""

from __future__ import annotations

import asyncio
import logging
import sys

from pylog.broker.access.audit_shell import AuditShell
from pylog.broker.network.connection import KafkaConnection
from pylog.broker.network.handler_table import HandlerTable
from pylog.broker.network.throttling import QuotaEnforcer
from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.config import BrokerConfig
from pylog.metrics.counters import ListenerStats, RequestStats
from pylog.security.listener import PLAINTEXT_LISTENER, ListenerSecurity
from pylog.security.quotas import ConnectionQuotas

log = logging.getLogger(__name__)


class KafkaServer:
    def __init__(
        self,
        table: HandlerTable,
        host: str,
        port: int,
        config: BrokerConfig,
        *,
        listener: str = "PLAINTEXT",
        security: ListenerSecurity | None = None,
        quotas: ConnectionQuotas | None = None,
        clock: Clock = SYSTEM_CLOCK,
        client_quotas: QuotaEnforcer | None = None,
    ) -> None:
        self.table = table
        self.clock = clock
        self.listener = listener
        self.security = security or PLAINTEXT_LISTENER
        self.host, self.port = host, port
        cfg = config
        self.max_request_bytes = cfg.int("socket.request.max.bytes")
        self.quotas = quotas or ConnectionQuotas.from_config(cfg, [listener])
        self.client_quotas = client_quotas  # None: no client quotas here (the controller listener)
        self.max_queued_requests = max(1, cfg.int("queued.max.requests"))
        queued_bytes = cfg.int("queued.max.request.bytes")
        self.max_queued_request_bytes = queued_bytes if queued_bytes > 0 else sys.maxsize
        self.idle_ms = cfg.int("connections.max.idle.ms")
        self.connections: set[KafkaConnection] = set()
        self.request_stats = RequestStats()  # counted per request, read when metrics are scraped
        self.listener_stats = ListenerStats()
        self.audit: AuditShell | None = None  # told of authentications and their refusals
        self._server: asyncio.AbstractServer | None = None
        self._reaper: asyncio.TimerHandle | None = None

    async def start(self, *, serve: bool = True) -> tuple[str, int]:
        """Bind (the port is known from here on) and, unless ``serve`` is False, accept."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: KafkaConnection(self),
            self.host,
            self.port,
            reuse_address=True,
            backlog=1024,
            start_serving=serve,
            ssl=self.security.ssl_context,
        )
        sock = self._server.sockets[0]
        addr = sock.getsockname()
        self.host, self.port = addr[0], addr[1]
        self._schedule_reaper()
        oauth = self.security.sasl.oauth if self.security.sasl is not None else None
        if oauth is not None and oauth.keys is not None:
            oauth.keys.start()  # the OAUTHBEARER validator's JWKS, fetched from now on
        return self.host, self.port

    async def serve(self) -> None:
        """Start accepting on a socket bound with ``start(serve=False)``."""
        assert self._server is not None
        await self._server.start_serving()

    @property
    def serving(self) -> bool:
        """Whether the listener accepts connections."""
        return self._server is not None and self._server.is_serving()

    def accept(self, conn: KafkaConnection, address: str) -> tuple[str, float] | None:
        """Admit a new connection, or say which limit refuses it and how long to hold it first
        (a connection over its address's creation rate is closed after its throttle time)."""
        if self.client_quotas is not None:
            hold_ms = self.client_quotas.throttle_connection(address)
            if hold_ms > 0:
                reason = f"connection_creation_rate of {address} exceeded, closing in {hold_ms} ms"
                return reason, hold_ms / 1000
        refused = self.quotas.admit(self.listener, address)
        if refused is None:
            self.connections.add(conn)
            return None
        return refused, 0.0

    def forget(self, conn: KafkaConnection, address: str) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            self.quotas.release(self.listener, address)

    def _schedule_reaper(self) -> None:
        if self.idle_ms <= 0:
            return
        interval = min(max(self.idle_ms / 4000.0, 0.05), 30.0)
        self._reaper = asyncio.get_running_loop().call_later(interval, self._reap_idle)

    def _reap_idle(self) -> None:
        deadline = self.clock.monotonic_s() - self.idle_ms / 1000.0
        for conn in list(self.connections):
            if conn.idle and conn.last_active < deadline:
                log.info("closing idle connection from %s", conn.peer)
                conn.close()
        self._schedule_reaper()

    async def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 5)
            except Exception:  # a timeout or a connection that would not close: we are stopping anyway
                pass
        oauth = self.security.sasl.oauth if self.security.sasl is not None else None
        if oauth is not None and oauth.keys is not None:
            await oauth.keys.stop()
