"""``ReplicaManager``: the partitions this broker hosts, and every append and read that reaches
them (Kafka's ReplicaManager).

Partition logs are created, reconfigured and deleted only by applied metadata
(topic and partition records, config records), never directly by a request
handler: a CreateTopics handler commits records and the listener here opens the
logs. Directories follow Kafka's ``<topic>-<partition>`` naming.

Appends. ``append_records`` is the produce path (Kafka's appendRecords): per partition, the
checks before the partition (it exists, it is not internal unless the caller is a coordinator,
this broker leads it, acks=all has enough in-sync replicas), then ``Partition.append_as_leader``
(the only way a batch enters a leader's log), then, for acks=all, the delayed produce
(``delayed.await_replication``). Transaction markers come through ``append_txn_marker``.

Reads. ``fetch_messages`` is the fetch path (Kafka's fetchMessages): one byte budget across the
request's partitions (``max_bytes``, each partition also within its own limit; only the first
batch of the first partition that returns data may exceed them, so a consumer always
progresses), and a fetch plan per partition (``_plan``): who serves it and how far it may read.
A follower's fetch reads the leader's log to its end (recording the follower's position, which
moves the high watermark and the ISR), unless the leader replication throttle holds it back
(``pylog.quotas.replication``); a consumer's reads to the high watermark or, read_committed, the
last stable offset, of the leader or, for a Fetch v11+ (KIP-392), of a follower; a leader with a
``replica.selector.class`` may instead name a preferred read replica
(``pylog.replication.replica_selector``). A fetch that does not yet have ``min_bytes`` waits
(``delayed.delayed_fetch``). ``leader_partition`` is the one leader-epoch check for every API
that must be answered by the leader at the epoch the caller names.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import shutil
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pylog.protocol.errors import ErrorCode
from pylog.storage import OffsetOutOfRange, StorageError, list_partitions
from pylog.storage.checkpoint import HIGH_WATERMARK_FILE, read_offset_checkpoint, write_offset_checkpoint
from pylog.storage.relocate import DuplicatePartitionError, find_partition_dirs, recover_moves

from pylog.broker.delayed import await_replication, delayed_fetch
from pylog.broker.log_dir_mover import LogDirMover
from pylog.broker.log_dirs import LogDirs, check_log_dirs, count_by_dir
from pylog.broker.metadata import INTERNAL_TOPICS
from pylog.broker.partition import AppendOrigin, AppendResult, Partition
from pylog.broker.producer_state import AbortedTxn
from pylog.broker.remote_reads import RemoteFetch, RemoteReads, merge_aborted
from pylog.broker.transactions import marker_batch
from pylog.broker.wire_cache import WireBudget, WireBytes
from pylog.config import BrokerConfig, ConfigError
from pylog.quotas.replication import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    WINDOW_NUM,
    WINDOW_SIZE_SECONDS,
    ReplicationQuota,
    parse_throttled_replicas,
    should_throttle,
)
from pylog.replication import diverging_epoch
from pylog.replication.replica_selector import NO_PREFERENCE, ReplicaView, preferred_read_replica

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
_EMPTY: dict[int, Partition] = {}
PARTITION_METADATA = "partition.metadata"
NO_EPOCH = -1
CONSUMER = -1

# (topic, topic configs, records) -> why the records are refused (INVALID_RECORD), or None
RecordCheck = Callable[[str, Mapping[str, str], Any], "str | None"]


class FetchIsolation(enum.Enum):
    """How far a fetch reads (Kafka's FetchIsolation)."""

    LOG_END = "log end"  # a follower's fetch
    HIGH_WATERMARK = "high watermark"  # a consumer's, read_uncommitted
    TXN_COMMITTED = "last stable offset"  # a consumer's, read_committed


@dataclass(slots=True)
class FetchParams:
    """What a Fetch request asks of all its partitions (Kafka's FetchParams)."""

    replica_id: int  # the fetching follower, or CONSUMER
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation: FetchIsolation
    # a consumer's rack_id (Fetch v11+, "" when unset); None: an older consumer, served by the
    # leader only (Kafka's ClientMetadata)
    client_rack: str | None = None

    @property
    def from_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def any_replica(self) -> bool:
        """A consumer fetch that a follower may serve too (KIP-392)."""
        return self.replica_id < 0 and self.client_rack is not None


class PartitionFetch(Protocol):
    """One partition of a Fetch request (Kafka's FetchRequest.PartitionData), as the request's own
    partition entries carry it (any object with these attributes)."""

    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int  # -1: not checked
    last_fetched_epoch: int  # a follower's: the epoch of its last batch (-1: none)
    log_start_offset: int  # a follower's


@dataclass(slots=True)
class FetchPosition:
    """A ``PartitionFetch`` built by hand (a fetch that does not come from the wire)."""

    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = NO_EPOCH
    last_fetched_epoch: int = NO_EPOCH
    log_start_offset: int = -1


@dataclass(slots=True)
class FetchPartitionData:
    """One partition of a fetch answer (Kafka's FetchPartitionData); sizes count wire bytes."""

    error: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Sequence[WireBytes] = ()
    # read_committed: the aborted transactions overlapping ``records`` (None: not asked)
    aborted_transactions: list[AbortedTxn] | None = None
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset) for a follower to truncate
    current_leader: tuple[int, int] | None = None  # (id, epoch) with NOT_LEADER / FENCED
    preferred_read_replica: int = -1
    size: int = 0
    remote: RemoteFetch | None = None  # records still to be read from the remote tier


