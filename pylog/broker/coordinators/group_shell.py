"""The asyncio shell around the sans-IO group coordinator: log, timers, parked requests.

`pylog.groups.GroupCoordinator` decides; this shell does what it cannot:

* Durability. Every call's `Output.records` are appended to the internal compacted topic
  `__consumer_offsets` (one RecordBatch per partition, through the broker's partition layer)
  *before* the call's response is sent or any parked JoinGroup / SyncGroup is answered, so an
  acknowledged commit survives a crash. Each batch's base offset goes back to the coordinator
  (`records_appended`), which orders plain and transactional commits by log position. A failed
  append answers the affected requests with Kafka's mapped error and reloads the partition from
  the log, which is what Kafka does when it loses a partition. TxnOffsetCommit records go in
  transactional batches of their producer; the transaction shell completes them
  (`GroupCoordinator.complete_txn`) when it writes the marker.
* Time. One loop timer sleeps until `next_deadline_ms()` and calls `tick` (session expiry,
  rebalance and sync timeouts, offsets retention).
* Parked requests. JoinGroup / SyncGroup get a future keyed by a handle; completions resolve
  them. A client that disconnected meanwhile has its completion dropped.
* Ownership. The shell coordinates the `__consumer_offsets` partitions this broker leads. On start
  it replays them (before the listener opens, so a restarted single node never answers
  COORDINATOR_LOAD_IN_PROGRESS); the topic itself is created on the first FindCoordinator, as
  Kafka does, with `offsets.topic.num.partitions` partitions. Once the topic exists its actual
  partition count decides which partition holds a group, whatever the setting says later.

One sans-IO `GroupCoordinator` serves every group type of the topic (classic, KIP-848 consumer
groups, KIP-932 share groups: membership only, share partition state lives with the share shell;
KIP-1071 streams groups)
and their offsets; one timer serves its earliest deadline.

Leadership changes: `load_partition` / `unload_partition` (CoordinatorShell) replay or drop a
partition; a partition led here but not loaded yet is also loaded lazily when a request for it
arrives.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pylog.protocol.errors import ErrorCode

from pylog.broker.coordinators.coordinator_shell import CoordinatorShell, ResponseOnError, ShellServices
from pylog.broker.coordinators.internal_topics import iter_log_entries
from pylog.cluster.controller import NewTopic
from pylog.cluster.records import ConfigResourceType
from pylog.config import BROKER_CONFIGS
from pylog.groups import (
    CoordinatorRecord,
    GroupConfig,
    GroupCoordinator,
    JoinGroupResult,
    OffsetCommitPartition,
    Output,
    PartitionError,
    SyncGroupResult,
    append_error_to_response,
    partition_for,
)
from pylog.groups.consumer import ConsumerGroupConfig, TopicsView
from pylog.groups.coordinator import LogEntry
from pylog.groups.share import ShareGroupConfig
from pylog.groups.streams import StreamsGroupConfig
from pylog.txn import OFFSETS_TOPIC

if TYPE_CHECKING:
    from pylog.config import BrokerConfig

log = logging.getLogger(__name__)


# An (Txn)OffsetCommit answer in the making: the error of each (topic, partition).
CommitErrors = dict[tuple[str, int], ErrorCode]


class GroupShell(CoordinatorShell[str]):
    """Owns the broker's GroupCoordinator; request handlers call it through this object."""

    coordinator: GroupCoordinator | None
    tick_name = "group coordinator"

    def __init__(self, config: BrokerConfig, services: ShellServices) -> None:
        super().__init__(OFFSETS_TOPIC, self._offsets_topic, services)
        self.broker_config = config
        props = {n: config.raw(n) for n in BROKER_CONFIGS}
        self.config = GroupConfig.from_kafka({k: v for k, v in props.items() if v is not None})
        self.raw_props = {k: v for k, v in props.items() if v is not None}
        self._handles = itertools.count(1)
        self._parked: dict[int, asyncio.Future[JoinGroupResult | SyncGroupResult]] = {}

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Build the coordinator and replay the partitions of `__consumer_offsets` this broker leads."""
        leaders = self.offsets_leaders()
        if leaders is not None and len(leaders) != self.config.offsets_topic_num_partitions:
            log.warning(
                "%s has %d partitions; offsets.topic.num.partitions=%d is ignored",
                OFFSETS_TOPIC,
                len(leaders),
                self.config.offsets_topic_num_partitions,
            )
            self.config = replace(self.config, offsets_topic_num_partitions=len(leaders))
        seed = random.SystemRandom().getrandbits(128)
        self.coordinator = GroupCoordinator(
            self.config,
            rng=random.Random(seed),
            consumer=ConsumerGroupConfig.from_kafka(self.raw_props),
            share=ShareGroupConfig.from_kafka(self.raw_props),
            streams=StreamsGroupConfig.from_kafka(self.raw_props),
        )
        self.coordinator.set_group_configs(self.group_configs)
        await self._replay_led_partitions()

    def group_configs(self, group_id: str) -> Mapping[str, str]:
        """A group's GROUP config overrides, as committed in the metadata image."""
        return self.metadata.image.configs(ConfigResourceType.GROUP, group_id)

    def stop(self) -> None:
        super().stop()
        for fut in self._parked.values():
            if not fut.done():
                fut.cancel()
        self._parked.clear()

    # ------------------------------------------------------------------ ownership

    @property
    def num_partitions(self) -> int:
        return self.config.offsets_topic_num_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def offsets_leaders(self) -> dict[int, int] | None:
        """Leader of each `__consumer_offsets` partition; None while the topic does not exist."""
        return self.leaders()

    def _load(self, p: int, records: list[LogEntry]) -> None:
        assert self.coordinator is not None
        self.coordinator.load_partition(p, records, now_ms=self.clock())
        self._loaded.add(p)

    def _tick(self, now_ms: int) -> None:
        assert self.coordinator is not None
        self.apply(self.coordinator.tick(now_ms, topics_view(self.metadata.image)))

    async def ensure_offsets_topic(self) -> ErrorCode:
        """Create `__consumer_offsets` if missing (first FindCoordinator); NONE once it exists."""
        return await self._topic.ensure()

    def _offsets_topic(self) -> NewTopic:
        cfg = self.broker_config
        return NewTopic(
            OFFSETS_TOPIC,
            self.num_partitions,
            cfg.int("offsets.topic.replication.factor"),
            configs={
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "segment.bytes": str(cfg.int("offsets.topic.segment.bytes")),
            },
        )

    # ------------------------------------------------------------------ parked requests

    def park(self) -> tuple[int, asyncio.Future[JoinGroupResult | SyncGroupResult]]:
        """A handle for a JoinGroup / SyncGroup and the future its completion resolves."""
        handle = next(self._handles)
        fut: asyncio.Future[JoinGroupResult | SyncGroupResult] = asyncio.get_running_loop().create_future()
        self._parked[handle] = fut
        fut.add_done_callback(lambda _f: self._parked.pop(handle, None))
        return handle, fut

    # ------------------------------------------------------------------ applying outputs

    def apply(
        self, out: Output, on_error: ResponseOnError | None = None, *, offset_commit: bool = False
    ) -> Any:
        """Persist `out.records`, then resolve completions; returns the (possibly failed) response."""
        error = self._persist(out.records)
        response = out.response
        completions = out.completions
        if error is not ErrorCode.NONE:
            mapped = append_error_to_response(error, offset_commit=offset_commit)
            if on_error is not None and response is not None:
                response = on_error(response, mapped)
            completions = [(h, _failed(r, mapped)) for h, r in completions]
        self._resolve(completions)
        self._reschedule()
        return response

    def _resolve(self, completions: Iterable[tuple[Any, JoinGroupResult | SyncGroupResult]]) -> None:
        for handle, result in completions:
            fut = self._parked.pop(handle, None)
            if fut is not None and not fut.done():
                fut.set_result(result)

    def _records_appended(self, recs: list[CoordinatorRecord], base_offset: int) -> None:
        assert self.coordinator is not None
        self.coordinator.records_appended(recs, base_offset)

    def _partition_unloaded(self, out: Output) -> None:
        """Fail the parked requests of the unloaded partition."""
        self._resolve(out.completions)

    def _read_partition(self, p: int) -> list[LogEntry]:
        """Every record of a partition, oldest first, with transactional ones and markers marked."""
        plog = self._log_of(p)
        return [] if plog is None else list(iter_log_entries(plog))


