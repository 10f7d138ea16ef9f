"""``ControllerDuties``: what the active controller does on its own clock.

It fences brokers whose session expired (their partitions get new leaders) and, with
``auto.leader.rebalance.enable``, moves leadership back to preferred replicas every
``leader.imbalance.check.interval.seconds``. Both are controller commands committed through the
quorum; on a node that is not the active controller they do nothing.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

from pylog.cluster.broker_control import ATTENTION_GAP_MS
from pylog.cluster.quorum import MetadataQuorum
from pylog.tasks import cancel_and_wait

log = logging.getLogger(__name__)

CHECK_S = ATTENTION_GAP_MS / 2000  # sessions are checked twice per gap the controller may stay deaf


class ControllerDuties:
    def __init__(self, quorum: MetadataQuorum, *, rebalance: bool, rebalance_interval_s: float) -> None:
        self.quorum = quorum
        self.rebalance = rebalance
        self.rebalance_interval_s = rebalance_interval_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="controller-duties")

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_rebalance = loop.time() + self.rebalance_interval_s
        while True:
            await asyncio.sleep(CHECK_S)
            q = self.quorum
            now = q.now_ms()
            if not q.controller.active:
                continue
            try:
                fenced = await q.execute(functools.partial(_fence, now_ms=now))
                if fenced:
                    log.warning("fenced brokers %s: their sessions expired", fenced)
                if self.rebalance and loop.time() >= next_rebalance:
                    next_rebalance = loop.time() + self.rebalance_interval_s
                    moved = await q.execute(lambda c: c.rebalance_leaders())
                    if moved:
                        log.info("moved %d partition leaders back to their preferred replicas", moved)
            except Exception:
                log.exception("controller duties failed")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None


def _fence(controller: Any, *, now_ms: int) -> Any:
    return controller.fence_expired_brokers(now_ms)
