"""The high watermarks of partitions led by other brokers, for the lag of the groups coordinated here.

A group's coordinator knows what the group committed, but a partition led elsewhere has its high
watermark on its leader. A scrape that needs such partitions asks for them: the event loop then
sends one ListOffsets (latest, read_uncommitted: the high watermark) to each leader the metadata
image names, through the node's own client, and the scrape waits for the answers at most
``WAIT_S``. Answers are kept, so a slow or stopped leader leaves the previous value (or none) in
the scrape rather than holding it past a scraper's timeout, and a node nobody scrapes asks nothing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.protocol.api import ApiKey

if TYPE_CHECKING:
    from pylog.client.cluster import KafkaClient

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

REFRESH_S = 1.0
"""Scrapes closer together than this share one round of ListOffsets."""

WAIT_S = 0.5
"""How long a scrape waits for the round it started before it takes what it has (a scrape while
an earlier round still waits for a leader does not wait)."""

REQUEST_TIMEOUT_S = 5.0
MAX_PARTITIONS = 20_000
"""Partitions asked for in one round, at most (the rest keep their previous value)."""

LATEST = -1
READ_UNCOMMITTED = 0


class LeaderOffsets:
    """High watermarks of partitions this node does not lead, asked of their leaders.

    ``image`` gives the node's metadata image (None before it has one), ``own_client`` the
    (bootstrap servers, client security) of the node's own client of its listener."""

    def __init__(
        self, node_id: int, image: Callable[[], Any], own_client: Callable[[], tuple[str, Any]],
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.node_id = node_id
        self.clock = clock
        self._image = image
        self._own_client = own_client
        self._client: KafkaClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._offsets: dict[TopicPartition, int] = {}
        self._round: concurrent.futures.Future[None] | None = None
        self._round_at = 0.0
        self.failures = 0  # rounds in which a leader did not answer

    def start(self) -> None:
        """On the event loop: rounds run there."""
        self._loop = asyncio.get_running_loop()

    async def stop(self) -> None:
        self._loop = None
        if self._round is not None:
            self._round.cancel()  # a leader that does not answer must not hold the stop
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.close()
            self._client = None

    def high_watermarks(self, wanted: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """From a scrape thread: the high watermarks of ``wanted`` as their leaders last answered,
        after a round that asks them again (waited for at most ``WAIT_S``)."""
        loop = self._loop
        if loop is None or not wanted:
            return {}
        now = self.clock.monotonic_s()
        current = self._round
        if current is None or (current.done() and now - self._round_at >= REFRESH_S):
            self._round_at = now
            try:
                current = self._round = asyncio.run_coroutine_threadsafe(self._ask(list(wanted)), loop)
            except RuntimeError:  # the loop has closed: the node is stopping
                return {}
            with contextlib.suppress(concurrent.futures.TimeoutError, Exception):
                current.result(timeout=WAIT_S)
        offsets = self._offsets
        return {tp: offsets[tp] for tp in wanted if tp in offsets}

    async def _ask(self, wanted: list[TopicPartition]) -> None:
        keep = set(wanted)
        for key in [k for k in self._offsets if k not in keep]:  # no group here commits it any more
            del self._offsets[key]
        image = self._image()
        if image is None:
            return
        by_leader: dict[int, dict[str, list[int]]] = {}
        for topic, index in wanted[:MAX_PARTITIONS]:
            p = image.partition(topic, index)
            if p is None or p.leader < 0 or p.leader == self.node_id:
                continue
            by_leader.setdefault(p.leader, {}).setdefault(topic, []).append(index)
        if not by_leader:
            return
        client = self._client
        if client is None:
            from pylog.client.cluster import KafkaClient

            bootstrap, security = self._own_client()
            client = self._client = KafkaClient(
                bootstrap, client_id="pylog-metrics", request_timeout_s=REQUEST_TIMEOUT_S,
                security=security,
            )
        answers = await asyncio.gather(
            *(self._ask_leader(client, leader, topics) for leader, topics in by_leader.items()),
            return_exceptions=True,
        )
        if any(isinstance(a, BaseException) for a in answers):
            self.failures += 1
            with contextlib.suppress(Exception):  # a leader moved or restarted: learn its address anew
                await client.metadata([])

    async def _ask_leader(self, client: KafkaClient, leader: int, topics: dict[str, list[int]]) -> None:
        body = {
            "replica_id": -1,
            "isolation_level": READ_UNCOMMITTED,
            "topics": [
                {"name": t, "partitions": [{"partition_index": i, "timestamp": LATEST} for i in parts]}
                for t, parts in topics.items()
            ],
        }
        try:
            resp = await asyncio.wait_for(
                client.request(ApiKey.LIST_OFFSETS, body, node=leader, wanted=(2, 7)), REQUEST_TIMEOUT_S
            )
        except Exception as exc:
            log.debug("metrics: ListOffsets to broker %d failed: %s", leader, exc)
            raise
        offsets = self._offsets
        for t in resp.topics:
            for p in t.partitions:
                key = (t.name, p.partition_index)
                if p.error_code == 0 and p.offset >= 0:
                    offsets[key] = p.offset
                else:  # no longer the leader, or gone: no value rather than an old one
                    offsets.pop(key, None)