def _failed(result: JoinGroupResult | SyncGroupResult, error: ErrorCode) -> JoinGroupResult | SyncGroupResult:
    if isinstance(result, JoinGroupResult):
        return JoinGroupResult(error, member_id=result.member_id)
    return SyncGroupResult(error)


# ---------------------------------------------------------------------------- for the handlers


def topics_view(image: Any) -> TopicsView:
    """name -> (topic id, partition count) of every topic of the metadata image."""
    return {name: (t.topic_id, len(image.partitions(name))) for name, t in image.topics.items()}


def topic_names(image: Any) -> dict[Any, str]:
    return {t.topic_id: name for name, t in image.topics.items()}


def client_host(peer: str) -> str:
    """Kafka reports a member's host as `/ip` (the peer is `ip:port`)."""
    host = peer.rpartition(":")[0] or peer
    return "/" + host.strip("[]")


def not_available(shell: GroupShell | None, group_id: str) -> ErrorCode:
    """The coordinator error for `group_id` (COORDINATOR_NOT_AVAILABLE without a shell)."""
    if shell is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return shell.coordinator_error(group_id)


def commits_of(req: Any, error: ErrorCode, image: Any) -> tuple[CommitErrors, list[OffsetCommitPartition]]:
    """The partitions of an (Txn)OffsetCommit request that go to the coordinator, and the errors
    of the others: `error` for every partition unless NONE, else UNKNOWN_TOPIC_OR_PARTITION for
    partitions the cluster does not know (they never reach the coordinator, as in Kafka)."""
    errors: CommitErrors = {}
    commits: list[OffsetCommitPartition] = []
    for t in req.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if error is not ErrorCode.NONE:
                errors[tp] = error
            elif image.partition(t.name, p.partition_index) is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                commits.append(
                    OffsetCommitPartition(
                        t.name,
                        p.partition_index,
                        p.committed_offset,
                        getattr(p, "committed_leader_epoch", -1),
                        p.committed_metadata,
                    )
                )
    return errors, commits


