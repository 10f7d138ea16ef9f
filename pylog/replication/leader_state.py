"""``LeaderState``: what a partition leader knows about its followers, and the rules that follow.

Theory of operation
-------------------
The leader tracks each follower's log end offset, learnt from the fetch offset of its replica
fetches, and when it was last *caught up*: a fetch at or past the leader's log end as of the
previous fetch (Kafka's lastCaughtUpTime), so a follower that keeps up under load still counts.

The ISR the controller committed is ``isr``; while an AlterPartition is in flight the leader
also holds the ISR it asked for. The *maximal ISR* (committed plus any pending additions) is
what the high watermark waits for: a replica being added is already needed, a replica being
removed still is until the controller agrees. The high watermark is the smallest log end
offset in the maximal ISR (the leader's own included) and never moves backward.

A follower in the ISR that has not been caught up for ``replica.lag.time.max.ms`` is removed
(shrink); a follower outside it whose log end reached the high watermark, and the start of the
leader's current epoch, is added (expand). Both are proposals: the shell sends them to the
controller and adopts what comes back. acks=all needs the committed ISR to have at least
``min.insync.replicas`` members, and is satisfied when the high watermark passes the batch.

Followers also report their log start offset in each fetch. The *low watermark* is the smallest
log start offset among the leader and the followers on live brokers (one not heard from counts
as -1): DeleteRecords is done when it reaches the requested offset (Kafka's
lowWatermarkIfLeader).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass


@dataclass
class FollowerState:
    replica_id: int
    log_end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    leader_end_at_last_fetch: int = -1
    log_start_offset: int = -1


class LeaderState:
    def __init__(
        self,
        local_id: int,
        replicas: tuple[int, ...],
        isr: tuple[int, ...],
        *,
        leader_epoch: int,
        partition_epoch: int,
        epoch_start_offset: int,
        high_watermark: int,
        now_ms: int,
    ) -> None:
        self.local_id = local_id
        self.replicas = replicas
        self.isr = isr
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.epoch_start_offset = epoch_start_offset
        self.high_watermark = high_watermark
        self.pending_isr: tuple[int, ...] | None = None
        self.refused_epoch = -1  # the partition epoch the controller called stale
        # a follower starts "caught up" now: a new leader gives everyone a full lag window
        self.followers = {
            r: FollowerState(r, last_caught_up_ms=now_ms if r in isr else -1)
            for r in replicas
            if r != local_id
        }

    # ------------------------------------------------------------------ inputs

    def update_partition(self, replicas: tuple[int, ...], isr: tuple[int, ...], partition_epoch: int) -> None:
        """The controller committed a new state for this partition (same leader epoch)."""
        if partition_epoch < self.partition_epoch:
            return
        if (
            partition_epoch > self.partition_epoch
            or self.pending_isr == isr
            or (self.pending_isr is not None and not set(self.pending_isr) <= set(replicas))
        ):
            # a newer committed state answers any proposal (the controller may have decided more
            # than was asked: a reassignment completing drops the removed replicas), or outdates
            # it; so does one whose replicas no longer include a member of the proposal (the
            # controller refuses it, and meanwhile the high watermark must not wait for a replica
            # nobody tracks)
            self.pending_isr = None
        self.replicas = replicas
        self.isr = isr
        self.partition_epoch = partition_epoch
        for r in replicas:
            if r != self.local_id and r not in self.followers:
                self.followers[r] = FollowerState(r)
        for r in list(self.followers):
            if r not in replicas:
                del self.followers[r]

    def isr_change_failed(self, *, stale: bool = False, sent_epoch: int | None = None) -> None:
        """The controller refused the pending ISR (or it did not arrive): propose again later.
        ``stale``: refused because this state is outdated (INVALID_UPDATE_VERSION,
        FENCED_LEADER_EPOCH): nothing is proposed again until a newer partition state arrives,
        as Kafka's leaders wait for the metadata update instead of asking again and again.
        ``sent_epoch``: the partition epoch the refused proposal carried. When the newer state
        came first (the metadata often outruns the AlterPartition answer), the refusal is old
        news: it neither drops a proposal made since nor blocks the state now held, which would
        leave the leader waiting for a change that only it can propose."""
        if sent_epoch is not None and sent_epoch != self.partition_epoch:
            return
        self.pending_isr = None
        if stale:
            self.refused_epoch = self.partition_epoch

    def on_follower_fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        leader_end_offset: int,
        now_ms: int,
        log_start_offset: int = -1,
    ) -> bool:
        """A replica fetch at ``fetch_offset`` (the follower's log end, its log start offset
        beside it); True if the high watermark may have moved (call
        ``maybe_advance_high_watermark``)."""
        f = self.followers.get(replica_id)
        if f is None:
            return False
        f.log_start_offset = log_start_offset
        if fetch_offset >= leader_end_offset:
            f.last_caught_up_ms = now_ms
        elif f.leader_end_at_last_fetch >= 0 and fetch_offset >= f.leader_end_at_last_fetch:
            f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
        f.leader_end_at_last_fetch = leader_end_offset
        f.last_fetch_ms = now_ms
        moved = fetch_offset != f.log_end_offset
        f.log_end_offset = fetch_offset
        return moved

    # ------------------------------------------------------------------ derived

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending_isr is None:
            return self.isr
        return tuple(sorted(set(self.isr) | set(self.pending_isr)))

    def maybe_advance_high_watermark(self, local_end_offset: int) -> bool:
        """Recompute the high watermark from the maximal ISR; True if it advanced."""
        ends = [local_end_offset]
        for r in self.maximal_isr:
            if r == self.local_id:
                continue
            f = self.followers.get(r)
            ends.append(f.log_end_offset if f is not None else -1)
        candidate = min(ends)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def low_watermark(self, local_log_start: int, live: Collection[int]) -> int:
        """The smallest log start offset among this replica and the followers on ``live``
        brokers (-1 for one that has not reported it)."""
        low = local_log_start
        for r, f in self.followers.items():
            if r in live and f.log_start_offset < low:
                low = f.log_start_offset
        return low

    def enough_replicas(self, min_insync: int) -> bool:
        """acks=all may be accepted: the committed ISR is at least min.insync.replicas."""
        return len(self.isr) >= min_insync

    def isr_shrink(self, now_ms: int, lag_time_max_ms: int) -> tuple[int, ...] | None:
        """The ISR without followers out of sync for too long, or None if nothing to drop."""
        if self.pending_isr is not None or self.refused_epoch == self.partition_epoch:
            return None
        out = tuple(
            r
            for r in self.isr
            if r == self.local_id
            or now_ms - self.followers.get(r, FollowerState(r)).last_caught_up_ms <= lag_time_max_ms
        )
        return out if out != self.isr else None

    def isr_expand(self, replica_id: int) -> tuple[int, ...] | None:
        """The ISR plus ``replica_id`` (which just fetched) if it caught up, else None."""
        f = self.followers.get(replica_id)
        if self.pending_isr is not None or f is None or replica_id in self.isr:
            return None
        if self.refused_epoch == self.partition_epoch:
            return None
        if f.log_end_offset < self.high_watermark or f.log_end_offset < self.epoch_start_offset:
            return None
        return tuple(r for r in self.replicas if r in self.isr or r == replica_id)

    def propose(self, new_isr: tuple[int, ...]) -> None:
        self.pending_isr = new_isr
