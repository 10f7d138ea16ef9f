"""What a leader knows about each follower's log (etcd's Progress, simplified).

A follower is either being *probed* (we do not know where its log matches ours: one
APPEND in flight at a time, back off on rejection) or *replicated* to (its log is
known to match up to ``match``: stream APPENDs optimistically, at most
``max_inflight`` unacknowledged messages) or is being sent a *snapshot* (it needs
entries the leader has compacted away: nothing else is sent until it acknowledges
the snapshot, or until an election timeout passes without an answer, when the
leader probes again, which resends the snapshot if it is still needed).
"""

from __future__ import annotations

import enum
from collections import deque


class ProgressState(enum.Enum):
    PROBE = "probe"
    REPLICATE = "replicate"
    SNAPSHOT = "snapshot"


class Progress:
    __slots__ = (
        "inflight",
        "match",
        "max_inflight",
        "next",
        "pending_snapshot",
        "probe_sent",
        "recent_active",
        "snapshot_elapsed",
        "state",
    )

    def __init__(self, next_index: int, max_inflight: int) -> None:
        self.match = 0
        self.next = next_index
        self.state = ProgressState.PROBE
        self.probe_sent = False
        self.recent_active = False
        self.max_inflight = max_inflight
        # last index carried by each unacknowledged APPEND, oldest first
        self.inflight: deque[int] = deque()
        self.pending_snapshot = 0  # index of the snapshot sent, in SNAPSHOT state
        self.snapshot_elapsed = 0  # ticks since it was sent

    def is_paused(self) -> bool:
        if self.state is ProgressState.PROBE:
            return self.probe_sent
        if self.state is ProgressState.SNAPSHOT:
            return True
        return len(self.inflight) >= self.max_inflight

    def become_probe(self) -> None:
        self.state = ProgressState.PROBE
        self.next = self.match + 1
        self.probe_sent = False
        self.pending_snapshot = 0
        self.inflight.clear()

    def become_replicate(self) -> None:
        self.state = ProgressState.REPLICATE
        self.next = self.match + 1
        self.pending_snapshot = 0
        self.inflight.clear()

    def become_snapshot(self, index: int) -> None:
        """A snapshot covering entries up to ``index`` was sent."""
        self.state = ProgressState.SNAPSHOT
        self.pending_snapshot = index
        self.snapshot_elapsed = 0
        self.next = index + 1
        self.inflight.clear()

    def sent(self, last_index: int) -> None:
        """An APPEND carrying entries up to ``last_index`` (or none, if 0) was sent."""
        if self.state is ProgressState.REPLICATE:
            if last_index:
                self.next = last_index + 1
                self.inflight.append(last_index)
        else:
            self.probe_sent = True

    def maybe_update(self, index: int) -> bool:
        """The follower acknowledged a log matching ours up to ``index``."""
        updated = index > self.match
        if updated:
            self.match = index
            self.probe_sent = False
        self.next = max(self.next, index + 1)
        while self.inflight and self.inflight[0] <= index:
            self.inflight.popleft()
        return updated

    def maybe_decrease_to(self, rejected: int, match_hint: int) -> bool:
        """The follower rejected an APPEND at ``rejected``; False if the rejection is stale."""
        if self.state is ProgressState.SNAPSHOT:
            return False  # sent before the snapshot: its answer decides
        if self.state is ProgressState.REPLICATE:
            if rejected <= self.match:
                return False
            self.next = self.match + 1
            return True
        if self.next - 1 != rejected:
            return False
        self.next = max(min(rejected, match_hint + 1), self.match + 1)
        self.probe_sent = False
        return True

    def free_one_inflight(self) -> None:
        if self.inflight:
            self.inflight.popleft()
