"""The fetch plan of one partition: who serves a fetch and how far it may read (Kafka's
ReplicaManager fetch checks: the leader epoch, the replica selector of KIP-392, the leader
replication throttle of KIP-73). Kept apart from the reads so the rules of who may read what live
in one place and are tested without a log read.

A follower's fetch reads the leader's log to its end (recording the follower's position, which
moves the high watermark and the ISR), unless the leader replication throttle holds it back
(``pylog.quotas.replication``); a consumer's reads to the high watermark or, read_committed, the
last stable offset, of the leader or, for a Fetch v11+ (KIP-392), of a follower; a leader with a
``replica.selector.class`` may instead name a preferred read replica
(``pylog.replication.replica_selector``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pylog.protocol.errors import ErrorCode

from pylog.broker.datapath.fetch_params import FetchIsolation, FetchParams, FetchPartitionData, PartitionFetch
from pylog.broker.datapath.partition import Partition
from pylog.quotas.replication import THROTTLED_PARTITION_MAX_BYTES, ReplicationQuota, should_throttle
from pylog.replication import diverging_epoch
from pylog.replication.replica_selector import NO_PREFERENCE, ReplicaView, preferred_read_replica


@dataclass(frozen=True, slots=True)
class ReadPlan:
    """How a partition's fetch reads this replica's log: up to ``isolation``'s bound, at most
    ``max_bytes`` (the request's partition limit, or less under the replication throttle)."""

    isolation: FetchIsolation
    max_bytes: int


class FetchPlanner:
    def __init__(
        self,
        node_id: int,
        rack: str | None,
        replica_selector: str | None,
        leader_quota: ReplicationQuota,
        live_racks: Callable[[], Mapping[int, str | None]],
        monotonic_ms: Callable[[], int],
    ) -> None:
        self.node_id = node_id
        self.rack = rack
        self.replica_selector = replica_selector  # KIP-392; None: leader only
        self.leader_quota = leader_quota
        self._live_racks = live_racks  # live broker -> broker.rack (the image's)
        self._monotonic_ms = monotonic_ms  # the replication quota's windows

    def plan(
        self,
        part: Partition,
        params: FetchParams,
        w: PartitionFetch,
        now_ms: int,
        expand_isr: Callable[[Partition, int], None],
    ) -> ReadPlan | FetchPartitionData:
        """The fetch plan of one partition: how far the read of this replica's log goes and how
        many bytes it may carry, or an answer without records (a leader-epoch error, a follower
        that is not a replica, a diverging epoch, a throttled follower, a consumer sent to a
        preferred read replica).

        Who serves a fetch, and from where, is decided here and only here: a follower reads this
        leader's log to its end, and its fetch offset (its own log end) moves the high watermark
        and may bring it back into the ISR; a throttled follower out of the ISR gets no records
        while the leader replication rate is over its bound, and at most
        ``THROTTLED_PARTITION_MAX_BYTES`` per answer otherwise (KIP-73). A consumer reads to the
        high watermark (this replica's: a follower serves v11+ consumers to the high watermark it
        learnt from its leader, and only while the ISR the metadata gives holds it), or to the
        last stable offset under read_committed; a leader with a replica selector may name
        another replica instead."""
        error = part.check_leader_epoch(w.current_leader_epoch, any_replica=params.any_replica)
        if error:
            leader = None if error == ErrorCode.UNKNOWN_LEADER_EPOCH else part.current_leader
            return FetchPartitionData(error, current_leader=leader)
        if params.replica_id < 0:  # a consumer
            if not part.is_leader and self.node_id not in part.isr:
                # a follower out of the ISR may be far behind: back to the leader (the client
                # drops its preferred read replica on this error and refreshes its metadata)
                leader = part.current_leader
                return FetchPartitionData(ErrorCode.NOT_LEADER_OR_FOLLOWER, current_leader=leader)
            if params.any_replica and part.is_leader and self.replica_selector is not None:
                preferred = self.preferred_read_replica(part, params.client_rack, w.fetch_offset, now_ms)
                if preferred != NO_PREFERENCE:
                    return FetchPartitionData(0, *part.fetch_offsets(), preferred_read_replica=preferred)
            return ReadPlan(params.isolation, w.partition_max_bytes)
        if params.replica_id not in part.replicas:
            return FetchPartitionData(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        offset = w.fetch_offset
        diverged = diverging_epoch(w.last_fetched_epoch, offset, part.end_offset_for_epoch)
        if diverged is not None:
            return FetchPartitionData(0, *part.fetch_offsets(), diverging_epoch=diverged)
        if part.log_start_offset <= offset < part.local_log_start_offset:
            # only the remote tier holds it: the follower starts after the tiered offsets (KIP-405)
            return FetchPartitionData(ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE, *part.fetch_offsets())
        if part.log_start_offset <= offset <= part.log_end_offset:
            part.on_follower_fetch(params.replica_id, offset, now_ms, w.log_start_offset)
            expand_isr(part, params.replica_id)
            in_sync = params.replica_id in part.isr
            if should_throttle(self.leader_quota, part.topic, part.index, in_sync, self._monotonic_ms()):
                return FetchPartitionData(0, *part.fetch_offsets())
        max_bytes = w.partition_max_bytes
        if params.replica_id not in part.isr and self.leader_quota.is_throttled(part.topic, part.index):
            max_bytes = min(max_bytes, THROTTLED_PARTITION_MAX_BYTES)
        return ReadPlan(FetchIsolation.LOG_END, max_bytes)

    def preferred_read_replica(
        self, part: Partition, client_rack: str | None, fetch_offset: int, now: int
    ) -> int:
        """KIP-392: the replica a consumer in ``client_rack`` should read ``part`` from (-1: here)."""
        state = part.leader_state
        if state is None:
            return NO_PREFERENCE
        racks = self._live_racks()
        leader = ReplicaView(self.node_id, self.rack, part.log_end_offset, 0)
        followers = [
            (
                ReplicaView(r, racks.get(r), f.log_end_offset, now - f.last_caught_up_ms),
                f.log_start_offset,
                r in part.isr and r in racks,
            )
            for r, f in state.followers.items()
        ]
        return preferred_read_replica(self.replica_selector, client_rack, leader, followers, fetch_offset)
