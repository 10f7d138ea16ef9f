"""The fetch path (Kafka's ReplicaManager.fetchMessages and readFromLog, DelayedFetch,
DelayedRemoteFetch): the reads that carry out each partition's fetch plan within the request's
byte budget, the wait for ``min_bytes``, and the reads from the remote tier. Kept apart from the
plan (``fetch_planner``), which decides who reads what, and from the append path.

One byte budget spans the request's partitions (``max_bytes``, each partition also within its
own limit; only the first batch of the first partition that returns data may exceed them, so a
consumer always progresses). A fetch that does not yet have ``min_bytes`` waits
(``delayed.delayed_fetch``). The bytes a follower's answer carries of throttled partitions count
against the leader replication quota, once per answer sent.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence

from pylog.protocol.errors import ErrorCode
from pylog.storage import OffsetOutOfRange, StorageError

from pylog.broker.datapath.delayed import delayed_fetch
from pylog.broker.datapath.fetch_params import FetchIsolation, FetchParams, FetchPartitionData, PartitionFetch
from pylog.broker.datapath.fetch_planner import FetchPlanner
from pylog.broker.datapath.partition import Partition
from pylog.broker.tiered.remote_reads import RemoteReads, merge_aborted
from pylog.quotas.replication import ReplicationQuota
from pylog.replication.replica_selector import NO_PREFERENCE

log = logging.getLogger(__name__)


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

    def fetch_messages(
        self,
        params: FetchParams,
        wanted: Sequence[tuple[str, PartitionFetch]],
        *,
        expand_isr: Callable[[Partition, int], None],
        stopping: Callable[[], bool],
    ) -> list[FetchPartitionData] | Awaitable[list[FetchPartitionData]]:
        """Read ``wanted`` ((topic, partition) pairs; one answer each, in order): at once when there
        is ``min_bytes`` of data, an error, or no wait asked for; otherwise as a delayed fetch.
        ``expand_isr`` is told of each follower fetch (the ISR may grow)."""

        answer, complete = self._read(params, wanted, expand_isr)
        if any(d.remote is not None for d in answer):
            return self._remote_fetch(params, answer)
        if complete or params.max_wait_ms <= 0:
            self._record_throttled(params, wanted, answer)
            return answer
        watched = [p for t, w in wanted if (p := self._get(t, w.partition)) is not None]
        delayed = delayed_fetch(
            watched,
            to_log_end=params.from_follower,
            max_wait_ms=params.max_wait_ms,
            build=functools.partial(self._read, params, wanted, expand_isr),
            stopping=stopping,
        )
        if not params.from_follower or not self.leader_quota.bounded:
            return delayed
        return self._recorded(params, wanted, delayed)

    async def _remote_fetch(
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

    async def _recorded(
        self,
        params: FetchParams,
        wanted: Sequence[tuple[str, PartitionFetch]],
        delayed: Awaitable[list[FetchPartitionData]],
    ) -> list[FetchPartitionData]:
        answer = await delayed
        self._record_throttled(params, wanted, answer)
        return answer

    def _record_throttled(
        self,
        params: FetchParams,
        wanted: Sequence[tuple[str, PartitionFetch]],
        answer: list[FetchPartitionData],
    ) -> None:
        """Count the bytes of throttled partitions a follower's fetch answer carries against the
        leader quota (in-sync followers' too, as Kafka counts them), once per answer sent."""
        quota = self.leader_quota
        if not params.from_follower or not quota.bounded:
            return
        sent = sum(
            d.size for (t, w), d in zip(wanted, answer) if d.size and quota.is_throttled(t, w.partition)
        )
        quota.record(sent, self._monotonic_ms())

    def _read(
        self,
        params: FetchParams,
        wanted: Sequence[tuple[str, PartitionFetch]],
        expand_isr: Callable[[Partition, int], None],
    ) -> tuple[list[FetchPartitionData], bool]:
        """One pass over the partitions within the request's byte budget: the answers, and
        whether they complete the fetch (``min_bytes`` of records, or an error)."""
        budget = max(params.max_bytes, 0)
        min_one = True  # until a partition returns data, its first batch may exceed the limits
        total = 0
        errors = False
        out = []
        for topic, w in wanted:
            data = self._read_partition(params, topic, w, max(budget - total, 0), min_one, expand_isr)
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
        expand_isr: Callable[[Partition, int], None],
    ) -> FetchPartitionData:
        part = self._get(topic, w.partition)
        if part is None:
            return FetchPartitionData(self._absent_error(topic, w.partition))
        error = part.check_leader_epoch(w.current_leader_epoch, any_replica=params.any_replica)
        if error:
            leader = None if error == ErrorCode.UNKNOWN_LEADER_EPOCH else part.current_leader
            return FetchPartitionData(error, current_leader=leader)
        planner = self._planner
        plan = planner.plan(part, params, w, expand_isr)
        if isinstance(plan, FetchPartitionData):
            return plan
        if self._remote_reads() is not None and params.replica_id < 0:
            remote = planner.plan_remote(part, w, plan, budget, min_one)
            if remote is not None:
                return remote
            data = self._read_local(part, w, plan, budget, min_one)
            if data.error == ErrorCode.OFFSET_OUT_OF_RANGE and w.fetch_offset >= part.log_start_offset:
                # the local segment left disk between the plan and the read: the store has it now
                return planner.plan_remote(part, w, plan, budget, min_one) or data
            return data
        return self._read_local(part, w, plan, planner.throttled_limit(part, params, budget), min_one)

    def _read_local(
        self, part: Partition, w: PartitionFetch, isolation: FetchIsolation, budget: int, min_one: bool
    ) -> FetchPartitionData:
        """Read this replica's log from the fetch offset up to ``isolation``'s bound, within the
        partition's limit and what is left of the request's budget."""
        data = FetchPartitionData(0, *part.fetch_offsets())
        offset = w.fetch_offset
        log_end = part.log_end_offset
        if offset < data.log_start_offset or offset > log_end:
            data.error = ErrorCode.OFFSET_OUT_OF_RANGE
            return data
        limit = max(min(w.partition_max_bytes, budget), 0)
        if limit == 0 and not min_one:
            return data
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
