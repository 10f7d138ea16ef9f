"""``ReplicaPublisher``: turns the metadata image into this node's replicas and their roles.

For every partition the image assigns here it opens the log and makes the replica leader or
follower as the image says (the image is the only source of roles); a leader change of an
internal topic's partition loads or drops that partition in its coordinator, and followers are
handed to the replica fetchers. Partitions moved off this node and deleted topics are removed.
On start the whole image is reconciled one partition at a time, the node's other work (heartbeats,
Raft ticks, requests) running between slices; when a snapshot replaces the image, at once.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from pylog.broker.datapath.partition import Partition
from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.cluster.image import MetadataImage, PartitionImage
from pylog.cluster.image_feed import MetadataChange
from pylog.cluster.metadata_log import METADATA_DIR
from pylog.cluster.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    UnregisterBrokerRecord,
)

log = logging.getLogger(__name__)


class Coordinator(Protocol):
    def become_leader(self, p: int) -> None: ...

    def resign(self, p: int) -> None: ...


class Followers(Protocol):
    """The replica fetchers: who follows which leader."""

    def follow(self, part: Partition) -> None: ...

    def unfollow(self, part: Partition) -> None: ...

    def brokers_changed(self) -> None: ...


class ReplicaPublisher:
    def __init__(
        self,
        node_id: int,
        replicas: ReplicaManager,
        *,
        followers: Followers,
        coordinators: Mapping[str, Coordinator],
        on_open: Callable[[Partition], None],
        on_topic_removed: Callable[[str], None],
        set_dynamic_configs: Callable[[MetadataImage], None],
        now_ms: Callable[[], int],
    ) -> None:
        self.node_id = node_id
        self.replicas = replicas
        self.followers = followers
        self.coordinators = coordinators
        self._on_open = on_open
        self._on_topic_removed = on_topic_removed
        self._set_dynamic = set_dynamic_configs
        self._now_ms = now_ms
        self._reconciling = 0  # counts reconciliations: a newer one ends the one in progress

    # ------------------------------------------------------------------ MetadataPublisher

    def on_image_loaded(self, image: MetadataImage) -> None:
        for _ in self.reconcile(image):
            pass

    def reconcile(self, image: MetadataImage) -> Iterator[None]:
        """Make the hosted replicas what ``image`` says, one partition per step (the caller may run
        other work between steps: a node opening thousands of logs at start keeps heartbeating).
        Each step reads its partition from the image as it is then, so records applied between
        steps are not undone; a newer reconciliation (a snapshot) ends this one."""
        self._reconciling += 1
        generation = self._reconciling
        self._set_dynamic(image)
        self.replicas.throttle_rates_changed()
        self._brokers_changed(image)
        known: set[tuple[str, int]] = set()
        hosted: list[tuple[str, uuid.UUID, int]] = []
        for name, topic in image.topics.items():
            for p in image.partitions(topic.topic_id).values():
                hosted.append((name, topic.topic_id, p.partition_id))
                if self.node_id in p.replicas:
                    known.add((name, p.partition_id))
        for part in self.replicas.snapshot():
            if (part.topic, part.index) not in known:
                self._remove(part.topic, part.index)
        self.replicas.delete_strays(known, skip={METADATA_DIR})
        for name, topic_id, index in hosted:
            yield
            if generation != self._reconciling:
                return
            now = image.partition(topic_id, index)
            if now is not None:
                self._apply(name, topic_id, now, image)

    def on_change(self, change: MetadataChange, image: MetadataImage) -> None:
        r = change.record
        if isinstance(r, ConfigRecord) and r.resource_type == ConfigResourceType.BROKER:
            self._set_dynamic(image)
            self.replicas.throttle_rates_changed()
            for topic in self.replicas.topics():
                self.replicas.update_configs(topic, dict(image.topic_configs(topic)))
            return
        if isinstance(r, (RegisterBrokerRecord, BrokerRegistrationChangeRecord, UnregisterBrokerRecord)):
            self._brokers_changed(image)
            self.followers.brokers_changed()
            return
        if change.topic is None:
            return
        name = change.topic.name
        if isinstance(r, (PartitionRecord, PartitionChangeRecord)):
            p = image.partition(r.topic_id, r.partition_id)
            if p is not None:
                self._apply(name, r.topic_id, p, image)
        elif isinstance(r, RemoveTopicRecord):
            for index in list(self.replicas.topic_partitions(name)):
                self._remove(name, index)
            self._on_topic_removed(name)
        elif isinstance(r, ConfigRecord):
            self.replicas.update_configs(name, dict(image.topic_configs(name)))

    def _brokers_changed(self, image: MetadataImage) -> None:
        """The live brokers and their racks, for the replica selector (KIP-392)."""
        self.replicas.set_live_brokers({b: reg.rack for b, reg in image.brokers.items() if not reg.fenced})

    # ------------------------------------------------------------------ one partition

    def _apply(self, name: str, topic_id: uuid.UUID, p: PartitionImage, image: MetadataImage) -> None:
        if self.node_id not in p.replicas:
            if self.replicas.get(name, p.partition_id) is not None:
                self._remove(name, p.partition_id)
            return
        part = self.replicas.get(name, p.partition_id)
        if part is None or part.topic_id != topic_id:
            part = self.replicas.ensure_partition(
                name, p.partition_id, topic_id, dict(image.topic_configs(name))
            )
            self._on_open(part)
        coordinator = self.coordinators.get(name)
        if p.leader == self.node_id:
            if part.become_leader(
                self.node_id, p.leader_epoch, p.partition_epoch, p.replicas, p.isr, self._now_ms()
            ):
                self.followers.unfollow(part)
                log.info("%s-%d: leader at epoch %d", name, p.partition_id, p.leader_epoch)
                if coordinator is not None:
                    coordinator.become_leader(p.partition_id)
        else:
            was_leader = part.is_leader
            if part.become_follower(
                self.node_id, p.leader, p.leader_epoch, p.partition_epoch, p.replicas, p.isr
            ):
                if coordinator is not None and was_leader:
                    coordinator.resign(p.partition_id)
                if p.leader >= 0:
                    log.info(
                        "%s-%d: following %d at epoch %d", name, p.partition_id, p.leader, p.leader_epoch
                    )
                    self.followers.follow(part)
                else:
                    log.info("%s-%d: offline (no leader)", name, p.partition_id)
                    self.followers.unfollow(part)

    def _remove(self, name: str, index: int) -> None:
        part = self.replicas.get(name, index)
        if part is None:
            return
        self.followers.unfollow(part)
        coordinator = self.coordinators.get(name)
        if coordinator is not None and part.is_leader:
            coordinator.resign(index)
        part.become_follower(self.node_id, -1, part.leader_epoch, part.partition_epoch, (), ())
        self.replicas.remove_partition(name, index)
