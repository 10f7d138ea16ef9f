"""``MetadataObserver``: a broker that is not a controller voter follows the metadata log.

It pulls committed entries from the active controller (PylogMetadataFetch, long-polling on the
controller listener), applies them to its image through an ``ImageFeed`` as a voter would, and
takes the latest snapshot when it is behind the controller's log start. The image starts empty
at every start: a broker keeps no copy of the log, it fetches it again (snapshot plus tail). The
active controller is found by asking the voters (or ``controller.quorum.bootstrap.servers``) in
turn; every answer names the leader and its endpoint, and the voters' endpoints follow the
``VotersRecord`` entries the broker applies (``addresses``).
"""

from __future__ import annotations

import asyncio
import logging

from pylog.cluster.channel import ChannelError
from pylog.cluster.image import MetadataImage
from pylog.cluster.image_feed import ImageFeed, ImageListener, MetadataListener
from pylog.cluster.metadata_fetch import MetadataFetches
from pylog.cluster.raft_transport import snapshot_from_wire
from pylog.protocol.errors import ErrorCode
from pylog.tasks import cancel_and_wait, keep_running

log = logging.getLogger(__name__)

RETRY_S = 0.1


class MetadataObserver:
    def __init__(self, fetches: MetadataFetches) -> None:
        self.node_id = fetches.node_id
        self.cluster_id = fetches.cluster_id
        self.feed = ImageFeed()
        self.addresses = fetches.addresses
        self._fetches = fetches
        self.leader_id: int | None = None
        self.high_watermark = 0
        self._caught_up = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def image(self) -> MetadataImage:
        return self.feed.image

    @property
    def applied_offset(self) -> int:
        return self.feed.image.offset

    @property
    def kraft_version(self) -> int:
        """The kraft.version the metadata log's control records set."""
        return self.feed.kraft_version

    def add_listener(self, listener: MetadataListener) -> None:
        self.feed.add_listener(listener)

    def add_image_listener(self, listener: ImageListener) -> None:
        self.feed.add_image_listener(listener)

    async def start(self) -> None:
        """Start fetching; returns once the image caught up with the controller's high watermark."""
        self._task = asyncio.create_task(
            keep_running("the metadata observer", self._run), name=f"metadata-observer-{self.node_id}"
        )
        await self._caught_up.wait()

    async def _run(self) -> None:
        while True:
            target = self.leader_id
            if target is None or self.addresses.address(target) is None:
                target = self.addresses.next_candidate()
            address = self.addresses.address(target) if target is not None else None
            if address is None:
                await asyncio.sleep(RETRY_S)
                continue
            try:
                resp = await self._fetches.fetch(address, self.applied_offset + 1)
            except ChannelError as exc:
                log.debug("metadata fetch from %s: %s", address, exc)
                self.leader_id = None
                await asyncio.sleep(RETRY_S)
                continue
            if resp.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID:
                log.error("the controllers belong to another cluster than %s", self.cluster_id)
                await asyncio.sleep(1.0)
                continue
            if resp.error_code:
                self.leader_id = resp.leader_id if resp.leader_id >= 0 and resp.leader_id != target else None
                await asyncio.sleep(RETRY_S if self.leader_id is None else 0)
                continue
            self.leader_id = target
            if resp.snapshot is not None:
                snap = snapshot_from_wire(resp.snapshot)
                self.feed.restore(snap.index, snap.data, voters=snap.voters, kraft_version=snap.kraft_version)
                self.addresses.set_voters(self.feed.voters)
                log.info("metadata image loaded from a snapshot at offset %d", snap.index)
            voters = self.feed.voters
            for e in resp.entries:
                if e.index == self.applied_offset + 1:
                    self.feed.apply(e.index, bytes(e.data))
            if self.feed.voters is not voters:
                self.addresses.set_voters(self.feed.voters)
            self.high_watermark = resp.high_watermark
            if self.applied_offset >= self.high_watermark:
                self._caught_up.set()

    async def close(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        self._fetches.close()
