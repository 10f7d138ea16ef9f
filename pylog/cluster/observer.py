"""``MetadataObserver``: a broker that is not a controller voter follows the metadata log.

It pulls committed entries from the active controller (PylogMetadataFetch, long-polling on the
controller listener), applies them to its image through an ``ImageFeed`` as a voter would, and
takes the latest snapshot when it is behind the controller's log start. The image starts empty
at every start: a broker keeps no copy of the log, it fetches it again (snapshot plus tail). The
active controller is found by asking the voters in turn; every answer names the leader.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Mapping

from pylog.cluster.channel import ChannelError, NodeChannel
from pylog.cluster.image import MetadataImage
from pylog.cluster.image_feed import ImageFeed, ImageListener, MetadataListener
from pylog.protocol.api import PylogApiKey
from pylog.protocol.errors import ErrorCode
from pylog.security.client import PLAINTEXT, ClientSecurity
from pylog.tasks import cancel_and_wait

log = logging.getLogger(__name__)

MAX_WAIT_MS = 500
MAX_BYTES = 8 * 1024 * 1024
RETRY_S = 0.1


class MetadataObserver:
    def __init__(
        self,
        node_id: int,
        cluster_id: str,
        voters: Mapping[int, tuple[str, int]],
        *,
        request_timeout_s: float,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.feed = ImageFeed()
        self.request_timeout_s = request_timeout_s
        self._channels = {
            v: NodeChannel(h, p, client_id=f"pylog-observer-{node_id}", security=security)
            for v, (h, p) in voters.items()
        }
        self._next = itertools.cycle(sorted(voters))
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

    def add_listener(self, listener: MetadataListener) -> None:
        self.feed.add_listener(listener)

    def add_image_listener(self, listener: ImageListener) -> None:
        self.feed.add_image_listener(listener)

    async def start(self) -> None:
        """Start fetching; returns once the image caught up with the controller's high watermark."""
        self._task = asyncio.create_task(self._run(), name=f"metadata-observer-{self.node_id}")
        await self._caught_up.wait()

    async def _run(self) -> None:
        while True:
            target = self.leader_id if self.leader_id is not None else next(self._next)
            body = {
                "cluster_id": self.cluster_id,
                "replica_id": self.node_id,
                "fetch_offset": self.applied_offset + 1,
                "max_wait_ms": MAX_WAIT_MS,
                "max_bytes": MAX_BYTES,
            }
            try:
                resp = await self._channels[target].request(
                    PylogApiKey.METADATA_FETCH, 0, body, MAX_WAIT_MS / 1000 + self.request_timeout_s
                )
            except ChannelError as exc:
                log.debug("metadata fetch from %d: %s", target, exc)
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
                self.feed.restore(resp.snapshot.index, bytes(resp.snapshot.data))
                log.info("metadata image loaded from a snapshot at offset %d", resp.snapshot.index)
            for e in resp.entries:
                if e.index == self.applied_offset + 1:
                    self.feed.apply(e.index, bytes(e.data))
            self.high_watermark = resp.high_watermark
            if self.applied_offset >= self.high_watermark:
                self._caught_up.set()

    async def close(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        for ch in self._channels.values():
            ch.close()