@dataclass(slots=True)
class ProduceResult:
    """The answer of ``append_records``: one result per partition, in the order asked, and the
    delayed produce completing the acks=all ones in place (None when nothing waits)."""

    results: list[AppendResult]
    delayed: Awaitable[None] | None = None

    @property
    def failed(self) -> bool:
        return any(r.error for r in self.results)


class ReplicaManager:
    def __init__(
        self,
        config: BrokerConfig,
        data_dir: Path,
        now_ms: Any,
        monotonic_ms: Callable[[], int] | None = None,
        log_dirs: Sequence[Path] | None = None,
    ) -> None:
        self.config = config
        self.data_dir = data_dir
        # the log directories (JBOD), the data directory first; see log_dirs.py
        self.log_dirs = LogDirs(list(log_dirs) if log_dirs else [data_dir])
        self.mover = LogDirMover(self.get, now_ms)
        self._now_ms = now_ms
        self._monotonic_ms = monotonic_ms or now_ms
        self.node_id = config.node_id
        samples, window_s = config.int(WINDOW_NUM), config.int(WINDOW_SIZE_SECONDS)
        if samples < 1 or window_s < 1:
            raise ConfigError(
                f"{WINDOW_NUM} and {WINDOW_SIZE_SECONDS} must be at least 1, got {samples} and {window_s}"
            )
        # KIP-73 replication throttles: what this broker returns as leader, what its fetchers take
        self.leader_quota = ReplicationQuota(samples, window_s * 1000)
        self.follower_quota = ReplicationQuota(samples, window_s * 1000)
        self.throttle_rates_changed()
        self.replica_selector = config.raw("replica.selector.class")  # KIP-392; None: leader only
        self.rack = config.raw("broker.rack")
        self.live_racks: Mapping[int, str | None] = {}  # live broker -> broker.rack (the image's)
        self.partitions: dict[TopicPartition, Partition] = {}
        self._by_topic: dict[str, dict[int, Partition]] = {}
        self.wire_cache_bytes = config.int("pylog.wire.cache.bytes")
        self.wire_budget = WireBudget(config.int("pylog.wire.cache.total.bytes"))
        self.max_uncompressed_bytes = max(
            config.int("message.max.bytes"), config.int("socket.request.max.bytes")
        )
        self._lock = threading.Lock()  # guards the dicts against the maintenance thread
        self._checkpointed = _read_checkpoints(self.log_dirs.dirs)
        # whether the cluster has a partition at all (set once the metadata is known)
        self.partition_exists: Callable[[str, int], bool] = lambda topic, index: False
        # reads below the local log start, from the remote tier (set when the broker has one)
        self.remote_reads: RemoteReads | None = None

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def topic_partitions(self, topic: str) -> dict[int, Partition]:
        return self._by_topic.get(topic, _EMPTY)

    def absent_error(self, topic: str, index: int) -> int:
        """The error for a partition this broker does not host: NOT_LEADER_OR_FOLLOWER when the
        cluster has it elsewhere (it moved away: the client refreshes its metadata, as with Kafka),
        else UNKNOWN_TOPIC_OR_PARTITION."""
        if self.partition_exists(topic, index):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def topics(self) -> list[str]:
        return list(self._by_topic)

    def snapshot(self) -> list[Partition]:
        with self._lock:
            return list(self.partitions.values())

    def leader_partition(
        self, topic: str, index: int, current_leader_epoch: int = NO_EPOCH
    ) -> tuple[Partition | None, int]:
        """The partition, and 0 if this broker leads it at ``current_leader_epoch`` (-1: any), else
        the error: ``absent_error`` (partition None), NOT_LEADER_OR_FOLLOWER,
        FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH. Fetch, ListOffsets and OffsetForLeaderEpoch
        check leadership here, and nowhere else."""
        part = self.partitions.get((topic, index))
        if part is None:
            return None, self.absent_error(topic, index)
        return part, part.check_leader_epoch(current_leader_epoch)

    # --- appends --------------------------------------------------------------------------

    def append_records(
        self,
        entries: Iterable[tuple[str, int, Any]],
        *,
        acks: int,
        timeout_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        record_check: RecordCheck | None = None,
    ) -> ProduceResult:
        """Append one batch per (topic, partition, records) as leader, with ``acks`` 0 / 1 / -1
        (all); a result per entry, errors as data. ``record_check`` may refuse a partition's
        records (INVALID_RECORD with its message) before they are appended; only a coordinator
        writes internal topics."""
        now = self._now_ms()
        results: list[AppendResult] = []
        waiting: list[tuple[AppendResult, Partition]] = []  # acks=all, until replicated
        bad_acks = acks not in (-1, 0, 1)
        internal_allowed = origin is AppendOrigin.COORDINATOR
        check = record_check or _accept
        for topic, index, records in entries:
            part = self.partitions.get((topic, index))
            if bad_acks:
                res = AppendResult(ErrorCode.INVALID_REQUIRED_ACKS)
            elif part is None:
                res = AppendResult(self.absent_error(topic, index))
            elif topic in INTERNAL_TOPICS and not internal_allowed:
                # Only the coordinators write there (Kafka: "Cannot append to internal topic").
                res = AppendResult(ErrorCode.INVALID_TOPIC_EXCEPTION)
            elif not part.is_leader:
                res = AppendResult(ErrorCode.NOT_LEADER_OR_FOLLOWER, current_leader=part.current_leader)
            elif acks == -1 and not part.enough_replicas():
                res = AppendResult(
                    ErrorCode.NOT_ENOUGH_REPLICAS,
                    message=f"The ISR {list(part.isr)} is smaller than "
                    f"min.insync.replicas={part.min_insync_replicas}",
                )
            elif (refusal := check(topic, part.configs, records)) is not None:
                res = AppendResult(ErrorCode.INVALID_RECORD, message=refusal)
            else:
                res = part.append_as_leader(records, now, origin)
                if acks == -1 and res.error == 0 and part.high_watermark <= res.last_offset:
                    waiting.append((res, part))
            results.append(res)
        if not waiting:
            return ProduceResult(results)
        return ProduceResult(results, self._delayed_produce(waiting, timeout_ms))

    async def _delayed_produce(self, waiting: list[tuple[AppendResult, Partition]], timeout_ms: int) -> None:
        waits = [(part, res.last_offset) for res, part in waiting]
        codes = await await_replication(waits, timeout_ms / 1000)
        for (res, _), code in zip(waiting, codes):
            if code:
                res.error = code
                res.message = ErrorCode.of(code).name

    def append_txn_marker(
        self,
        topic: str,
        index: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        on_done: Callable[[ErrorCode], None],
    ) -> None:
        """Append a COMMIT / ABORT marker for the producer here (its leader) and call ``on_done``
        once the in-sync replicas hold it (markers are written with acks=all), or with the error."""
        part = self.partitions.get((topic, index))
        if part is None:
            on_done(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            return
        now = self._now_ms()
        marker = marker_batch(producer_id, producer_epoch, commit, coordinator_epoch, now)
        res = part.append_as_leader(marker, now, AppendOrigin.COORDINATOR)
        if res.error:
            on_done(ErrorCode.of(res.error))
            return
        part.add_hw_waiter(res.last_offset, lambda code: on_done(ErrorCode.of(code)))

    # --- reads ----------------------------------------------------------------------------

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
        watched = [p for t, w in wanted if (p := self.partitions.get((t, w.partition))) is not None]
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
        assert self.remote_reads is not None
        pending = [d for d in answer if d.remote is not None]
        fetches = [d.remote for d in pending if d.remote is not None]
        got = await asyncio.gather(*(self.remote_reads.read(f, params.max_wait_ms) for f in fetches),
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
        part = self.partitions.get((topic, w.partition))
        if part is None:
            return FetchPartitionData(self.absent_error(topic, w.partition))
        error = part.check_leader_epoch(w.current_leader_epoch, any_replica=params.any_replica)
        if error:
            leader = None if error == ErrorCode.UNKNOWN_LEADER_EPOCH else part.current_leader
            return FetchPartitionData(error, current_leader=leader)
        plan = self._plan(part, params, w, expand_isr)
        if isinstance(plan, FetchPartitionData):
            return plan
        if self.remote_reads is not None and params.replica_id < 0:
            remote = self._plan_remote(part, w, plan, budget, min_one)
            if remote is not None:
                return remote
            data = self._read_local(part, w, plan, budget, min_one)
            if data.error == ErrorCode.OFFSET_OUT_OF_RANGE and w.fetch_offset >= part.log_start_offset:
                # the local segment left disk between the plan and the read: the store has it now
                return self._plan_remote(part, w, plan, budget, min_one) or data
            return data
        return self._read_local(part, w, plan, budget, min_one)

    def _plan_remote(
        self, part: Partition, w: PartitionFetch, isolation: FetchIsolation, budget: int, min_one: bool
    ) -> FetchPartitionData | None:
        """A consumer's fetch below the local log start that the remote tier holds: an answer whose
        records are read from the store (``_remote_fetch``); None for a local read."""
        assert self.remote_reads is not None
        hw, lso, _ = part.fetch_offsets()
        upper = lso if isolation is FetchIsolation.TXN_COMMITTED else hw
        limit = max(min(w.partition_max_bytes, budget), 0)
        if limit == 0 and not min_one:
            return None
        committed = isolation is FetchIsolation.TXN_COMMITTED
        remote = self.remote_reads.plan(part, w.fetch_offset, limit, upper, min_one, committed)
        if remote is None:
            return None
        return FetchPartitionData(0, hw, lso, part.log_start_offset, remote=remote)

    def _plan(
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
        start from a remote tier belong here."""
        if params.replica_id < 0:  # a consumer
            if not part.is_leader and self.node_id not in part.isr:
                # a follower out of the ISR may be far behind: back to the leader (the client
                # drops its preferred read replica on this error and refreshes its metadata)
                leader = part.current_leader
                return FetchPartitionData(ErrorCode.NOT_LEADER_OR_FOLLOWER, current_leader=leader)
            if params.any_replica and part.is_leader and self.replica_selector is not None:
                preferred = self._preferred_read_replica(part, params.client_rack, w.fetch_offset)
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

    def _preferred_read_replica(self, part: Partition, client_rack: str | None, fetch_offset: int) -> int:
        """KIP-392: the replica a consumer in ``client_rack`` should read ``part`` from (-1: here)."""
        state = part.leader_state
        if state is None:
            return NO_PREFERENCE
        now = self._now_ms()
        racks = self.live_racks
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

    # --- driven by applied metadata ---------------------------------------------------------

    def ensure_partition(self, topic: str, index: int, topic_id: Any, configs: dict[str, str]) -> Partition:
        tp = (topic, index)
        part = self.partitions.get(tp)
        if part is not None and part.topic_id == topic_id:
            return part
        if part is not None:
            # Same name, new topic id: the old topic was deleted while we were not looking.
            self.remove_partition(topic, index)
        path = self._place(tp) / f"{topic}-{index}"
        _claim_directory(path, topic_id)
        part = Partition(
            topic,
            index,
            topic_id,
            path,
            self.config.topic_configs(configs),
            now_ms=self._now_ms(),
            wire_cache_bytes=self.wire_cache_bytes,
            wire_budget=self.wire_budget,
            max_uncompressed_bytes=self.max_uncompressed_bytes,
        )
        part.restore_high_watermark(self._checkpointed.get(tp, 0))
        self._mark_throttled(topic, configs)
        with self._lock:
            self.partitions[tp] = part
            self._by_topic.setdefault(topic, {})[index] = part
        log.info("opened partition %s-%d (log end offset %d)", topic, index, part.log_end_offset)
        return part

    def open_log_dirs(self) -> None:
        """At start, before any partition opens: finish or undo moves a crash interrupted and find
        the partitions of every log dir (one found in two is a plain error)."""
        dirs = self.log_dirs.dirs
        check_log_dirs(dirs)
        for done in recover_moves(dirs):
            log.warning("log dirs: %s", done)
        try:
            self.log_dirs.found = find_partition_dirs(dirs)
        except DuplicatePartitionError as exc:
            raise ConfigError(str(exc)) from None
        self._checkpointed = _read_checkpoints(dirs)

    def _place(self, tp: TopicPartition) -> Path:
        """The log dir of a partition opening here (log_dirs.LogDirs.place)."""
        counts = count_by_dir(p.path for p in self.snapshot())
        for move in self.mover.moves.values():
            counts[move.dest] = counts.get(move.dest, 0) + 1
        return self.log_dirs.place(tp, counts)

    def update_configs(self, topic: str, configs: dict[str, str]) -> None:
        self._mark_throttled(topic, configs)
        effective = self.config.topic_configs(configs)
        for part in self.topic_partitions(topic).values():
            part.apply_configs(effective)

    def _mark_throttled(self, topic: str, configs: Mapping[str, str]) -> None:
        """The topic's ``*.replication.throttled.replicas`` on this broker (Kafka's
        TopicConfigHandler marks them in the replication quota managers)."""
        for quota, name in ((self.leader_quota, LEADER_REPLICAS), (self.follower_quota, FOLLOWER_REPLICAS)):
            quota.mark_throttled(topic, parse_throttled_replicas(configs.get(name), self.node_id))

    def throttle_rates_changed(self) -> None:
        """Take ``*.replication.throttled.rate`` as the broker config now resolves them (dynamic)."""
        for quota, name in ((self.leader_quota, LEADER_RATE), (self.follower_quota, FOLLOWER_RATE)):
            rate = self.config.int(name)
            if rate > 0:
                quota.update_bound(rate)
            else:
                log.error("ignoring %s=%d: a replication throttle must be positive", name, rate)

    def set_live_brokers(self, racks: Mapping[int, str | None]) -> None:
        """The live brokers and their ``broker.rack`` (the replica selector's candidates)."""
        self.live_racks = dict(racks)

    def remove_partition(self, topic: str, index: int, *, delete_data: bool = True) -> None:
        with self._lock:
            part = self.partitions.pop((topic, index), None)
            parts = self._by_topic.get(topic)
            if parts is not None:
                parts.pop(index, None)
                if not parts:
                    del self._by_topic[topic]
        if part is None:
            return
        part.delete()
        if delete_data:
            shutil.rmtree(part.path, ignore_errors=True)
        log.info("removed partition %s-%d", topic, index)

    def delete_strays(self, known: Iterable[TopicPartition], *, skip: Iterable[str] = ()) -> None:
        """Delete partition directories the image does not assign here (deleted while down)."""
        keep = set(known)
        skipped = set(skip)
        for root in self.log_dirs.dirs:
            for d in list_partitions(root):
                if d.path.name not in skipped and (d.topic, d.partition) not in keep:
                    log.info("deleting %s: its topic no longer exists", d.path)
                    shutil.rmtree(d.path, ignore_errors=True)
                    self.log_dirs.found.pop((d.topic, d.partition), None)

    def checkpoint_high_watermarks(self) -> None:
        """Write every partition's high watermark to ``replication-offset-checkpoint`` of its log
        dir (Kafka's file, one per log dir: the SDK's data-dir reader shows nothing past it), so a
        restart keeps them."""
        parts = [p for p in self.snapshot() if not p.deleted]
        offsets = {(p.topic, p.index): p.high_watermark for p in parts}
        if offsets != self._checkpointed:
            by_dir: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.log_dirs.dirs}
            for p in parts:
                by_dir.setdefault(p.path.parent, {})[(p.topic, p.index)] = offsets[(p.topic, p.index)]
            for root, dir_offsets in by_dir.items():
                write_offset_checkpoint(root / HIGH_WATERMARK_FILE, dir_offsets)
            self._checkpointed = offsets

    def close(self) -> None:
        self.mover.close()
        try:
            self.checkpoint_high_watermarks()
        except OSError:
            log.exception("writing %s failed", HIGH_WATERMARK_FILE)
        for part in self.snapshot():
            try:
                part.close()
            except Exception:
                log.exception("closing partition %s-%d failed", part.topic, part.index)
        with self._lock:
            self.partitions.clear()
            self._by_topic.clear()


def _claim_directory(path: Path, topic_id: Any) -> None:
    """Make ``path`` belong to ``topic_id`` (Kafka's partition.metadata): data left by an older
    topic of the same name (deleted while the broker was down) is removed first."""
    marker = path / PARTITION_METADATA
    expected = f"version: 0\ntopic_id: {topic_id}\n"
    if marker.exists():
        if marker.read_text("utf-8") == expected:
            return
        log.warning("%s held a previous topic of the same name; removing its data", path)
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() and any(path.iterdir()):
        log.warning("%s has no %s; adopting its data for topic id %s", path, PARTITION_METADATA, topic_id)
    path.mkdir(parents=True, exist_ok=True)
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(expected, "utf-8")
    tmp.replace(marker)


def _read_checkpoints(dirs: Sequence[Path]) -> dict[TopicPartition, int]:
    """The high watermarks of every log dir's checkpoint (a partition moved since its last write may
    be in two: the higher is the newer)."""
    out: dict[TopicPartition, int] = {}
    for root in dirs:
        if not root.is_dir():  # not created yet, or refused at start
            continue
        for tp, hw in read_offset_checkpoint(root / HIGH_WATERMARK_FILE).items():
            out[tp] = max(hw, out.get(tp, hw))
    return out


def _accept(topic: str, configs: Mapping[str, str], records: Any) -> None:
    return None

