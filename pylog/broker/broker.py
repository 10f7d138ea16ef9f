"""A single-node pylog: broker and a controller quorum of one in the same process.

Start order: metadata quorum (replays ``__cluster_metadata`` into the image), then
the partition logs the image names, then the listener, then broker registration
with the advertised endpoint. Stop order is the reverse, flushing every log.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from pathlib import Path
from typing import Any

from pylog.broker import handlers  # noqa: F401  (registers every API handler)
from pylog.broker.maintenance import Maintenance
from pylog.broker.producer_ids import ProducerIdManager
from pylog.broker.replica_manager import ReplicaManager
from pylog.broker.server import KafkaServer
from pylog.config import BrokerConfig

log = logging.getLogger(__name__)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Broker:
    def __init__(
        self,
        config: BrokerConfig,
        data_dir: Path | str,
        *,
        listen: tuple[str, int] = ("127.0.0.1", 9092),
        advertised: tuple[str, int] | None = None,
        metadata_factory: Any = None,
    ) -> None:
        self.config = config
        self.data_dir = Path(data_dir).resolve()
        self.listen = listen
        self._advertised = advertised
        self.node_id = config.node_id
        self._metadata_factory = metadata_factory
        self.metadata: Any = None
        self.replicas = ReplicaManager(config, self.data_dir, now_ms)
        self.maintenance = Maintenance(config, self.replicas, now_ms)
        self.producer_ids: ProducerIdManager | None = None
        self.server: KafkaServer | None = None
        self.stopping = False
        self._started = False

    @property
    def bound_address(self) -> tuple[str, int]:
        assert self.server is not None
        return self.server.host, self.server.port

    @property
    def advertised(self) -> tuple[str, int]:
        if self._advertised is not None:
            host, port = self._advertised
            return host, port or self.bound_address[1]
        host, port = self.bound_address
        if host in ("0.0.0.0", "::", ""):
            host = socket.getfqdn()
        return host, port

    async def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        factory = self._metadata_factory
        if factory is None:
            from pylog.broker.cluster_adapter import open_metadata as factory
        self.metadata = await factory(self)
        self.producer_ids = ProducerIdManager(self.metadata)
        self.server = KafkaServer(self, *self.listen)
        await self.server.start()
        await self.metadata.register_broker(self.node_id, *self.advertised)
        self.maintenance.start()
        self._started = True

    # --- driven by the metadata image (called on the event loop) ----------------------------

    def on_topic(self, name: str, topic_id: Any, partitions: list[int], configs: dict[str, str]) -> None:
        """A topic exists (created, grown, replayed on start) with these partitions and overrides."""
        for index in partitions:
            self.replicas.ensure_partition(name, index, topic_id, dict(configs))

    def on_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.replicas.update_configs(name, dict(configs))

    def on_topic_deleted(self, name: str) -> None:
        self.replicas.remove_topic(name)

    # --- shutdown ---------------------------------------------------------------------------

    async def stop(self) -> None:
        self.stopping = True
        if self.server is not None:
            await self.server.stop()
        self.maintenance.stop()
        for part in self.replicas.snapshot():
            part.wake()
        await asyncio.get_running_loop().run_in_executor(None, self.replicas.close)
        if self.metadata is not None:
            try:
                await self.metadata.close()
            except Exception:
                log.exception("closing the metadata quorum failed")
