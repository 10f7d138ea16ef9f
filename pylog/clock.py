"""The clock a node's shell reads, injected (one per process, ``SYSTEM_CLOCK`` unless a test passes
its own).

Two readings, as Kafka's ``Time`` has: wall time (``wall_ms``, Unix epoch milliseconds) for what
is stamped and compared with stamps (record timestamps, retention, producer expiry, session and
rebalance deadlines of groups, DescribeQuorum's fetch times), and monotonic time
(``monotonic_ms``) for what is only measured (the controller's broker sessions). Sans-IO cores
(Raft, the controller, group, share and transaction state machines, storage) never read a clock:
the shell passes ``now_ms`` in. Event-loop timers (``loop.call_at``) and the maintenance
thread's sleeps keep their own schedulers; they decide when to look, not what time it is.
"""

from __future__ import annotations

import time


class Clock:
    """Time as the system tells it."""

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class ManualClock(Clock):
    """A clock that moves only when told (tests); both readings advance together."""

    def __init__(self, wall_ms: int = 1_700_000_000_000, monotonic_ms: int = 0) -> None:
        self._wall = wall_ms
        self._monotonic = monotonic_ms

    def wall_ms(self) -> int:
        return self._wall

    def monotonic_ms(self) -> int:
        return self._monotonic

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("a clock does not go back")
        self._wall += ms
        self._monotonic += ms


SYSTEM_CLOCK = Clock()
