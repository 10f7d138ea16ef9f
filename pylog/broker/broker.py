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
from pylog.broker.group_shell import GroupShell
from pylog.broker.maintenance import Maintenance
from pylog.broker.metadata import BrokerMetadata, open_metadata
from pylog.broker.producer_ids import ProducerIdManager
from pylog.broker.replica_manager import ReplicaManager
from pylog.broker.server import KafkaServer
from pylog.broker.txn_shell import TxnShell
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
    ) -> None:
        self.config = config
        self.data_dir = Path(data_dir).resolve()
        self.listen = listen
        self._advertised = advertised
        self.node_id = config.node_id
        self.metadata: BrokerMetadata | None = None  # type: ignore[assignment]
        self.replicas = ReplicaManager(config, self.data_dir, now_ms)
        self.maintenance = Maintenance(config, self.replicas, now_ms)
        self.producer_ids: ProducerIdManager | None = None
        self.groups: GroupShell | None = None
        self.txn = TxnShell(self)  # exists before partitions open: it verifies their transactional batches
        self.server: KafkaServer | None = None
        self.stopping = False

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
        self.metadata = await open_metadata(self)
        self.producer_ids = ProducerIdManager(self.metadata)
        self.groups = GroupShell(self)
        await self.groups.start()  # replays __consumer_offsets before anyone can ask
        await self.txn.start()  # replays __transaction_state; re-drives markers of preparing ones
        self.server = KafkaServer(self, *self.listen)
        await self.server.start()
        await self.metadata.register(*self.advertised)
        self.maintenance.start()

    # --- driven by the metadata image (called on the event loop) ----------------------------

    def on_partition(self, topic: str, index: int, topic_id: Any, configs: dict[str, str]) -> None:
        """The image assigns this partition here (created, grown, or found on start)."""
        part = self.replicas.ensure_partition(topic, index, topic_id, configs)
        part.on_roll = self.maintenance.request_seal
        part.txn_verifier = self.txn.verify_produce

    def on_topic_configs(self, topic: str, configs: dict[str, str]) -> None:
        self.replicas.update_configs(topic, configs)

    def on_broker_configs(self) -> None:
        """Dynamic broker configs changed: topic defaults derived from them may have too."""
        assert self.metadata is not None
        for topic in list(self.replicas.topics()):
            self.replicas.update_configs(topic, self.metadata.topic_configs(topic))

    def on_topic_deleted(self, topic: str) -> None:
        self.replicas.remove_topic(topic)
        self.maintenance.request_release()  # the topic's cached bytes and buffers are free now

    # --- shutdown ---------------------------------------------------------------------------

    async def stop(self) -> None:
        self.stopping = True
        if self.server is not None:
            await self.server.stop()
        if self.groups is not None:
            self.groups.stop()
        self.txn.stop()
        self.maintenance.stop()
        for part in self.replicas.snapshot():
            part.wake()
        await asyncio.get_running_loop().run_in_executor(None, self.replicas.close)
        if self.metadata is not None:
            try:
                await self.metadata.close()
            except Exception:
                log.exception("closing the metadata quorum failed")
