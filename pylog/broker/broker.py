"""A pylog node: the broker and the controller quorum in one process, wired from explicit parts.

Start order: metadata quorum (replays ``__cluster_metadata`` into the image), then the partition
logs the image names, then the coordinators, then the listener, then broker registration with
the advertised endpoint. Stop order is the reverse, flushing every log.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from pathlib import Path
from typing import Any

from pylog.broker.group_shell import GroupShell
from pylog.broker.handlers import BrokerServices, client_handlers
from pylog.broker.maintenance import Maintenance
from pylog.broker.metadata import BrokerMetadata, NodePublisher, load_cluster_id
from pylog.broker.producer_ids import ProducerIdManager
from pylog.broker.replica_manager import ReplicaManager
from pylog.broker.server import KafkaServer
from pylog.broker.share_shell import ShareShell
from pylog.broker.txn_shell import TxnShell
from pylog.cluster.controller_client import ControllerClient
from pylog.cluster.image import MetadataImage
from pylog.cluster.metadata_log import METADATA_DIR
from pylog.cluster.quorum import MetadataQuorum
from pylog.cluster.records import BrokerEndpoint
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
        self.broker_epoch = -1
        self.replicas = ReplicaManager(config, self.data_dir, now_ms)
        self.maintenance = Maintenance(config, self.replicas, now_ms)
        self.quorum: MetadataQuorum | None = None
        self.metadata: BrokerMetadata | None = None
        self.controller: ControllerClient | None = None
        self.producer_ids: ProducerIdManager | None = None
        self.groups: GroupShell | None = None
        self.share_state: ShareShell | None = None
        self.txn: TxnShell | None = None
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
        cfg = self.config
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cluster_id = load_cluster_id(self.data_dir, self.node_id, cfg.raw("cluster.id"))
        quorum = self.quorum = MetadataQuorum(
            self.data_dir,
            self.node_id,
            default_num_partitions=cfg.int("num.partitions"),
            default_replication_factor=cfg.int("default.replication.factor"),
            delete_topic_enable=cfg.bool("delete.topic.enable"),
        )
        metadata = self.metadata = BrokerMetadata(quorum, cluster_id)
        controller = self.controller = ControllerClient(quorum.execute)
        self.producer_ids = ProducerIdManager(controller, self.node_id, lambda: self.broker_epoch)
        shared = {
            "node_id": self.node_id,
            "replicas": self.replicas,
            "metadata": metadata,
            "controller": controller,
        }
        groups = self.groups = GroupShell(cfg, **shared)
        txn = self.txn = TxnShell(cfg, producer_ids=self.producer_ids, groups=groups, **shared)
        metadata.add_publisher(
            NodePublisher(
                self.node_id,
                set_dynamic_configs=self._set_dynamic_configs,
                open_partition=self._open_partition,
                update_topic_configs=self.replicas.update_configs,
                broker_configs_changed=self._broker_configs_changed,
                topic_deleted=self._topic_deleted,
                delete_strays=lambda known: self.replicas.delete_strays(known, skip={METADATA_DIR}),
            )
        )
        await quorum.start()
        await quorum.wait_for_controller()
        metadata.start_publishing()
        await groups.start()  # replays __consumer_offsets before anyone can ask
        share = self.share_state = ShareShell(cfg, **shared)
        await share.start()  # replays __share_group_state
        await txn.start()  # replays __transaction_state; re-drives markers of preparing ones
        services = BrokerServices(
            node_id=self.node_id,
            config=cfg,
            metadata=metadata,
            replicas=self.replicas,
            groups=groups,
            share=share,
            txn=txn,
            producer_ids=self.producer_ids,
            controller=controller,
            quorum=quorum,
            stopping=lambda: self.stopping,
        )
        self.server = KafkaServer(client_handlers(services), *self.listen, cfg)
        await self.server.start()
        await self._register()
        self.maintenance.start()

    async def _register(self) -> None:
        assert self.controller is not None
        host, port = self.advertised
        result = await self.controller.register_broker(
            self.node_id, uuid.uuid4(), [BrokerEndpoint("PLAINTEXT", host, port)], None
        )
        if result.error_code:
            raise RuntimeError(f"broker registration failed: {result.error_message}")
        self.broker_epoch = result.broker_epoch

    # --- driven by the metadata image (called on the event loop) ----------------------------

    def _set_dynamic_configs(self, image: MetadataImage) -> None:
        self.config.set_dynamic(image.broker_configs(), image.broker_configs(self.node_id))

    def _open_partition(self, topic: str, index: int, topic_id: Any, configs: dict[str, str]) -> None:
        """The image assigns this partition here (created, grown, or found on start)."""
        assert self.txn is not None
        part = self.replicas.ensure_partition(topic, index, topic_id, configs)
        part.on_roll = self.maintenance.request_seal
        part.txn_verifier = self.txn.verify_produce

    def _broker_configs_changed(self) -> None:
        """Dynamic broker configs changed: topic defaults derived from them may have too."""
        assert self.metadata is not None
        for topic in list(self.replicas.topics()):
            self.replicas.update_configs(topic, self.metadata.topic_configs(topic))

    def _topic_deleted(self, topic: str) -> None:
        self.replicas.remove_topic(topic)
        self.maintenance.request_release()  # the topic's cached bytes and buffers are free now

    # --- shutdown ---------------------------------------------------------------------------

    async def stop(self) -> None:
        self.stopping = True
        if self.server is not None:
            await self.server.stop()
        if self.groups is not None:
            self.groups.stop()
        if self.share_state is not None:
            self.share_state.stop()
        if self.txn is not None:
            self.txn.stop()
        self.maintenance.stop()
        for part in self.replicas.snapshot():
            part.wake()
        await asyncio.get_running_loop().run_in_executor(None, self.replicas.close)
        if self.quorum is not None:
            try:
                await self.quorum.close()
            except Exception:
                log.exception("closing the metadata quorum failed")
