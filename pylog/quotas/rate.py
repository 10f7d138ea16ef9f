"""A windowed rate, as Kafka's quota sensors measure one (``Rate`` over a ``WindowedSum``).

Theory of operation
-------------------
Values are summed into ``samples`` windows of ``window_ms`` each (``quota.window.num`` and
``quota.window.size.seconds``). A window is started by the first value recorded after the current
one has lasted ``window_ms``, reusing the oldest slot; a window whose last value is older than
``samples * window_ms`` counts nothing. The rate is the sum over the windows divided by the time
they span, where that span is never taken as less than ``samples - 1`` whole windows: a client
that just started is measured as if it had been quiet before, so a short burst of up to
``bound * (samples - 1) * window`` passes, and a long one does not. A *simple* rate (Kafka's
``SimpleRate``, which the replication quotas use) takes the span as the time actually elapsed,
at least one window: a fresh rate allows one window's worth, not ``samples - 1``.

When a recorded value puts the rate over a quota's bound, the client must be held off for the time
that brings the rate back to the bound if it sends nothing meanwhile: with the rate O over the span
W and the bound T, O * W / (W + X) = T, so X = (O - T) / T * W (Kafka's ``QuotaUtils.throttleTime``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start_ms: int
    last_ms: int
    value: float = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_ms = now_ms
        self.value = 0.0


class SampledRate:
    """Values per second over the last ``samples`` windows of ``window_ms``; time is passed in."""

    __slots__ = ("_current", "_samples", "samples", "simple", "window_ms")

    def __init__(self, samples: int, window_ms: int, *, simple: bool = False) -> None:
        if samples < 1 or window_ms < 1:
            raise ValueError(f"a rate needs at least one window of at least 1 ms: {samples} x {window_ms}")
        self.samples = samples
        self.window_ms = window_ms
        self.simple = simple
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.last_ms = now_ms

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        # one slot more than ``samples``: a window that overlaps the measured span's start still counts
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms, now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _purge(self, now_ms: int) -> None:
        expire_ms = self.samples * self.window_ms
        for s in self._samples:
            if now_ms - s.last_ms >= expire_ms:
                s.reset(now_ms)

    def total(self, now_ms: int) -> float:
        """The sum of the values still inside the windows."""
        self._purge(now_ms)
        return sum(s.value for s in self._samples)

    def span_ms(self, now_ms: int) -> int:
        """The time the rate is measured over (Kafka's ``Rate.windowSize``, or ``SimpleRate``'s)."""
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        if self.simple:
            return max(elapsed, self.window_ms)
        full, least = elapsed // self.window_ms, self.samples - 1
        if full < least:
            elapsed += (least - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """Values per second."""
        total = self.total(now_ms)
        return total / (self.span_ms(now_ms) / 1000.0)


def throttle_time_ms(rate: SampledRate, bound: float, now_ms: int, max_ms: int | None = None) -> int:
    """How long a client over ``bound`` must wait (0 within it); at most ``max_ms`` when given."""
    observed = rate.measure(now_ms)
    if observed <= bound:
        return 0
    delay = (observed - bound) / bound * rate.span_ms(now_ms)
    ms = math.floor(delay + 0.5)
    return ms if max_ms is None else min(ms, max_ms)
