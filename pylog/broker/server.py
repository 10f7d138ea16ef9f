"""A listening socket: accepts connections for one handler table, enforces max.connections and the
idle timeout."""

from __future__ import annotations

import asyncio
import logging
import time

from pylog.broker.connection import KafkaConnection
from pylog.broker.registry import HandlerTable
from pylog.config import BrokerConfig

log = logging.getLogger(__name__)


class KafkaServer:
    def __init__(
        self, table: HandlerTable, host: str, port: int, config: BrokerConfig, *, listener: str = "PLAINTEXT"
    ) -> None:
        self.table = table
        self.listener = listener
        self.host, self.port = host, port
        cfg = config
        self.max_request_bytes = cfg.int("socket.request.max.bytes")
        self.max_connections = cfg.int("max.connections")
        self.max_queued_requests = max(1, cfg.int("queued.max.requests"))
        self.idle_ms = cfg.int("connections.max.idle.ms")
        self.connections: set[KafkaConnection] = set()
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
        )
        sock = self._server.sockets[0]
        addr = sock.getsockname()
        self.host, self.port = addr[0], addr[1]
        self._schedule_reaper()
        return self.host, self.port

    async def serve(self) -> None:
        """Start accepting on a socket bound with ``start(serve=False)``."""
        assert self._server is not None
        await self._server.start_serving()

    def accept(self, conn: KafkaConnection) -> bool:
        if len(self.connections) >= self.max_connections:
            return False
        self.connections.add(conn)
        return True

    def forget(self, conn: KafkaConnection) -> None:
        self.connections.discard(conn)

    def _schedule_reaper(self) -> None:
        if self.idle_ms <= 0:
            return
        interval = min(max(self.idle_ms / 4000.0, 0.05), 30.0)
        self._reaper = asyncio.get_running_loop().call_later(interval, self._reap_idle)

    def _reap_idle(self) -> None:
        deadline = time.monotonic() - self.idle_ms / 1000.0
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
