"""The broker side of a node's metadata: reads of the committed image, and the publishers that
act on applied records (partition logs, dynamic configs).

The quorum (``pylog.cluster.quorum.MetadataQuorum``) replays ``__cluster_metadata`` on start;
publishers see the final image once replay is done, then every applied record as it comes.
Publishing holds the event loop for at most ``SLICE_S`` a turn (the start's reconciliation, and a
large entry's records, continue on later turns), so the node's control plane (heartbeats, Raft
ticks, fencing checks) never waits behind thousands of partitions opening.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import logging
import random
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.cluster.image import MetadataImage, PartitionImage, TopicImage
from pylog.cluster.image_feed import ImageListener, MetadataChange, MetadataListener
from pylog.cluster.voters import directory_id_str, new_directory_id, parse_directory_id

log = logging.getLogger(__name__)

META_PROPERTIES = "meta.properties"
SLICE_S = 0.02  # the longest publishing (reconciliation, applied records) holds the loop per turn
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


class MetadataView(Protocol):
    """Reads of the committed metadata image: what request handlers and coordinators may see."""

    @property
    def image(self) -> MetadataImage: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def controller_id(self) -> int: ...

    @property
    def kraft_version(self) -> int: ...

    def topic(self, name_or_id: str | uuid.UUID) -> TopicImage | None: ...

    def partitions(self, topic: TopicImage) -> Sequence[PartitionImage]: ...

    def topic_configs(self, name: str) -> dict[str, str]: ...

    def brokers(self, listener: str | None = None) -> list[tuple[int, str, int, str | None]]: ...

    async def published(self) -> None:
        """Return once every record applied so far has been acted on (its logs open)."""


def controller_for_clients(view: MetadataView, node_id: int, listener: str | None = None) -> int:
    """The controller a broker names to clients: itself while it is a live broker, else any live
    broker (Kafka's KRaft names a random alive broker, which forwards controller requests); -1
    when there is none.

    Naming itself matters right after another broker dies: until the controller fences it, the
    dead broker is still "alive" in the image, and a client sent there would time out. The
    broker answering is one the client has just reached."""
    live = [b[0] for b in view.brokers(listener)]
    if node_id in live:
        return node_id
    return random.choice(live) if live else -1


class MetadataPublisher(Protocol):
    """What a node does with applied metadata (partition logs, configs); called on the loop."""

    def on_image_loaded(self, image: MetadataImage) -> None:
        """The whole image is new (a snapshot replaced it): reconcile with it."""

    def reconcile(self, image: MetadataImage) -> Iterator[None]:
        """Reconcile with the whole image (start) in steps, other work may run between them."""

    def on_change(self, change: MetadataChange, image: MetadataImage) -> None:
        """One record was applied to ``image``."""


class MetadataSource(Protocol):
    """Where a broker's image comes from: its own controller quorum, or the active controller
    it fetches from as an observer."""

    @property
    def image(self) -> MetadataImage: ...

    @property
    def leader_id(self) -> int | None: ...

    @property
    def kraft_version(self) -> int: ...

    def add_listener(self, listener: MetadataListener) -> None: ...

    def add_image_listener(self, listener: ImageListener) -> None: ...


class BrokerMetadata:
    """The committed image as the broker side of a node sees it, and the publishers acting on it."""

    def __init__(self, quorum: MetadataSource, cluster_id: str, *, slice_s: float = SLICE_S,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.quorum = quorum
        self.slice_s = slice_s
        self.clock = clock  # measures the loop turn's slice
        self.cluster_id = cluster_id
        self._publishers: list[MetadataPublisher] = []
        self._waiters: list[tuple[Callable[[MetadataImage], bool], asyncio.Event]] = []
        self._live = False
        # changes waiting for a later loop turn (this one's SLICE_S is spent), in applied order
        self._backlog: collections.deque[MetadataChange] = collections.deque()
        self._turn_ends: float | None = None  # when this loop turn's slice ends (None: not started)
        self._drainer: asyncio.Task[None] | None = None
        quorum.add_listener(self._on_change)
        quorum.add_image_listener(self._on_image)

    def add_publisher(self, publisher: MetadataPublisher) -> None:
        self._publishers.append(publisher)

    async def wait_for(self, predicate: Callable[[MetadataImage], bool]) -> None:
        """Return once ``predicate(image)`` holds (checked after every applied record)."""
        if predicate(self.image):
            return
        event = asyncio.Event()
        self._waiters.append((predicate, event))
        await event.wait()

    @property
    def image(self) -> MetadataImage:
        return self.quorum.image

    @property
    def controller_id(self) -> int:
        leader = self.quorum.leader_id
        return -1 if leader is None else leader

    @property
    def kraft_version(self) -> int:
        """kraft.version lives in the Raft log's control records, not in a FeatureLevelRecord."""
        return self.quorum.kraft_version

    async def start_publishing(self) -> None:
        """Replay is done: act on every record applied from now on, and reconcile with the image.

        Replayed records are not acted on one by one (a topic deleted and re-created under the
        same name would have its new data wiped by the replayed removal of the old one). The
        reconciliation runs in slices of ``slice_s``, yielding to the loop between them:
        opening thousands of logs must not hold up the node's heartbeats, Raft ticks and fencing
        decisions."""
        self._live = True
        for p in self._publishers:
            slice_end = self.clock.monotonic_s() + self.slice_s
            for _ in p.reconcile(self.image):
                if self.clock.monotonic_s() >= slice_end:
                    await asyncio.sleep(0)
                    slice_end = self.clock.monotonic_s() + self.slice_s

    async def published(self) -> None:
        """Return once no applied change waits for a later loop turn (the partitions the image
        has so far are open here, in their roles)."""
        while self._backlog and self._drainer is not None and not self._drainer.done():
            await asyncio.shield(self._drainer)

    # --- reads ------------------------------------------------------------------------------

    def topic(self, name_or_id: str | uuid.UUID) -> TopicImage | None:
        return self.image.topic(name_or_id)

    def partitions(self, topic: TopicImage) -> Sequence[PartitionImage]:
        parts = self.image.partitions(topic.topic_id)
        return [parts[i] for i in sorted(parts)]

    def topic_configs(self, name: str) -> dict[str, str]:
        return dict(self.image.topic_configs(name))

    def brokers(self, listener: str | None = None) -> list[tuple[int, str, int, str | None]]:
        """(node id, host, port, rack) of the live brokers, on ``listener`` (the one a request came
        in on, as Kafka answers) where the broker has it."""
        out = []
        for b in sorted(self.image.brokers.values(), key=lambda b: b.broker_id):
            if not b.fenced and b.endpoints:
                e = next((e for e in b.endpoints if e.name == listener), b.endpoints[0])
                out.append((b.broker_id, e.host, e.port, b.rack))
        return out

    # --- applied records --------------------------------------------------------------------

    def _on_image(self, image: MetadataImage) -> None:
        self._check_waiters()
        if self._live:
            self._backlog.clear()  # the reconciliation with the new image covers them
            for p in self._publishers:
                p.on_image_loaded(image)

    def _check_waiters(self) -> None:
        if self._waiters:
            done = [(p, e) for p, e in self._waiters if p(self.image)]
            for p, e in done:
                e.set()
                self._waiters.remove((p, e))

    def _on_change(self, change: MetadataChange) -> None:
        """Publish at once while this loop turn's slice lasts (the first change of a turn always).
        Past it (an entry of thousands of partition records: a large CreateTopics, a broker
        unfenced with all its leaders) the rest waits for later turns, in order, so the node's
        heartbeats and Raft ticks run between slices. A deferred change is published against the
        image as it is then: a partition changed again meanwhile gets its latest state, one of a
        removed topic is skipped."""
        self._check_waiters()
        if not self._live:
            return
        if self._backlog or self._slice_spent():
            self._backlog.append(change)
            if self._drainer is None or self._drainer.done():
                self._drainer = asyncio.get_running_loop().create_task(self._drain(), name="metadata-publish")
            return
        self._publish(change)

    def _publish(self, change: MetadataChange) -> None:
        for p in self._publishers:
            p.on_change(change, self.image)

    def _slice_spent(self) -> bool:
        now = self.clock.monotonic_s()
        if self._turn_ends is None:
            try:
                asyncio.get_running_loop().call_soon(self._next_turn)
            except RuntimeError:  # no loop (a tool replaying the log): nothing else waits
                return False
            self._turn_ends = now + self.slice_s
            return False
        return now >= self._turn_ends

    def _next_turn(self) -> None:
        self._turn_ends = None

    async def _drain(self) -> None:
        while self._backlog:
            await asyncio.sleep(0)
            ends = self.clock.monotonic_s() + self.slice_s
            while self._backlog:  # at least one change a turn
                change = self._backlog.popleft()
                try:
                    self._publish(change)
                except Exception:  # as when published at once (the feed logs and goes on)
                    log.exception("metadata publisher failed on %r", change.record)
                if self.clock.monotonic_s() >= ends:
                    break


def read_meta_properties(data_dir: Path) -> dict[str, str]:
    path = data_dir / META_PROPERTIES
    props: dict[str, str] = {}
    if path.exists():
        for line in path.read_text("utf-8").splitlines():
            key, sep, value = line.partition("=")
            if sep and not key.startswith("#"):
                props[key.strip()] = value.strip()
    return props


def load_meta_properties(
    data_dir: Path, node_id: int, wanted: str | None, directory_id: uuid.UUID | None = None
) -> tuple[str, uuid.UUID]:
    """The cluster id and directory id kept in ``meta.properties`` (Kafka's file), created on first
    start (``directory_id``: the one to write, else a new one). A directory written before
    directory ids gets one now."""
    path = data_dir / META_PROPERTIES
    props = read_meta_properties(data_dir)
    cluster_id = props.get("cluster.id")
    if cluster_id is not None and wanted and wanted != cluster_id:
        raise RuntimeError(f"{path} belongs to cluster {cluster_id}, not {wanted}")
    if props.get("node.id") not in (None, str(node_id)):
        raise RuntimeError(f"{path} belongs to node {props['node.id']}, not {node_id}")
    stored = props.get("directory.id")
    if cluster_id is not None and stored:
        return cluster_id, parse_directory_id(stored)
    if cluster_id is None:
        cluster_id = wanted or base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    dir_id = directory_id or new_directory_id()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(
        f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\ndirectory.id={directory_id_str(dir_id)}\n",
        "utf-8",
    )
    tmp.replace(path)
    return cluster_id, dir_id


def load_cluster_id(data_dir: Path, node_id: int, wanted: str | None) -> str:
    """The cluster id kept in ``meta.properties`` (Kafka's file), created on first start."""
    return load_meta_properties(data_dir, node_id, wanted)[0]
