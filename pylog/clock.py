"""The clock a node's shell reads, injected (one per process, ``SYSTEM_CLOCK`` unless a test passes
its own); the one place in the package that asks the system what time it is.

Readings, as Kafka's ``Time`` has: wall time (``wall_ms``, Unix epoch milliseconds) for what
is stamped and compared with stamps (record timestamps, retention, producer expiry, session and
rebalance deadlines of groups, DescribeQuorum's fetch times), and monotonic time for what is only
measured: ``monotonic_ms`` (the controller's broker sessions), ``monotonic_s`` (deadlines and
intervals counted in seconds) and ``monotonic_ns`` (Kafka's ``nanoseconds()``: request latency,
busy time). Sans-IO cores (Raft, the controller, group, share and transaction state machines,
storage) never read a clock: the shell passes ``now_ms`` in. Event-loop timers
(``loop.call_at``) and sleeps keep their own schedulers; they decide when to look, not what time
it is.
"""

from __future__ import annotations

import time


class Clock:
    """Time as the system tells it."""

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def monotonic_s(self) -> float:
        return time.monotonic()

    def monotonic_ns(self) -> int:
        """The highest-resolution monotonic reading, for measuring short durations."""
        return time.perf_counter_ns()


class ManualClock(Clock):
    """A clock that moves only when told (tests); all readings advance together."""

    def __init__(self, wall_ms: int = 1_700_000_000_000, monotonic_ms: int = 0) -> None:
        self._wall = wall_ms
        self._monotonic_ns = monotonic_ms * 1_000_000

    def wall_ms(self) -> int:
        return self._wall

    def monotonic_ms(self) -> int:
        return self._monotonic_ns // 1_000_000

    def monotonic_s(self) -> float:
        return self._monotonic_ns / 1e9

    def monotonic_ns(self) -> int:
        return self._monotonic_ns

    def advance(self, ms: float) -> None:
        """Moves every reading forward by ``ms`` milliseconds (fractions kept in the monotonic ones)."""
        if ms < 0:
            raise ValueError("a clock does not go back")
        self._wall += int(ms)
        self._monotonic_ns += int(ms * 1_000_000)


SYSTEM_CLOCK = Clock()
