"""How late the event loop runs a probe it scheduled: the wait every other task sees too."""

from __future__ import annotations

import asyncio
import contextlib

from pylog.clock import SYSTEM_CLOCK, Clock

LAG_BUCKETS_S: tuple[float, ...] = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class LoopLag:
    """A task on the loop that sleeps ``interval_s`` and measures how late it wakes."""

    def __init__(self, interval_s: float = 0.25, clock: Clock = SYSTEM_CLOCK) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self.bounds_s = LAG_BUCKETS_S
        self.buckets = [0] * (len(LAG_BUCKETS_S) + 1)
        self.sum_s = 0.0
        self.last_s = 0.0
        self.last_tick = self.clock.monotonic_s()  # read by the liveness check on another thread
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="metrics-loop-lag")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def stalled_s(self) -> float:
        """Seconds since the probe last ran (0 while it runs on time)."""
        return max(0.0, self.clock.monotonic_s() - self.last_tick - self.interval_s)

    async def _run(self) -> None:
        while True:
            before = self.clock.monotonic_s()
            await asyncio.sleep(self.interval_s)
            now = self.clock.monotonic_s()
            lag = max(0.0, now - before - self.interval_s)
            self.last_tick = now
            self.last_s = lag
            self.sum_s += lag
            i = 0
            for bound in self.bounds_s:
                if lag <= bound:
                    break
                i += 1
            self.buckets[i] += 1
