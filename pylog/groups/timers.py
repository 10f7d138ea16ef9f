"""A deadline heap with lazy cancellation.

Entries are never removed when cancelled: each carries a sequence number and the owner keeps the
sequence of its live entry, so a popped entry whose sequence no longer matches is ignored.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple


class TimerKind(IntEnum):
    HEARTBEAT = 0  # a member's session
    PENDING_MEMBER = 1  # a member id handed out with MEMBER_ID_REQUIRED, not yet rejoined
    JOIN = 2  # end of the (initial) rebalance delay or the rebalance timeout
    SYNC = 3  # members that did not send SyncGroup within the rebalance timeout
    CONSUMER_SESSION = 4  # a consumer-group member's session
    CONSUMER_REVOCATION = 5  # a consumer-group member revoking for longer than its rebalance timeout
    CONSUMER_SYNC = 6  # a classic member of a consumer group between JoinGroup and SyncGroup
    SHARE_SESSION = 7  # a share-group member's session
    OFFSETS_RETENTION = 8  # the periodic offsets-retention check
    STREAMS_SESSION = 9  # a streams-group member's session
    STREAMS_REVOCATION = 10  # a streams-group member revoking tasks for longer than its rebalance timeout
    STREAMS_INITIAL_DELAY = 11  # end of a new streams group's initial rebalance delay


class Timer(NamedTuple):
    deadline_ms: int
    seq: int
    kind: TimerKind
    group_id: str
    member_id: str


class TimerQueue:
    def __init__(self) -> None:
        self._heap: list[Timer] = []
        self._seq = 0

    def push(self, deadline_ms: int, kind: TimerKind, group_id: str, member_id: str = "") -> int:
        self._seq += 1
        heapq.heappush(self._heap, Timer(deadline_ms, self._seq, kind, group_id, member_id))
        return self._seq

    def peek(self) -> Timer | None:
        return self._heap[0] if self._heap else None

    def pop(self) -> Timer:
        return heapq.heappop(self._heap)

    def __len__(self) -> int:
        return len(self._heap)


@dataclass
class Deadline:
    """A member's deadline and its one armed heap entry (at or before the deadline)."""

    deadline_ms: int | None = None
    seq: int | None = None  # sequence of the armed entry
    armed_ms: int | None = None  # its deadline

    def clear(self) -> None:
        self.deadline_ms = self.seq = self.armed_ms = None
