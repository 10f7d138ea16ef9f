"""A node's metrics listener, wired to its broker: the collector, the health checks, the loop probe."""

from __future__ import annotations

import asyncio
import functools
import ssl
from typing import TYPE_CHECKING

from pylog.config import ConfigError
from pylog.metrics.collector import BrokerCollector
from pylog.metrics.health import Readiness, liveness
from pylog.metrics.http import MetricsServer, new_registry, parse_listeners
from pylog.metrics.leader_offsets import LeaderOffsets
from pylog.metrics.loop_lag import LoopLag

if TYPE_CHECKING:
    from pylog.metrics.observed import ObservedNode

CONFIG = "pylog.metrics.listeners"


class _NoImage:
    image = None


def _adding_replicas(node: ObservedNode, topic: str, index: int) -> tuple[int, ...]:
    """The replicas a reassignment is adding to a partition, as the node's metadata image says."""
    image = (node.metadata or node.quorum or _NoImage).image
    p = image.partition(topic, index) if image is not None else None
    return p.adding_replicas if p is not None else ()


class NodeMetrics:
    """``node``'s metrics listeners; ``https://`` ones serve with ``ssl_context``."""

    def __init__(self, node: ObservedNode, listeners: str, ssl_context: ssl.SSLContext | None) -> None:
        try:
            addresses = parse_listeners(listeners, CONFIG)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.loop_lag = LoopLag(clock=node.clock)
        source = node  # the image is the broker's (or a controller's) once it has started
        self.leader_offsets = LeaderOffsets(
            node.node_id, lambda: (source.metadata or source.quorum or _NoImage).image,
            lambda: node.own_client, node.clock,
        )
        self.collector = BrokerCollector(node, self.loop_lag, self.leader_offsets)
        node.replicas.topic_stats.adding_replicas = functools.partial(_adding_replicas, node)
        try:
            self.server = MetricsServer(
                addresses,
                new_registry(self.collector),
                live=lambda: liveness(self.loop_lag),
                ready=Readiness(node),
                ssl_context=ssl_context,
            )
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    @property
    def urls(self) -> list[str]:
        return self.server.urls

    def start(self) -> list[str]:
        """Serve from now on (on the event loop: the loop probe starts there)."""
        self.loop_lag.start()
        self.leader_offsets.start()
        return self.server.start()

    async def stop(self) -> None:
        await self.loop_lag.stop()
        await self.leader_offsets.stop()
        await asyncio.get_running_loop().run_in_executor(None, self.server.stop)
