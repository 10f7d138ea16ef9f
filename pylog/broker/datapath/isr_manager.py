"""``IsrManager``: sends the ISR changes partition leaders propose to the controller.

Leaders propose (``LeaderState.isr_expand`` after a follower's fetch, ``isr_shrink`` on a timer
every half ``replica.lag.time.max.ms``); proposals are batched into one AlterPartition with the
leader and partition epochs each leader holds, one request in flight at a time. The answer is
adopted at once (a shrink may let the high watermark move); a refused proposal is dropped and
proposed again when still needed, except one refused as stale (INVALID_UPDATE_VERSION,
FENCED_LEADER_EPOCH), which waits for the newer partition state. The image brings the same change
later, which is a no-op by then.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from pylog.protocol.errors import ErrorCode

from pylog.broker.control.controller_channel import ControllerUnavailable
from pylog.broker.control.controller_client import ControllerClient
from pylog.broker.datapath.partition import Partition
from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.tasks import cancel_and_wait

log = logging.getLogger(__name__)

# refusals saying the leader's partition state is outdated: wait for the newer one
_STALE = frozenset({ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.FENCED_LEADER_EPOCH})


class IsrManager:
    def __init__(
        self,
        node_id: int,
        controller: ControllerClient | None,
        replicas: ReplicaManager,
        *,
        broker_epoch: Callable[[], int],
        lag_time_max_ms: int,
        now_ms: Callable[[], int],
        eligible: Callable[[int], bool] = lambda _broker: True,
    ) -> None:
        self.node_id = node_id
        self.controller = controller
        self.replicas = replicas
        self._broker_epoch = broker_epoch
        self.lag_time_max_ms = lag_time_max_ms
        self._now_ms = now_ms
        self._eligible = eligible
        self._pending: dict[tuple[str, int], tuple[Partition, tuple[int, ...]]] = {}
        self.shrinks = 0  # ISR changes the controller accepted (Kafka's IsrShrinksPerSec / IsrExpandsPerSec)
        self.expands = 0
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._send_loop(), name="isr-alter-partition"),
            asyncio.create_task(self._shrink_loop(), name="isr-shrink"),
        ]

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks = []

    # ------------------------------------------------------------------ proposals

    def maybe_expand(self, part: Partition, replica_id: int) -> None:
        """After ``replica_id``'s fetch: add it back if it caught up and may join (registered,
        unfenced, not shutting down, as the image says)."""
        new_isr = part.isr_to_expand(replica_id)
        if new_isr is not None and self._eligible(replica_id):
            self._propose(part, new_isr)

    def check_shrink(self) -> None:
        now = self._now_ms()
        for part in self.replicas.snapshot():
            new_isr = part.isr_to_shrink(now, self.lag_time_max_ms)
            if new_isr is not None:
                log.info(
                    "%s-%d: shrinking the ISR from %s to %s",
                    part.topic,
                    part.index,
                    list(part.isr),
                    list(new_isr),
                )
                self._propose(part, new_isr)

    def _propose(self, part: Partition, new_isr: tuple[int, ...]) -> None:
        if part.propose_isr(new_isr):
            self._pending[(part.topic, part.index)] = (part, new_isr)
            self._wake.set()

    # ------------------------------------------------------------------ sending

    async def _shrink_loop(self) -> None:
        while True:
            await asyncio.sleep(max(self.lag_time_max_ms / 2000, 0.05))
            try:
                self.check_shrink()
            except Exception:
                log.exception("ISR shrink check failed")

    async def _send_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._pending = self._pending, {}
            if not batch or self.controller is None:
                continue
            try:
                await self._send(list(batch.values()))
            except ControllerUnavailable as exc:
                log.warning("AlterPartition: %s", exc)
                for part, _ in batch.values():
                    part.isr_change_failed()
            except Exception:
                log.exception("AlterPartition failed")
                for part, _ in batch.values():
                    part.isr_change_failed()

    async def _send(self, batch: list[tuple[Partition, tuple[int, ...]]]) -> None:
        assert self.controller is not None
        by_topic: dict[Any, list[dict[str, Any]]] = {}
        sent: dict[tuple[Any, int], Partition] = {}
        sizes: dict[tuple[Any, int], int] = {}  # ISR sizes when sent
        sent_epochs: dict[tuple[Any, int], int] = {}  # partition epochs proposed against
        for part, new_isr in batch:
            epochs = part.leader_epochs()
            if epochs is None:
                continue
            by_topic.setdefault(part.topic_id, []).append(
                {
                    "partition_index": part.index,
                    "leader_epoch": epochs[0],
                    "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1} for b in new_isr],
                    "leader_recovery_state": 0,
                    "partition_epoch": epochs[1],
                }
            )
            sent[(part.topic_id, part.index)] = part
            sizes[(part.topic_id, part.index)] = len(part.isr)
            sent_epochs[(part.topic_id, part.index)] = epochs[1]
        if not by_topic:
            return
        topics = [{"topic_id": tid, "partitions": ps} for tid, ps in by_topic.items()]
        resp = await self.controller.alter_partition(self.node_id, self._broker_epoch(), topics)
        if resp.error_code:
            log.warning("AlterPartition refused: %s", ErrorCode.of(resp.error_code).name)
        answered = set()
        for t in resp.topics:
            for p in t.partitions:
                target = sent.get((t.topic_id, p.partition_index))
                if target is None:
                    continue
                answered.add((t.topic_id, p.partition_index))
                if p.error_code == ErrorCode.NONE:
                    before = sizes[(t.topic_id, p.partition_index)]  # the image may have applied it already
                    self.shrinks += len(p.isr) < before
                    self.expands += len(p.isr) > before
                    target.isr_changed(p.leader_epoch, tuple(p.isr), p.partition_epoch)
                else:
                    log.info(
                        "%s-%d: ISR change refused: %s",
                        target.topic,
                        target.index,
                        ErrorCode.of(p.error_code).name,
                    )
                    target.isr_change_failed(stale=p.error_code in _STALE,
                                             sent_epoch=sent_epochs[(t.topic_id, p.partition_index)])
        for key, part in sent.items():
            if key not in answered:
                part.isr_change_failed()
