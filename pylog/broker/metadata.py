"""The broker's side of the metadata quorum: reads of the committed image, controller
commands, and the listener that turns applied records into partition logs.

The quorum (``pylog.cluster.quorum.MetadataQuorum``, a Raft quorum of one here)
replays ``__cluster_metadata`` on start. Replayed records are not acted on one by
one (a topic deleted and re-created under the same name would have its new data
wiped by the replayed removal of the old one); instead the partition logs are
reconciled with the final image once replay is done. After that every applied
record is acted on as it comes.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pylog.cluster.controller import ControllerResult, QuorumController
from pylog.cluster.image import MetadataImage, PartitionImage, TopicImage
from pylog.cluster.metadata_log import METADATA_DIR
from pylog.cluster.quorum import MetadataChange, MetadataQuorum
from pylog.cluster.records import (
    BrokerEndpoint,
    ConfigRecord,
    ConfigResourceType,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
)

if TYPE_CHECKING:
    from pylog.broker.broker import Broker

log = logging.getLogger(__name__)
T = TypeVar("T")

META_PROPERTIES = "meta.properties"
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class BrokerMetadata:
    def __init__(self, broker: Broker) -> None:
        cfg = broker.config
        self.broker = broker
        self.node_id = broker.node_id
        self.cluster_id = load_cluster_id(broker.data_dir, self.node_id, cfg.raw("cluster.id"))
        self.quorum = MetadataQuorum(
            broker.data_dir,
            self.node_id,
            default_num_partitions=cfg.int("num.partitions"),
            default_replication_factor=cfg.int("default.replication.factor"),
            delete_topic_enable=cfg.bool("delete.topic.enable"),
        )
        self.quorum.add_listener(self._on_change)
        self._live = False
        self.broker_epoch = -1

    @property
    def image(self) -> MetadataImage:
        return self.quorum.image

    @property
    def controller_id(self) -> int:
        leader = self.quorum.leader_id
        return -1 if leader is None else leader

    async def start(self) -> None:
        await self.quorum.start()
        await self.quorum.wait_for_controller()
        self.broker.config.set_dynamic(self.image.broker_configs(), self.image.broker_configs(self.node_id))
        self._reconcile()
        self._live = True

    async def register(self, host: str, port: int) -> None:
        endpoint = BrokerEndpoint("PLAINTEXT", host, port)
        incarnation = uuid.uuid4()
        result = await self.execute(lambda c: c.register_broker(self.node_id, incarnation, [endpoint]))
        if result.error_code:
            raise RuntimeError(f"broker registration failed: {result.error_message}")
        self.broker_epoch = result.broker_epoch

    async def execute(self, op: Callable[[QuorumController], ControllerResult[T]]) -> T:
        """Run a controller command; returns once its records are committed and applied."""
        return await self.quorum.execute(op)

    async def close(self) -> None:
        await self.quorum.close()

    # --- reads ------------------------------------------------------------------------------

    def topic(self, name_or_id: str | uuid.UUID) -> TopicImage | None:
        return self.image.topic(name_or_id)

    def partitions(self, topic: TopicImage) -> Sequence[PartitionImage]:
        parts = self.image.partitions(topic.topic_id)
        return [parts[i] for i in sorted(parts)]

    def topic_configs(self, name: str) -> dict[str, str]:
        return dict(self.image.topic_configs(name))

    def brokers(self) -> list[tuple[int, str, int, str | None]]:
        """(node id, host, port, rack) of the live brokers."""
        out = []
        for b in sorted(self.image.brokers.values(), key=lambda b: b.broker_id):
            if not b.fenced and b.endpoints:
                e = b.endpoints[0]
                out.append((b.broker_id, e.host, e.port, b.rack))
        return out

    # --- applied records --------------------------------------------------------------------

    def _reconcile(self) -> None:
        """Open every partition the image assigns here; delete logs of topics that are gone."""
        known: set[tuple[str, int]] = set()
        for name, topic in self.image.topics.items():
            for index, part in self.image.partitions(topic.topic_id).items():
                if self.node_id in part.replicas:
                    self.broker.on_partition(name, index, topic.topic_id, self.topic_configs(name))
                    known.add((name, index))
        self.broker.replicas.delete_strays(known, skip={METADATA_DIR})

    def _on_change(self, change: MetadataChange) -> None:
        r = change.record
        if isinstance(r, ConfigRecord) and r.resource_type == ConfigResourceType.BROKER:
            self.broker.config.set_dynamic(
                self.image.broker_configs(), self.image.broker_configs(self.node_id)
            )
            if self._live:
                self.broker.on_broker_configs()
            return
        if not self._live or change.topic is None:
            return
        name = change.topic.name
        if isinstance(r, PartitionRecord):
            if self.node_id in r.replicas:
                self.broker.on_partition(name, r.partition_id, r.topic_id, self.topic_configs(name))
        elif isinstance(r, PartitionChangeRecord):
            pass  # a single node stays leader of everything it hosts
        elif isinstance(r, RemoveTopicRecord):
            self.broker.on_topic_deleted(name)
        elif isinstance(r, ConfigRecord):
            self.broker.on_topic_configs(name, self.topic_configs(name))


async def open_metadata(broker: Broker) -> BrokerMetadata:
    md = BrokerMetadata(broker)
    await md.start()
    return md


def load_cluster_id(data_dir: Path, node_id: int, wanted: str | None) -> str:
    """The cluster id kept in ``meta.properties`` (Kafka's file), created on first start."""
    path = data_dir / META_PROPERTIES
    props: dict[str, str] = {}
    if path.exists():
        for line in path.read_text("utf-8").splitlines():
            key, sep, value = line.partition("=")
            if sep and not key.startswith("#"):
                props[key.strip()] = value.strip()
    cluster_id = props.get("cluster.id")
    if cluster_id is None:
        cluster_id = wanted or base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        tmp = path.with_suffix(".tmp")
        tmp.write_text(f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n", "utf-8")
        tmp.replace(path)
    elif wanted and wanted != cluster_id:
        raise RuntimeError(f"{path} belongs to cluster {cluster_id}, not {wanted}")
    if props.get("node.id") not in (None, str(node_id)):
        raise RuntimeError(f"{path} belongs to node {props['node.id']}, not {node_id}")
    return cluster_id
