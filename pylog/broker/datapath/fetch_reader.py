"""The reads of the fetch path (Kafka's ReplicaManager.readFromLog and DelayedRemoteFetch): one
pass over a fetch's partitions, each planned once (``fetch_planner``) and read from this replica's
log or, for a consumer below the local log start, from the remote tier.

One byte budget spans the request's partitions (``max_bytes``, each partition also within its
own limit; only the first batch of the first partition that returns data may exceed them, so a
consumer always progresses). Whether the pass completes the fetch (``min_bytes``, an error) is
answered with it; the waiting is the replica manager's (``delayed.DelayedFetch``). The bytes a
follower's answer carries of throttled partitions count against the leader replication quota,
once per answer sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from pylog.protocol.errors import ErrorCode
from pylog.storage import OffsetOutOfRange, StorageError

from pylog.broker.datapath.fetch_params import FetchIsolation, FetchParams, FetchPartitionData, PartitionFetch
from pylog.broker.datapath.fetch_planner import FetchPlanner, ReadPlan
from pylog.broker.datapath.partition import Partition
from pylog.broker.tiered.remote_reads import RemoteReads, merge_aborted
from pylog.quotas.replication import ReplicationQuota
from pylog.replication.replica_selector import NO_PREFERENCE

log = logging.getLogger(__name__)

Wanted = Sequence[tuple[str, PartitionFetch]]


class FetchReader:
    def __init__(
        self,
        get: Callable[[str, int], Partition | None],
        absent_error: Callable[[str, int], int],
        planner: FetchPlanner,
        leader_quota: ReplicationQuota,
        remote_reads: Callable[[], RemoteReads | None],
        monotonic_ms: Callable[[], int],
    ) -> None:
        self._get = get
        self._absent_error = absent_error
        self._planner = planner
        self.leader_quota = leader_quota
        self._remote_reads = remote_reads
        self._monotonic_ms = monotonic_ms

    def read(
        self,
        params: FetchParams,
        wanted: Wanted,
        now_ms: int,
        expand_isr: Callable[[Partition, int], None],
    ) -> tuple[list[FetchPartitionData], bool]:
        """One pass over the partitions within the request's byte budget: the answers (one per
        (topic, partition) of ``wanted``, in order), and whether they complete the fetch
        (``min_bytes`` of records, or an error)."""
        budget = max(params.max_bytes, 0)
        min_one = True  # until a partition returns data, its first batch may exceed the limits
        total = 0
        errors = False
        out = []
        for topic, w in wanted:
            data = self._read_partition(params, topic, w, max(budget - total, 0), min_one, now_ms, expand_isr)
            if data.error or data.preferred_read_replica != NO_PREFERENCE:
                errors = True  # answered now: an error, or the consumer must go elsewhere
            if data.size:
                min_one = False
                total += data.size
            elif data.remote is not None:
                min_one = False  # the store's first batch may exceed the limits instead
                total += data.remote.max_bytes
            out.append(data)
        return out, errors or total >= max(params.min_bytes, 1)

    def _read_partition(
        self,
        params: FetchParams,
        topic: str,
        w: PartitionFetch,
        budget: int,
        min_one: bool,
        now_ms: int,
        expand_isr: Callable[[Partition, int], None],
    ) -> FetchPartitionData:
        part = self._get(topic, w.partition)
        if part is None:
            return FetchPartitionData(self._absent_error(topic, w.partition))
        plan = self._planner.plan(part, params, w, now_ms, expand_isr)
        if isinstance(plan, FetchPartitionData):
            return plan
        remote_reads = self._remote_reads()
        if remote_reads is None or params.replica_id >= 0:
            return self._read_local(part, w.fetch_offset, plan, budget, min_one)
        remote = self._plan_remote(remote_reads, part, w.fetch_offset, plan, budget, min_one)
        if remote is not None:
            return remote
        data = self._read_local(part, w.fetch_offset, plan, budget, min_one)
        if data.error == ErrorCode.OFFSET_OUT_OF_RANGE and w.fetch_offset >= part.log_start_offset:
            # the local segment left disk between the plan and the read: the store has it now
            return self._plan_remote(remote_reads, part, w.fetch_offset, plan, budget, min_one) or data
        return data

    def _read_local(
        self, part: Partition, offset: int, plan: ReadPlan, budget: int, min_one: bool
    ) -> FetchPartitionData:
        """Read this replica's log from ``offset`` up to the plan's bound, within the plan's limit
        and what is left of the request's budget."""
        data = FetchPartitionData(0, *part.fetch_offsets())
        log_end = part.log_end_offset
        if offset < data.log_start_offset or offset > log_end:
            data.error = ErrorCode.OFFSET_OUT_OF_RANGE
            return data
        limit = max(min(plan.max_bytes, budget), 0)
        if limit == 0 and not min_one:
            return data
        isolation = plan.isolation
        if isolation is FetchIsolation.HIGH_WATERMARK:
            upper = data.high_watermark
        elif isolation is FetchIsolation.LOG_END:
            upper = log_end
        else:
            upper = data.last_stable_offset
        try:
            batches = part.read_wire(offset, limit, upper, min_one=min_one)
        except OffsetOutOfRange:  # retention or DeleteRecords moved the log start meanwhile
            data.error = ErrorCode.OFFSET_OUT_OF_RANGE
            data.log_start_offset = part.log_start_offset
            return data
        except StorageError as exc:
            log.error("reading %s-%d failed: %s", part.topic, part.index, exc)
            data.error = ErrorCode.KAFKA_STORAGE_ERROR
            return data
        if batches:
            data.records = batches
            data.size = sum(map(len, batches))
            if isolation is FetchIsolation.TXN_COMMITTED:
                data.aborted_transactions = part.aborted_transactions(offset, batches)
        return data

    @staticmethod
    def _plan_remote(
        remote_reads: RemoteReads, part: Partition, offset: int, plan: ReadPlan, budget: int, min_one: bool
    ) -> FetchPartitionData | None:
        """A consumer's fetch below the local log start that the remote tier holds (KIP-405): an
        answer whose records ``remote_fetch`` reads from the store; None for a local read."""
        hw, lso, _ = part.fetch_offsets()
        committed = plan.isolation is FetchIsolation.TXN_COMMITTED
        limit = max(min(plan.max_bytes, budget), 0)
        if limit == 0 and not min_one:
            return None
        remote = remote_reads.plan(part, offset, limit, lso if committed else hw, min_one, committed)
        if remote is None:
            return None
        return FetchPartitionData(0, hw, lso, part.log_start_offset, remote=remote)

    async def remote_fetch(
        self, params: FetchParams, answer: list[FetchPartitionData]
    ) -> list[FetchPartitionData]:
        """Kafka's DelayedRemoteFetch: the answer waits for its partitions read from the store (in
        parallel, off the event loop, each bounded by the max wait plus the remote fetch wait)."""
        remote_reads = self._remote_reads()
        assert remote_reads is not None
        pending = [d for d in answer if d.remote is not None]
        fetches = [d.remote for d in pending if d.remote is not None]
        got = await asyncio.gather(*(remote_reads.read(f, params.max_wait_ms) for f in fetches),
                                   return_exceptions=True)
        for d, fetch, result in zip(pending, fetches, got):
            d.remote = None
            if isinstance(result, BaseException):
                log.error("reading the remote tier failed: %s", result)
                d.error = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            batches, aborted = result
            if batches:
                d.records = batches
                d.size = sum(map(len, batches))
            if params.isolation is FetchIsolation.TXN_COMMITTED:
                d.aborted_transactions = merge_aborted(fetch.part.aborted_transactions(fetch.offset, batches),
                                                       aborted)
        return answer

    def record_throttled(self, params: FetchParams, wanted: Wanted, answer: list[FetchPartitionData]) -> None:
        """Count the bytes of throttled partitions a follower's fetch answer carries against the
        leader quota (in-sync followers' too, as Kafka counts them), once per answer sent."""
        quota = self.leader_quota
        if not params.from_follower or not quota.bounded:
            return
        sent = sum(
            d.size for (t, w), d in zip(wanted, answer) if d.size and quota.is_throttled(t, w.partition)
        )
        quota.record(sent, self._monotonic_ms())
