"""``ReplicaManager``: the partitions this broker hosts, and every append and read that reaches
them (Kafka's ReplicaManager). The append path is here: the checks before a batch reaches a
leader's partition (it exists, it is not internal unless a coordinator writes, this broker leads
it, acks=all has enough in-sync replicas, the record check accepts it), then
``Partition.append_as_leader`` (the only way a batch enters a leader's log), then, for acks=all,
the delayed produce. Reads are planned by ``fetch_planner`` and carried out by ``fetch_reader``.
Also here: the partitions' lifecycle, the one leader-epoch check and the replication throttles'
configuration.

The data path is a deterministic core in the style of the Raft core: ``append``, ``append_marker``
and ``fetch`` take the request and ``now_ms`` and return the answer or a pending delayed operation
(``delayed.Purgatory``); ``tick(now_ms)`` completes those an event made ready (an append, a high
watermark that moved, a role change) or whose deadline passed. The core reads no clock (but the
injected monotonic one for the leader replication throttle's rate windows). A thin
asyncio shell (``append_records``, ``append_txn_marker``, ``fetch_messages``) reads the clock,
ticks soon after an operation becomes ready and at the earliest deadline, and hands the handlers
awaitables; a simulation drives the core with its own time instead.

Partition logs are created, reconfigured and deleted only by applied metadata
(topic and partition records, config records), never directly by a request
handler: a CreateTopics handler commits records and the listener here opens the
logs. Directories follow Kafka's ``<topic>-<partition>`` naming.

``leader_partition`` is the one leader-epoch check for every API that must be answered by the
leader at the epoch the caller names.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pylog.protocol.errors import ErrorCode
from pylog.storage import list_partitions
from pylog.storage.checkpoint import HIGH_WATERMARK_FILE, read_offset_checkpoint, write_offset_checkpoint
from pylog.storage.relocate import DuplicatePartitionError, find_partition_dirs, recover_moves

from pylog.broker.control.metadata import INTERNAL_TOPICS
from pylog.broker.datapath.delayed import DelayedFetch, DelayedOperation, DelayedProduce, Purgatory
from pylog.broker.datapath.fetch_params import (
    CONSUMER,
    NO_EPOCH,
    FetchIsolation,
    FetchParams,
    FetchPartitionData,
    FetchPosition,
    PartitionFetch,
)
from pylog.broker.datapath.fetch_planner import FetchPlanner
from pylog.broker.datapath.fetch_reader import FetchReader
from pylog.broker.datapath.log_dir_mover import LogDirMover
from pylog.broker.datapath.log_dirs import LogDirs, check_log_dirs, count_by_dir
from pylog.broker.datapath.partition import AppendOrigin, AppendResult, Partition
from pylog.broker.datapath.transactions import marker_batch
from pylog.broker.datapath.wire_cache import WireBudget
from pylog.broker.tiered.remote_reads import RemoteReads
from pylog.config import BrokerConfig, ConfigError
from pylog.metrics.counters import TopicStats
from pylog.quotas.replication import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    WINDOW_NUM,
    WINDOW_SIZE_SECONDS,
    ReplicationQuota,
    parse_throttled_replicas,
)

# the fetch and produce types are named from here too, where the handlers and tests import them
__all__ = [
    "CONSUMER",
    "NO_EPOCH",
    "PARTITION_METADATA",
    "FetchIsolation",
    "FetchParams",
    "FetchPartitionData",
    "FetchPosition",
    "PartitionFetch",
    "ProduceResult",
    "RecordCheck",
    "ReplicaManager",
    "TopicPartition",
]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
_EMPTY: dict[int, Partition] = {}
PARTITION_METADATA = "partition.metadata"

# (topic, topic configs, records) -> why the records are refused (INVALID_RECORD), or None
RecordCheck = Callable[[str, Mapping[str, str], Any], "str | None"]


class AcksAllWait(DelayedProduce):
    """The delayed produce of one produce request: completes its acks=all results in place."""

    def __init__(self, waiting: list[tuple[AppendResult, Partition]], deadline_ms: int) -> None:
        super().__init__([(part, res.last_offset) for res, part in waiting], deadline_ms)
        self.results = [res for res, _ in waiting]

    def finish(self) -> None:
        for res, code in zip(self.results, self.codes):
            if code:
                res.error = code
                res.message = ErrorCode.of(code).name


class MarkerWait(DelayedProduce):
    """A transaction marker waiting for the in-sync replicas (no timeout, no min.insync check)."""

    def __init__(self, part: Partition, last_offset: int, on_done: Callable[[ErrorCode], None]) -> None:
        super().__init__([(part, last_offset)], None, check_min_isr=False)
        self.on_done = on_done

    def finish(self) -> None:
        self.on_done(ErrorCode.of(self.codes[0] or 0))


class FetchWait(DelayedFetch[list[FetchPartitionData]]):
    """The delayed fetch of one Fetch request."""

    params: FetchParams
    wanted: Sequence[tuple[str, PartitionFetch]]


@dataclass(slots=True)
class ProduceResult:
    """The answer of ``append``: one result per partition, in the order asked, and the delayed
    produce (``pending``, completed by ``tick``) that completes the acks=all ones in place (None
    when nothing waits). ``append_records`` adds ``delayed``: an awaitable of that completion."""

    results: list[AppendResult]
    pending: AcksAllWait | None = None
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
        self.mover = LogDirMover(self.get, now_ms, config)
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
        # partitions per log dir, kept up to date between placements (None: count again)
        self._dir_counts: dict[Path, int] | None = None
        self._counted_relocations = 0
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
        self.topic_stats = TopicStats()  # messages and bytes in / out, read by pylog.metrics
        self.purgatory = Purgatory()  # delayed produces and fetches, completed by ``tick``
        self.purgatory.notify = self._tick_soon
        self._loop: asyncio.AbstractEventLoop | None = None  # the shell's, once something waits
        self._tick_scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self.planner = FetchPlanner(
            self.node_id,
            self.rack,
            self.replica_selector,
            self.leader_quota,
            live_racks=lambda: self.live_racks,
            monotonic_ms=self._monotonic_ms,
        )
        self.reader = FetchReader(
            self.get,
            self.absent_error,
            self.planner,
            self.leader_quota,
            remote_reads=lambda: self.remote_reads,
            monotonic_ms=self._monotonic_ms,
        )

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

    # --- the core: append, fetch and tick take ``now`` and read no clock ----------------------

    def append(
        self,
        entries: Iterable[tuple[str, int, Any]],
        *,
        acks: int,
        timeout_ms: int,
        now_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        record_check: RecordCheck | None = None,
    ) -> ProduceResult:
        """The produce path (Kafka's appendRecords): append one batch per (topic, partition,
        records) as leader, with ``acks`` 0 / 1 / -1 (all); a result per entry, errors as data,
        and for acks=all batches the in-sync replicas do not all have yet, the pending delayed
        produce (``tick`` completes it). ``record_check`` may refuse a partition's records
        (INVALID_RECORD with its message) before they are appended; only a coordinator writes
        internal topics."""
        results: list[AppendResult] = []
        waiting: list[tuple[AppendResult, Partition]] = []  # acks=all, until replicated
        bad_acks = acks not in (-1, 0, 1)
        internal_allowed = origin is AppendOrigin.COORDINATOR
        check = record_check or _accept
        for topic, index, records in entries:
            part = self.get(topic, index)
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
                res = part.append_as_leader(records, now_ms, origin)
                if res.error == 0:
                    self.topic_stats.appended(topic, res.last_offset - res.base_offset + 1, len(records))
                if acks == -1 and res.error == 0 and part.high_watermark <= res.last_offset:
                    waiting.append((res, part))
            results.append(res)
        if not waiting:
            return ProduceResult(results)
        op = AcksAllWait(waiting, now_ms + max(timeout_ms, 0))
        if self.purgatory.add(op, now_ms):
            op.finish()
            return ProduceResult(results)
        return ProduceResult(results, op)

    def append_marker(
        self,
        topic: str,
        index: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        on_done: Callable[[ErrorCode], None],
        now_ms: int,
    ) -> MarkerWait | None:
        """Append a COMMIT / ABORT marker for the producer here (its leader) and call ``on_done``
        once the in-sync replicas hold it (markers are written with acks=all), or with the error;
        the pending wait when ``tick`` is to complete it."""
        part = self.get(topic, index)
        if part is None:
            on_done(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            return None
        marker = marker_batch(producer_id, producer_epoch, commit, coordinator_epoch, now_ms)
        res = part.append_as_leader(marker, now_ms, AppendOrigin.COORDINATOR)
        if res.error:
            on_done(ErrorCode.of(res.error))
            return None
        op = MarkerWait(part, res.last_offset, on_done)
        if self.purgatory.add(op, now_ms):
            op.finish()
            return None
        return op

    def fetch(
        self,
        params: FetchParams,
        wanted: Sequence[tuple[str, PartitionFetch]],
        *,
        now_ms: int,
        expand_isr: Callable[[Partition, int], None],
        stopping: Callable[[], bool] = lambda: False,
    ) -> list[FetchPartitionData] | FetchWait:
        """The fetch path (Kafka's fetchMessages): read ``wanted`` ((topic, partition) pairs; one
        answer each, in order); the answer at once when there is ``min_bytes`` of data, an error,
        a read from the remote tier to make, or no wait asked for; otherwise the pending delayed
        fetch (``tick`` completes it: woken by an append, a high watermark that moved, a role
        change, or its ``max_wait_ms``). ``expand_isr`` is told of each follower fetch."""
        reader = self.reader
        answer, complete = reader.read(params, wanted, now_ms, expand_isr)
        if any(d.remote is not None for d in answer):
            return answer  # the shell reads the store, then counts it (``fetched``)
        if complete or params.max_wait_ms <= 0:
            self.fetched(params, wanted, answer)
            return answer
        watched = [p for t, w in wanted if (p := self.get(t, w.partition)) is not None]
        op = FetchWait(
            watched,
            to_log_end=params.from_follower,
            deadline_ms=now_ms + params.max_wait_ms,
            build=lambda now: reader.read(params, wanted, now, expand_isr),
            first=answer,
            stopping=stopping,
        )
        op.params, op.wanted = params, wanted
        self.purgatory.add(op, now_ms)  # never done at once: nothing woke it yet
        return op

    def tick(self, now_ms: int) -> list[DelayedOperation]:
        """Complete the delayed produces and fetches that an event made ready (an append, a
        high watermark that moved, a role change, truncation) or whose deadline ``now_ms``
        passed; each one's ``on_complete`` is called, and the completed are returned."""
        done = self.purgatory.tick(now_ms)
        for op in done:
            try:
                if isinstance(op, FetchWait):
                    self.fetched(op.params, op.wanted, op.result)
                elif isinstance(op, AcksAllWait | MarkerWait):
                    op.finish()
                if op.on_complete is not None:
                    op.on_complete(op)
            except Exception:  # one waiter's failure must not keep the others waiting
                log.exception("completing a delayed operation failed")
        return done

    def fetched(
        self, params: FetchParams, wanted: Sequence[tuple[str, PartitionFetch]],
        answer: list[FetchPartitionData],
    ) -> None:
        """A fetch answer is complete: count its bytes (topic stats, the leader replication quota)."""
        self.reader.record_throttled(params, wanted, answer)
        self.topic_stats.fetched(wanted, answer, follower=params.from_follower, replica_id=params.replica_id)

    # --- the asyncio shell: the clock, the tick's timer, futures for the handlers ---------------

    def append_records(
        self,
        entries: Iterable[tuple[str, int, Any]],
        *,
        acks: int,
        timeout_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        record_check: RecordCheck | None = None,
    ) -> ProduceResult:
        """``append`` now; ``delayed`` awaits the acks=all wait when there is one."""
        result = self.append(
            entries, acks=acks, timeout_ms=timeout_ms, now_ms=self._now_ms(), origin=origin,
            record_check=record_check,
        )
        if result.pending is not None:
            result.delayed = self._completion(result.pending)
        return result

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
        """``append_marker`` now; a later tick calls ``on_done`` if it waits."""
        op = self.append_marker(
            topic, index, producer_id, producer_epoch, commit, coordinator_epoch, on_done, self._now_ms()
        )
        if op is not None:
            self._completion(op)

    def fetch_messages(
        self,
        params: FetchParams,
        wanted: Sequence[tuple[str, PartitionFetch]],
        *,
        expand_isr: Callable[[Partition, int], None],
        stopping: Callable[[], bool],
    ) -> list[FetchPartitionData] | Awaitable[list[FetchPartitionData]]:
        """``fetch`` now: the answer, or an awaitable of the delayed fetch's or the remote
        tier's."""
        answer = self.fetch(params, wanted, now_ms=self._now_ms(), expand_isr=expand_isr, stopping=stopping)
        if isinstance(answer, FetchWait):
            return self._fetch_result(answer, self._completion(answer))
        if any(d.remote is not None for d in answer):
            return self._remote_fetch(params, wanted, answer)
        return answer

    async def _fetch_result(self, op: FetchWait, done: Awaitable[None]) -> list[FetchPartitionData]:
        await done
        return op.result

    async def _remote_fetch(
        self, params: FetchParams, wanted: Sequence[tuple[str, PartitionFetch]],
        answer: list[FetchPartitionData],
    ) -> list[FetchPartitionData]:
        done = await self.reader.remote_fetch(params, answer)
        self.fetched(params, wanted, done)
        return done

    def _completion(self, op: DelayedOperation) -> Awaitable[None]:
        """A future set when a tick completes ``op``; the tick's timer is armed for its deadline.
        Called outside an event loop, the wait starts when it is awaited in one."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self._completion_later(op)
        if loop is not self._loop:  # a first operation, or a new event loop: forget the old one's
            self._loop, self._tick_scheduled, self._timer, self._timer_at = loop, False, None, None
        fut: asyncio.Future[None] = loop.create_future()
        op.on_complete = lambda _op: None if fut.done() else fut.set_result(None)
        self._arm()
        return fut

    async def _completion_later(self, op: DelayedOperation) -> None:
        if not op.done:
            await self._completion(op)

    def _tick_soon(self) -> None:
        """The purgatory's notify: an operation is ready, tick once the current step is done."""
        loop = self._loop
        if loop is None or self._tick_scheduled or loop.is_closed():
            return
        self._tick_scheduled = True
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            loop.call_soon(self._run_tick)
        else:  # an event from another thread (the maintenance thread)
            loop.call_soon_threadsafe(self._run_tick)

    def _run_tick(self) -> None:
        self._tick_scheduled = False
        self.tick(self._now_ms())
        self._arm()

    def _on_timer(self) -> None:
        """The earliest deadline came, as the event loop counts time: tick at least there, so an
        injected clock that lags the loop's (a manual one, a wall clock set back) cannot hold a
        wait past its timeout."""
        at = self._timer_at
        self._timer = None
        self._timer_at = None
        self.tick(max(self._now_ms(), at if at is not None else 0))
        self._arm()

    def _arm(self) -> None:
        """One timer, at the earliest deadline of a pending operation."""
        deadline = self.purgatory.next_deadline()
        if self._timer is not None and (deadline is None or self._timer_at != deadline):
            self._timer.cancel()
            self._timer = None
            self._timer_at = None
        if deadline is None or self._timer is not None or self._loop is None:
            return
        delay_ms = max(deadline - self._now_ms(), 0)
        self._timer = self._loop.call_later(delay_ms / 1000, self._on_timer)
        self._timer_at = deadline

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
            if self._dir_counts is not None:
                self._dir_counts[path.parent] = self._dir_counts.get(path.parent, 0) + 1
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
        counts = dict(self._partitions_by_dir())
        for move in self.mover.moves.values():
            counts[move.dest] = counts.get(move.dest, 0) + 1
        return self.log_dirs.place(tp, counts)

    def _partitions_by_dir(self) -> dict[Path, int]:
        """How many partitions each log dir holds: counted once, then kept by every opening and
        removal (a finished move between dirs counts again), so that opening n partitions is O(n)."""
        with self._lock:
            if self._dir_counts is None or self._counted_relocations != self.mover.relocations:
                self._dir_counts = count_by_dir(p.path for p in self.partitions.values())
                self._counted_relocations = self.mover.relocations
            return self._dir_counts

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
            if part is not None and self._dir_counts is not None:
                self._dir_counts[part.path.parent] = self._dir_counts.get(part.path.parent, 1) - 1
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
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
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
            self._dir_counts = None


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
