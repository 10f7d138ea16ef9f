"""Followers fetching from their leaders with Kafka's replica Fetch.

One ``ReplicaFetcher`` task per leader broker fetches every partition this node follows from
it, in one long-polling Fetch (``replica.fetch.wait.max.ms``) with this node's replica id, the
leader epoch it knows, its log end as the fetch offset and the epoch of its last batch. The
fetches share a fetch session with the leader (KIP-227, ``pylog.client.fetch_session``): after
the first, a Fetch names only the partitions whose position moved (and forgets those no longer
fetched), and the leader answers only the partitions with something new. A
partition that has just started following a leader (a new epoch, or a restart) first finds
where its log and the leader's part (OffsetForLeaderEpoch, ``pylog.replication.truncation``)
and truncates there. Batches are appended as the leader wrote them; the leader's high watermark
and log start offset follow. A leader that moved or fenced us leaves the partition waiting for
the next metadata change.

A partition whose last answer carried records (it is catching up) asks for an equal share of the
response budget (``replica.fetch.response.max.bytes``) left after every other partition's
``replica.fetch.max.bytes``, never less than that: a follower behind on a few partitions gets
several batches per round trip instead of one (a 1 MB batch fills a 1 MiB ask), while idle
partitions, throttled ones (so a response never carries more than Kafka's for them), and a fetch
of many partitions keep Kafka's per-partition limit. The leader still answers as soon as it has
``replica.fetch.min.bytes``, so a larger ask never waits longer; it only carries more when the
leader holds more.

The follower replication throttle (``follower.replication.throttled.*``, KIP-73) leaves a
throttled partition out of the fetch while the bytes fetched for throttled partitions are over
the rate, unless the partition is in sync (its log end reached the leader's high watermark at the
last answer), so a throttle never drops a replica from the ISR.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import CorruptRecordBatch, ErrorCode
from pylog.storage import StorageError

from pylog.broker.control.broker_channels import BrokerChannels
from pylog.broker.datapath.batch_bytes import InvalidRecordStructure
from pylog.broker.datapath.partition import Partition, Role
from pylog.client.errors import TransportError
from pylog.client.fetch_session import FetchSessionHandler
from pylog.client.protocol import Channel
from pylog.metrics.counters import TopicStats
from pylog.quotas.replication import ReplicationQuota, should_throttle
from pylog.replication import truncation_offset, truncation_on_divergence
from pylog.tasks import cancel_and_wait

log = logging.getLogger(__name__)

FETCH_VERSION = 12
EPOCH_VERSION = 4
NO_EPOCH = -1


def catching_up_fetch_bytes(
    partition_max_bytes: int, response_max_bytes: int, partitions: int, catching_up: int
) -> int:
    """Bytes a catching-up partition asks for in a replica fetch of ``partitions`` partitions of
    which ``catching_up`` are catching up: an equal share of the response budget the others'
    ``replica.fetch.max.bytes`` leave, at least ``replica.fetch.max.bytes``."""
    if catching_up <= 0:
        return partition_max_bytes
    spare = response_max_bytes - partition_max_bytes * (partitions - catching_up)
    return max(partition_max_bytes, spare // catching_up)


@dataclass
class _Followed:
    part: Partition
    leader_epoch: int
    truncated: bool = False  # the log has been checked against this leader epoch
    paused_until: float = 0.0
    in_sync: bool = False  # caught up to the leader's high watermark at the last answer
    catching_up: bool = False  # the last answer carried records: the leader may hold more


class ReplicaFetcherManager:
    """Which fetcher follows which partition (``Followers`` for the replica publisher)."""

    def __init__(
        self,
        node_id: int,
        channels: BrokerChannels,
        *,
        wait_max_ms: int,
        min_bytes: int,
        max_bytes: int,
        partition_max_bytes: int,
        backoff_ms: int,
        request_timeout_ms: int,
        now_ms: Callable[[], int],
        quota: ReplicationQuota | None = None,
        monotonic_ms: Callable[[], int] | None = None,
        topic_stats: TopicStats | None = None,
    ) -> None:
        self.node_id = node_id
        self.channels = channels
        self.settings = (
            wait_max_ms,
            min_bytes,
            max_bytes,
            partition_max_bytes,
            backoff_ms,
            request_timeout_ms,
        )
        self._now_ms = now_ms
        self.quota = quota
        self.topic_stats = topic_stats  # replication bytes in, for pylog.metrics
        self.monotonic_ms = monotonic_ms or now_ms
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._leader_of: dict[tuple[str, int], int] = {}
        # the remote tier's last offset + 1 for a partition (None: nothing remote); set by the
        # broker when the remote tier is on
        self.tiered_offset: Callable[[Partition], int | None] | None = None

    def follow(self, part: Partition) -> None:
        key = (part.topic, part.index)
        old = self._leader_of.get(key)
        if old is not None and old != part.leader_id:
            self._fetchers[old].remove(part)
        fetcher = self._fetchers.get(part.leader_id)
        if fetcher is None:
            fetcher = self._fetchers[part.leader_id] = ReplicaFetcher(self, part.leader_id)
            fetcher.start()
        fetcher.add(part)
        self._leader_of[key] = part.leader_id

    def unfollow(self, part: Partition) -> None:
        leader = self._leader_of.pop((part.topic, part.index), None)
        if leader is not None and leader in self._fetchers:
            self._fetchers[leader].remove(part)

    def brokers_changed(self) -> None:
        for f in self._fetchers.values():
            f.wake()

    async def close(self) -> None:
        fetchers, self._fetchers = list(self._fetchers.values()), {}
        for f in fetchers:
            await f.stop()
        self.channels.close()


class ReplicaFetcher:
    def __init__(self, manager: ReplicaFetcherManager, leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self._parts: dict[tuple[str, int], _Followed] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._session = FetchSessionHandler()  # KIP-227, with this leader

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"replica-fetcher-{self.leader_id}")

    def add(self, part: Partition) -> None:
        self._parts[(part.topic, part.index)] = _Followed(part, part.leader_epoch)
        self.wake()

    def remove(self, part: Partition) -> None:
        self._parts.pop((part.topic, part.index), None)

    def wake(self) -> None:
        for f in self._parts.values():
            f.paused_until = 0.0
        self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    # ------------------------------------------------------------------ the loop

    async def _run(self) -> None:
        wait_max_ms, _, _, _, backoff_ms, timeout_ms = self.manager.settings
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            active = [
                f
                for f in self._parts.values()
                if f.part.role is Role.FOLLOWER
                and f.part.leader_id == self.leader_id
                and f.paused_until <= now
            ]
            held = self._throttled(active)
            if held:
                held_ids = {id(f) for f in held}
                active = [f for f in active if id(f) not in held_ids]
            channel = self.manager.channels.get(self.leader_id) if active else None
            if not active or channel is None:
                wait_ms = backoff_ms
                if held and self.manager.quota is not None:  # look again once the rate allows
                    delay = self.manager.quota.delay_ms(self.manager.monotonic_ms())
                    wait_ms = min(backoff_ms, max(delay, 10))
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait_ms / 1000)
                continue
            try:
                pending = [f for f in active if not f.truncated]
                if pending:
                    await self._truncate(channel, pending, timeout_ms)
                ready = [f for f in active if f.truncated]
                if ready:
                    await self._fetch(channel, ready, (wait_max_ms + timeout_ms) / 1000)
            except TransportError as exc:
                log.debug("fetch from leader %d failed: %s", self.leader_id, exc)
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), backoff_ms / 1000)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("replica fetcher for leader %d failed", self.leader_id)
                await asyncio.sleep(backoff_ms / 1000)

    def _throttled(self, active: list[_Followed]) -> list[_Followed]:
        """The partitions the follower throttle leaves out of this fetch."""
        quota = self.manager.quota
        if quota is None or not quota.bounded:
            return []
        now = self.manager.monotonic_ms()
        return [
            f
            for f in active
            if f.truncated and should_throttle(quota, f.part.topic, f.part.index, f.in_sync, now)
        ]

    def _pause(self, f: _Followed) -> None:
        _, _, _, _, backoff_ms, _ = self.manager.settings
        f.paused_until = asyncio.get_running_loop().time() + backoff_ms / 1000

    # ------------------------------------------------------------------ truncation

    async def _truncate(self, channel: Channel, followed: list[_Followed], timeout_ms: int) -> None:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for f in followed:
            by_topic.setdefault(f.part.topic, []).append(
                {
                    "partition": f.part.index,
                    "current_leader_epoch": f.leader_epoch,
                    "leader_epoch": f.part.latest_epoch,
                }
            )
        body = {
            "replica_id": self.manager.node_id,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        resp = await channel.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, EPOCH_VERSION, body, timeout_ms / 1000)
        answers = {(t.topic, p.partition): p for t in resp.topics for p in t.partitions}
        for f in followed:
            a = answers.get((f.part.topic, f.part.index))
            if a is None or f.part.leader_epoch != f.leader_epoch:
                continue
            if a.error_code:
                self._pause(f)
                continue
            part = f.part
            requested = part.latest_epoch
            offset = truncation_offset(
                part.log_end_offset, a.leader_epoch, a.end_offset, part.end_offset_for_epoch, requested
            )
            if offset < part.log_end_offset:
                part.truncate_to(offset)
            f.truncated = True

    # ------------------------------------------------------------------ fetching

    async def _fetch(self, channel: Channel, followed: list[_Followed], timeout_s: float) -> None:
        wait_max_ms, min_bytes, max_bytes, partition_max_bytes, _, _ = self.manager.settings
        quota = self.manager.quota
        bounded = quota if quota is not None and quota.bounded else None
        wide = [
            f.catching_up and not (bounded is not None and bounded.is_throttled(f.part.topic, f.part.index))
            for f in followed
        ]
        ask = catching_up_fetch_bytes(partition_max_bytes, max_bytes, len(followed), sum(wide))
        wanted: dict[tuple[str, int], dict[str, Any]] = {}
        for f, widen in zip(followed, wide, strict=True):
            part = f.part
            wanted[(part.topic, part.index)] = {
                "partition": part.index,
                "current_leader_epoch": f.leader_epoch,
                "fetch_offset": part.log_end_offset,
                "last_fetched_epoch": part.latest_epoch,
                "log_start_offset": part.log_start_offset,
                "partition_max_bytes": ask if widen else partition_max_bytes,
            }
        session = self._session
        request = session.build(wanted)
        body = {
            "replica_id": self.manager.node_id,
            "max_wait_ms": wait_max_ms,
            "min_bytes": min_bytes,
            "max_bytes": max_bytes,
            "isolation_level": 0,
            **request.body(),
            "rack_id": "",
        }
        try:
            resp = await channel.request(ApiKey.FETCH, FETCH_VERSION, body, timeout_s)
        except BaseException:
            session.handle_error()  # the leader may have taken it: its epoch is unknown now
            raise
        answers = {(t.topic, p.partition_index): p for t in resp.responses for p in t.partitions}
        if not session.handle_response(resp.error_code, resp.session_id, answers):
            log.debug("fetch session with leader %d: error %d, next fetch is full", self.leader_id,
                      resp.error_code)
            return
        now = self.manager._now_ms()
        for f in followed:
            a = answers.get((f.part.topic, f.part.index))
            if a is None:
                f.catching_up = False  # left out of an incremental answer: nothing new
                continue
            if f.part.leader_epoch != f.leader_epoch or f.part.role is not Role.FOLLOWER:
                continue
            self._handle(f, a, now)

    def _handle(self, f: _Followed, a: Any, now_ms: int) -> None:
        part = f.part
        if a.error_code == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE:
            self._tiered_catch_up(f, a.log_start_offset)
            return
        if a.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if part.log_end_offset < a.log_start_offset:
                part.truncate_fully_and_start_at(a.log_start_offset)
            else:
                f.truncated = False  # we hold more than the leader: find where we part
            return
        if a.error_code:
            self._pause(f)
            return
        diverging = getattr(a, "diverging_epoch", None)
        if diverging is not None and diverging.epoch >= 0 and diverging.end_offset >= 0:
            part.truncate_to(
                truncation_on_divergence(
                    part.log_end_offset, diverging.epoch, diverging.end_offset, part.end_offset_for_epoch
                )
            )
            return
        records = a.records
        f.catching_up = bool(records)
        if records:
            quota = self.manager.quota
            if quota is not None and quota.bounded and quota.is_throttled(part.topic, part.index):
                quota.record(len(records), self.manager.monotonic_ms())
            try:
                part.append_as_follower(records, now_ms)
            except (CorruptRecordBatch, InvalidRecordStructure, StorageError) as exc:
                log.error("%s-%d: appending the leader's batches failed: %s", part.topic, part.index, exc)
                self._pause(f)
                return
            stats = self.manager.topic_stats
            if stats is not None:
                stats.replicated(part.topic, part.index, len(records), self.manager.node_id)
        f.in_sync = part.log_end_offset >= a.high_watermark
        part.follower_high_watermark(a.high_watermark)
        if a.log_start_offset > part.log_start_offset:
            part.delete_records_before(min(a.log_start_offset, part.log_end_offset))

    def _tiered_catch_up(self, f: _Followed, leader_log_start: int) -> None:
        """Our fetch offset is below the leader's local log start: the remote tier holds those
        offsets, so start over, empty, after the last tiered offset (KIP-1023), keeping the
        leader's log start offset; without a newer tiered offset, back off and ask again."""
        tiered = self.manager.tiered_offset
        start = tiered(f.part) if tiered is not None else None
        if start is None or start <= f.part.log_end_offset:
            self._pause(f)
            return
        f.part.truncate_fully_and_start_at(start, log_start_offset=leader_log_start)

