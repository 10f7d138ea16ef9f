"""The fetch plan of one partition: who serves a fetch and how far it may read (Kafka's
ReplicaManager fetch checks, the replica selector of KIP-392, the leader replication throttle of
KIP-73, the remote tier of KIP-405). Kept apart from the reads so the rules of who may read what
live in one place and are tested without a log read.

A follower's fetch reads the leader's log to its end (recording the follower's position, which
moves the high watermark and the ISR), unless the leader replication throttle holds it back
(``pylog.quotas.replication``); a consumer's reads to the high watermark or, read_committed, the
last stable offset, of the leader or, for a Fetch v11+ (KIP-392), of a follower; a leader with a
``replica.selector.class`` may instead name a preferred read replica
(``pylog.replication.replica_selector``). A consumer's fetch below the local log start is read
from the remote tier when it holds the offsets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pylog.protocol.errors import ErrorCode

from pylog.broker.datapath.fetch_params import FetchIsolation, FetchParams, FetchPartitionData, PartitionFetch
from pylog.broker.datapath.partition import Partition
from pylog.broker.tiered.remote_reads import RemoteReads
from pylog.quotas.replication import THROTTLED_PARTITION_MAX_BYTES, ReplicationQuota, should_throttle
from pylog.replication import diverging_epoch
from pylog.replication.replica_selector import NO_PREFERENCE, ReplicaView, preferred_read_replica


class FetchPlanner:
    def __init__(
        self,
        node_id: int,
        rack: str | None,
        replica_selector: str | None,
        leader_quota: ReplicationQuota,
        live_racks: Callable[[], Mapping[int, str | None]],
        remote_reads: Callable[[], RemoteReads | None],
        now_ms: Callable[[], int],
        monotonic_ms: Callable[[], int],
    ) -> None:
        self.node_id = node_id
        self.rack = rack
        self.replica_selector = replica_selector  # KIP-392; None: leader only
        self.leader_quota = leader_quota
        self._live_racks = live_racks  # live broker -> broker.rack (the image's)
        self._remote_reads = remote_reads
        self._now_ms = now_ms
        self._monotonic_ms = monotonic_ms

    def plan(
        self,
        part: Partition,
        params: FetchParams,
        w: PartitionFetch,
        expand_isr: Callable[[Partition, int], None],
    ) -> FetchIsolation | FetchPartitionData:
        """The fetch plan of one partition led here: how far the read of this replica's log goes,
        or an answer without records (a follower that is not a replica, a diverging epoch, a
        throttled follower, a consumer sent to a preferred read replica).

        Who serves a fetch, and from where, is decided here and only here: a follower reads this
        leader's log to its end, and its fetch offset (its own log end) moves the high watermark
        and may bring it back into the ISR; a throttled follower out of the ISR gets no records
        while the leader replication rate is over its bound. A consumer reads to the high
        watermark (this replica's: a follower serves v11+ consumers to the high watermark it
        learnt from its leader, and only while the ISR the metadata gives holds it), or to the
        last stable offset under read_committed; a leader with a replica selector may name
        another replica instead. Reads below the local log
        start from a remote tier belong here (``plan_remote``)."""
        if params.replica_id < 0:  # a consumer
            if not part.is_leader and self.node_id not in part.isr:
                # a follower out of the ISR may be far behind: back to the leader (the client
                # drops its preferred read replica on this error and refreshes its metadata)
                leader = part.current_leader
                return FetchPartitionData(ErrorCode.NOT_LEADER_OR_FOLLOWER, current_leader=leader)
            if params.any_replica and part.is_leader and self.replica_selector is not None:
                preferred = self.preferred_read_replica(part, params.client_rack, w.fetch_offset)
                if preferred != NO_PREFERENCE:
                    return FetchPartitionData(0, *part.fetch_offsets(), preferred_read_replica=preferred)
            return params.isolation
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
            part.on_follower_fetch(params.replica_id, offset, self._now_ms(), w.log_start_offset)
            expand_isr(part, params.replica_id)
            in_sync = params.replica_id in part.isr
            if should_throttle(self.leader_quota, part.topic, part.index, in_sync, self._monotonic_ms()):
                return FetchPartitionData(0, *part.fetch_offsets())
        return FetchIsolation.LOG_END

    def throttled_limit(self, part: Partition, params: FetchParams, budget: int) -> int:
        """A follower's budget for a partition under the leader replication throttle (KIP-73):
        at most ``THROTTLED_PARTITION_MAX_BYTES`` per answer, so the rate holds however much a
        catching-up follower asks for."""
        if (params.replica_id >= 0 and params.replica_id not in part.isr
                and self.leader_quota.is_throttled(part.topic, part.index)):
            return min(budget, THROTTLED_PARTITION_MAX_BYTES)
        return budget

    def plan_remote(
        self, part: Partition, w: PartitionFetch, isolation: FetchIsolation, budget: int, min_one: bool
    ) -> FetchPartitionData | None:
        """A consumer's fetch below the local log start that the remote tier holds: an answer whose
        records are read from the store (``FetchReader`` reads them); None for a local read."""
        remote_reads = self._remote_reads()
        assert remote_reads is not None
        hw, lso, _ = part.fetch_offsets()
        upper = lso if isolation is FetchIsolation.TXN_COMMITTED else hw
        limit = max(min(w.partition_max_bytes, budget), 0)
        if limit == 0 and not min_one:
            return None
        committed = isolation is FetchIsolation.TXN_COMMITTED
        remote = remote_reads.plan(part, w.fetch_offset, limit, upper, min_one, committed)
        if remote is None:
            return None
        return FetchPartitionData(0, hw, lso, part.log_start_offset, remote=remote)

    def preferred_read_replica(self, part: Partition, client_rack: str | None, fetch_offset: int) -> int:
        """KIP-392: the replica a consumer in ``client_rack`` should read ``part`` from (-1: here)."""
        state = part.leader_state
        if state is None:
            return NO_PREFERENCE
        now = self._now_ms()
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