def apply_commits(shell: GroupShell, out: Output, errors: CommitErrors) -> None:
    """Persist a commit's output; its per-partition errors (a failed append fails them all) go in `errors`."""
    results: list[PartitionError] = shell.apply(out, _failed_commits, offset_commit=True)
    for r in results:
        errors[(r.topic, r.partition)] = r.error


def _failed_commits(results: list[PartitionError], error: ErrorCode) -> list[PartitionError]:
    return [PartitionError(r.topic, r.partition, error) for r in results]


AUTHORIZED_OPS_UNKNOWN = -2147483648


def describe_modern(
    shell: GroupShell | None, group_ids: list[str], allowed: set[str], image: Any, *, share: bool
) -> dict:
    """The ConsumerGroupDescribe / ShareGroupDescribe response: each requested group once, in
    request order; a group the caller may not DESCRIBE answers GROUP_AUTHORIZATION_FAILED."""
    from pylog.groups import describe

    wanted = list(dict.fromkeys(group_ids))
    visible = [g for g in wanted if g in allowed]
    if shell is None or shell.coordinator is None:
        found = {g: describe.failed(g, ErrorCode.COORDINATOR_NOT_AVAILABLE) for g in visible}
    else:
        errors = {g: shell.coordinator_error(g) for g in visible}  # also loads led partitions lazily
        found = {g: describe.failed(g, e) for g, e in errors.items() if e is not ErrorCode.NONE}
        c = shell.coordinator
        served = [g for g in visible if g not in found]
        entries = (c.share_group_describe if share else c.consumer_group_describe)(served, topic_names(image))
        found.update((e["group_id"], e) for e in entries)
    groups = []
    for g in wanted:
        entry = found[g] if g in found else describe.failed(g, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        if g not in found:
            entry["error_message"] = None
        entry["authorized_operations"] = AUTHORIZED_OPS_UNKNOWN
        groups.append(entry)
    return {"throttle_time_ms": 0, "groups": groups}
