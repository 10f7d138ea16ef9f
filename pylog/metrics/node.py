"""A node's metrics listener, wired to its broker: the collector, the health checks, the loop probe."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from pylog.config import ConfigError
from pylog.metrics.collector import BrokerCollector
from pylog.metrics.health import Readiness, liveness
from pylog.metrics.http import MetricsServer, new_registry, parse_listeners
from pylog.metrics.loop_lag import LoopLag

if TYPE_CHECKING:
    from pylog.broker.broker import Broker

CONFIG = "pylog.metrics.listeners"


class NodeMetrics:
    def __init__(self, broker: Broker, listeners: str) -> None:
        try:
            addresses = parse_listeners(listeners, CONFIG)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.loop_lag = LoopLag()
        self.collector = BrokerCollector(broker, self.loop_lag)
        # https serves with the first TLS client listener's ssl.* settings
        names = [li.name for li in broker.settings.broker_listeners] or [
            li.name for li in broker.settings.listeners
        ]
        securities = [sec for n in names if (sec := broker.security.listener(n)) is not None]
        context = next((sec.ssl_context for sec in securities if sec.ssl_context is not None), None)
        try:
            self.server = MetricsServer(
                addresses,
                new_registry(self.collector),
                live=lambda: liveness(self.loop_lag),
                ready=Readiness(broker),
                ssl_context=context,
            )
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    @property
    def urls(self) -> list[str]:
        return self.server.urls

    def start(self) -> list[str]:
        """Serve from now on (on the event loop: the loop probe starts there)."""
        self.loop_lag.start()
        return self.server.start()

    async def stop(self) -> None:
        await self.loop_lag.stop()
        await asyncio.get_running_loop().run_in_executor(None, self.server.stop)
