"""The group coordinator: one registry of groups and the state machines composed over it.

`GroupCoordinator` routes each API to the state machine of the group's type and owns what they
share: the `GroupRegistry` (groups by id, the `__consumer_offsets` partitions owned or loading, one
timer queue), the `OffsetStore`, and loading a partition from its records. The state machines:

* `classic.ClassicProtocol`: JoinGroup / SyncGroup / Heartbeat / LeaveGroup of classic groups;
* `consumer.ConsumerProtocol`: ConsumerGroupHeartbeat (KIP-848);
* `migration.Migration`: classic <-> consumer conversion and classic members of consumer groups;
* `share.ShareProtocol`: ShareGroupHeartbeat (KIP-932);
* `streams.StreamsProtocol`: StreamsGroupHeartbeat (KIP-1071);
* `offsets.OffsetStore`: the offsets of every group type;
* `retention.OffsetRetention`: which offsets expire, and the periodic cleanup;
* `describe`: what the describe APIs say of each type.

Durability: every change that must survive a restart is returned as `CoordinatorRecord`s in
`Output.records` (Kafka's binary `__consumer_offsets` format); the shell appends them before it
answers anyone, so an acknowledged commit is durable. If an append fails, memory is ahead of the
log for that partition: the shell answers the affected requests with `append_error_to_response`
and reloads the partition (`unload_partition`, then `load_partition`), which is what Kafka does
when it loses the partition.

`load_partition` replays a partition's records in log order: offsets come back as committed (or
pending, for transactions whose marker did not come yet), classic groups with their generation,
members and assignments (Stable) or Empty, consumer and share groups with their epochs, members
and assignments. A group that changed type wrote the old type's tombstones first, so replay ends
in the type it had last. Loaded members are not trusted to be alive: their sessions restart at
load time, so members that keep heartbeating carry on and the others expire. Nothing here reads
a clock: every call takes `now_ms`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence

from pylog.groups import describe
from pylog.groups.classic import ClassicProtocol
from pylog.groups.consumer import (
    ConsumerGroupConfig,
    ConsumerProtocol,
    GroupConfigs,
    Heartbeat,
    TopicsView,
    error_response,
)
from pylog.groups.consumer_group import ConsumerGroup
from pylog.groups.group import CONSUMER_PROTOCOL_TYPE, ClassicGroup, GroupState
from pylog.groups.loading import LogEntry, replay
from pylog.groups.migration import Migration
from pylog.groups.offsets import OffsetStore
from pylog.groups.records import OffsetAndMetadata
from pylog.groups.registry import GroupRegistry
from pylog.groups.retention import OffsetRetention
from pylog.groups.share import ShareGroupConfig, ShareHeartbeat, ShareProtocol
from pylog.groups.share_group import ShareGroup
from pylog.groups.streams import HeartbeatResult, StreamsGroupConfig, StreamsHeartbeat, StreamsProtocol
from pylog.groups.streams import error_response as streams_error
from pylog.groups.streams import validate as validate_streams
from pylog.groups.streams_group import StreamsGroup
from pylog.groups.types import (
    CoordinatorRecord,
    DescribedGroup,
    GroupConfig,
    Handle,
    JoinGroupResult,
    JoinRequest,
    LeaveGroupResult,
    LeaveMemberResult,
    ListedGroup,
    OffsetCommitPartition,
    OffsetDeleteResult,
    OffsetFetchResult,
    Output,
    PartitionError,
    SyncGroupResult,
    SyncRequest,
    TopicPartition,
)
from pylog.protocol.errors import ErrorCode

__all__ = ["GroupCoordinator", "LogEntry", "append_error_to_response"]


def append_error_to_response(error: ErrorCode, *, offset_commit: bool = False) -> ErrorCode:
    """Kafka's mapping of a failed `__consumer_offsets` append to the error clients understand."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE if offset_commit else ErrorCode.UNKNOWN_SERVER_ERROR
    return error


class GroupCoordinator:
    """Sans-IO coordinator of every group of the `__consumer_offsets` partitions it has loaded.

    `rng` draws member ids (seed it from the OS in the broker: ids must not repeat across restarts,
    since loaded groups keep theirs). A partition is served once `load_partition` replayed it;
    requests for others get NOT_COORDINATOR.
    """

    def __init__(
        self,
        config: GroupConfig | None = None,
        *,
        rng: random.Random,
        consumer: ConsumerGroupConfig | None = None,
        share: ShareGroupConfig | None = None,
        streams: StreamsGroupConfig | None = None,
    ) -> None:
        self.config = config or GroupConfig()
        self.registry = GroupRegistry(self.config, rng=rng)
        self.offsets = OffsetStore(self.config, self.registry.partition_for)
        self.classic = ClassicProtocol(self.registry)
        self.consumer = ConsumerProtocol(self.registry, consumer or ConsumerGroupConfig())
        self.share = ShareProtocol(self.registry, share or ShareGroupConfig())
        self.streams = StreamsProtocol(self.registry, streams or StreamsGroupConfig())
        self.migration = Migration(self.registry, self.classic, self.consumer)
        self.retention = OffsetRetention(self.registry, self.offsets, self.classic)

    # ------------------------------------------------------------------ queries

    def partition_for(self, group_id: str) -> int:
        """The `__consumer_offsets` partition holding `group_id`."""
        return self.registry.partition_for(group_id)

    def coordinator_error(self, group_id: str) -> ErrorCode:
        return self.registry.coordinator_error(group_id)

    def set_group_configs(self, lookup: GroupConfigs) -> None:
        """Where a group's own configs come from (`consumer.session.timeout.ms`, ...)."""
        self.consumer.group_configs = lookup
        self.share.group_configs = lookup
        self.streams.group_configs = lookup

    def group(self, group_id: str) -> ClassicGroup | ConsumerGroup | ShareGroup | StreamsGroup | None:
        """The live group object of any type, for inspection; do not mutate it."""
        return self.registry.groups.get(group_id)

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        return self.consumer.group(group_id)

    def share_group(self, group_id: str) -> ShareGroup | None:
        return self.share.group(group_id)

    def streams_group(self, group_id: str) -> StreamsGroup | None:
        return self.streams.group(group_id)

    def group_ids(self) -> list[str]:
        return list(self.registry.groups)

    def offsets_of(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return dict(self.offsets.of(group_id))

    # ------------------------------------------------------------------ timers

    def next_deadline_ms(self) -> int | None:
        """When the shell must call `tick` next (None: nothing scheduled)."""
        return self.registry.next_deadline_ms()

    def tick(self, now_ms: int, topics: TopicsView | None = None) -> Output:
        """Fire the timers due at `now_ms` (sessions, rebalance / sync / revocation timeouts,
        offsets retention). `topics` is the current topic metadata, if the caller has it."""
        self._topics(topics)
        out = Output()
        self.registry.run_timers(now_ms, out)
        return out

    def expire_offsets(self, now_ms: int) -> Output:
        """Run the offsets-retention cleanup now (normally done by `tick` every check interval)."""
        out = Output()
        self.registry.run_timers(now_ms, out)
        self.retention.expire(now_ms, out)
        return out

    def _topics(self, topics: TopicsView | None) -> None:
        if topics is not None:
            self.migration.topics = topics

    # ------------------------------------------------------------------ classic APIs

    def join_group(
        self, req: JoinRequest, *, now_ms: int, handle: Handle, topics: TopicsView | None = None
    ) -> Output:
        """JoinGroup (all versions). The answer for `handle` arrives in some `Output.completions`."""
        self._topics(topics)
        out = Output()
        self.registry.run_timers(now_ms, out)
        req = req.normalised()
        g = self._routable(req.group_id)
        error = ErrorCode.NONE
        if isinstance(g, (ShareGroup, StreamsGroup)):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        elif isinstance(g, ConsumerGroup) and g.members:
            if not self.config.accepts_session_timeout(req.session_timeout_ms):
                error = ErrorCode.INVALID_SESSION_TIMEOUT
            else:
                self.migration.join(g, req, now_ms=now_ms, handle=handle, out=out)
                return out
        if error is not ErrorCode.NONE:
            out.complete(handle, JoinGroupResult(error, member_id=req.member_id))
            return out
        if isinstance(g, ConsumerGroup):
            self.consumer.delete(g, out)  # an empty consumer group becomes a classic group, as in Kafka
        return _merged(out, self.classic.join_group(req, now_ms=now_ms, handle=handle))

    def _routable(self, group_id: str) -> ClassicGroup | ConsumerGroup | ShareGroup | StreamsGroup | None:
        """The group a request names, if this coordinator serves it now."""
        if not group_id or self.coordinator_error(group_id) is not ErrorCode.NONE:
            return None
        return self.group(group_id)

    def _modern(self, group_id: str, now_ms: int) -> tuple[Output, ConsumerGroup | None] | None:
        """None when a classic group (or none) answers a classic call; otherwise the call's Output
        (timers run) and the consumer group whose classic members it may come from."""
        if not isinstance(self._routable(group_id), (ConsumerGroup, ShareGroup, StreamsGroup)):
            return None
        out = Output()
        self.registry.run_timers(now_ms, out)
        return out, self.consumer.group(group_id)

    def sync_group(
        self, req: SyncRequest, *, now_ms: int, handle: Handle, topics: TopicsView | None = None
    ) -> Output:
        """SyncGroup; `assignments` matter only from the leader. The answer arrives as a completion."""
        self._topics(topics)
        modern = self._modern(req.group_id, now_ms)
        if modern is None:
            return self.classic.sync_group(req, now_ms=now_ms, handle=handle)
        out, cg = modern
        if cg is None:
            out.complete(handle, SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        else:
            self.migration.sync(cg, req, now_ms=now_ms, handle=handle, out=out)
        return out

    def heartbeat(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        *,
        now_ms: int,
        topics: TopicsView | None = None,
    ) -> Output:
        """Heartbeat; `Output.response` is the ErrorCode. Extends the member's session."""
        self._topics(topics)
        modern = self._modern(group_id, now_ms)
        if modern is None:
            return self.classic.heartbeat(
                group_id, generation_id, member_id, group_instance_id, now_ms=now_ms
            )
        out, cg = modern
        out.response = (
            ErrorCode.UNKNOWN_MEMBER_ID
            if cg is None
            else self.migration.heartbeat(cg, generation_id, member_id, group_instance_id, now_ms)
        )
        return out

    def leave_group(self, group_id: str, members: Iterable[tuple[str, str | None]], *, now_ms: int) -> Output:
        """LeaveGroup: `members` are (member_id, group_instance_id); `Output.response` is a
        LeaveGroupResult. A static member may be named by group.instance.id alone."""
        modern = self._modern(group_id, now_ms)
        if modern is None:
            return self.classic.leave_group(group_id, members, now_ms=now_ms)
        out, cg = modern
        members = list(members)
        if cg is None:
            e = ErrorCode.UNKNOWN_MEMBER_ID
            out.response = LeaveGroupResult(e, tuple(LeaveMemberResult(m, i, e) for m, i in members))
        else:
            out.response = self.migration.leave(cg, members, out)
        return out

    # ------------------------------------------------------------------ offsets

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        partitions: Iterable[OffsetCommitPartition],
        *,
        retention_time_ms: int = -1,
        api_version: int,
        now_ms: int,
    ) -> Output:
        """OffsetCommit. `Output.response` is a list of PartitionError in request order.

        Consumers using `assign()` (and v0 requests) commit with generation -1 and member id "";
        that is accepted only while the group has no members. A consumer-group member commits
        with its member epoch. `retention_time_ms` (v2-4) sets a per-offset expiry.
        """
        out = Output()
        self.registry.run_timers(now_ms, out)
        parts = list(partitions)
        error = self.coordinator_error(group_id)
        g = self.group(group_id) if error is ErrorCode.NONE else None
        if error is not ErrorCode.NONE:
            pass
        elif isinstance(g, ConsumerGroup):
            error = self.consumer.validate_offset_commit(g, member_id, generation_id, api_version)
        elif isinstance(g, StreamsGroup):
            error = self.streams.validate_offset_commit(g, member_id, generation_id, api_version)
        elif isinstance(g, ShareGroup):
            error = ErrorCode.NONE if generation_id < 0 else ErrorCode.GROUP_ID_NOT_FOUND
        else:
            error = self.classic.validate_commit(
                group_id, generation_id, member_id, group_instance_id, api_version
            )
        if error is not ErrorCode.NONE:
            out.response = [PartitionError(p.topic, p.partition, error) for p in parts]
            return out
        if g is None or isinstance(g, ClassicGroup):
            self.classic.committed(group_id, generation_id, member_id, now_ms)
        out.response = self.offsets.commit(
            group_id, parts, retention_time_ms=retention_time_ms, now_ms=now_ms, out=out
        )
        return out

    def txn_commit_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        partitions: Iterable[OffsetCommitPartition],
        *,
        now_ms: int,
    ) -> Output:
        """TxnOffsetCommit. `Output.response` is a list of PartitionError in request order."""
        out = Output()
        self.registry.run_timers(now_ms, out)
        parts = list(partitions)
        error = ErrorCode.INVALID_GROUP_ID if not group_id else self.coordinator_error(group_id)
        g = self.group(group_id) if error is ErrorCode.NONE else None
        if error is not ErrorCode.NONE:
            pass
        elif isinstance(g, ConsumerGroup):
            m = g.members.get(member_id) if member_id else None
            if member_id and m is None:
                error = ErrorCode.UNKNOWN_MEMBER_ID
            elif m is not None and generation_id >= 0 and generation_id != m.member_epoch:
                error = ErrorCode.ILLEGAL_GENERATION
        elif isinstance(g, StreamsGroup):
            error = self.streams.validate_offset_commit(g, member_id, generation_id, 9)
        elif not isinstance(g, ShareGroup):
            error = self.classic.validate_txn_commit(group_id, generation_id, member_id, group_instance_id)
        if error is not ErrorCode.NONE:
            out.response = [PartitionError(p.topic, p.partition, error) for p in parts]
            return out
        if g is None:
            self.classic.get_or_create(group_id, now_ms)
        out.response = self.offsets.txn_commit(
            group_id, producer_id, producer_epoch, parts, now_ms=now_ms, out=out
        )
        return out

    def complete_txn(self, producer_id: int, partition: int, commit: bool, *, now_ms: int) -> None:
        """A COMMIT / ABORT marker of `producer_id` was written to `partition`: its pending offsets
        become committed offsets (unless a later plain commit of the partition won) or are dropped."""
        self.offsets.complete_txn(producer_id, partition, commit)

    def records_appended(self, records: Sequence[CoordinatorRecord], first_offset: int) -> None:
        """The shell appended `records` (one batch) at consecutive log offsets from `first_offset`."""
        self.offsets.records_appended(records, first_offset)

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> OffsetFetchResult:
        """OffsetFetch for one group; `partitions=None` fetches all. Unknown: offset -1, no error.

        `require_stable` (v7+): a partition with a pending transactional commit answers
        UNSTABLE_OFFSET_COMMIT. A consumer-group member (v9+) is checked by its epoch.
        """
        if (e := self.coordinator_error(group_id)) is not ErrorCode.NONE:
            return OffsetFetchResult(group_id, e)
        g = self.consumer.group(group_id)
        if (
            g is not None
            and (e := self.consumer.validate_offset_fetch(g, member_id, member_epoch)) is not ErrorCode.NONE
        ):
            return OffsetFetchResult(group_id, e)
        return self.offsets.fetch(group_id, partitions, require_stable=require_stable)

    def fetch_offsets_groups(
        self, groups: Iterable[tuple[str, Iterable[TopicPartition] | None]]
    ) -> list[OffsetFetchResult]:
        """The multi-group form of OffsetFetch v8+."""
        return [self.fetch_offsets(gid, parts) for gid, parts in groups]

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition], *, now_ms: int) -> Output:
        """OffsetDelete. `Output.response` is an OffsetDeleteResult."""
        out = Output()
        self.registry.run_timers(now_ms, out)
        parts = list(partitions)
        error = self.coordinator_error(group_id)
        g = self.group(group_id) if error is ErrorCode.NONE else None
        if error is ErrorCode.NONE and g is None:
            error = ErrorCode.GROUP_ID_NOT_FOUND
        elif (
            isinstance(g, ClassicGroup)
            and not g.is_(GroupState.EMPTY)
            and g.protocol_type != CONSUMER_PROTOCOL_TYPE
        ):
            error = ErrorCode.NON_EMPTY_GROUP
        if error is not ErrorCode.NONE or g is None:
            out.response = OffsetDeleteResult(error)
            return out
        subscribed = self._subscribed_topics(g)
        results = []
        for topic, partition in parts:
            if topic in subscribed:
                results.append(PartitionError(topic, partition, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC))
                continue
            self.offsets.delete(group_id, (topic, partition), out)
            results.append(PartitionError(topic, partition, ErrorCode.NONE))
        out.response = OffsetDeleteResult(ErrorCode.NONE, tuple(results))
        return out

    def _subscribed_topics(
        self, g: ClassicGroup | ConsumerGroup | ShareGroup | StreamsGroup
    ) -> frozenset[str]:
        if isinstance(g, StreamsGroup):
            return self.streams.source_topics(g)
        if isinstance(g, ClassicGroup):
            return frozenset() if g.is_(GroupState.EMPTY) else (g.subscribed_topics or frozenset())
        if isinstance(g, ConsumerGroup):
            topics = self.migration.topics
            return frozenset(t for m in g.members.values() for t in self.consumer.member_topics(g, m, topics))
        return frozenset(t for m in g.members.values() for t in m.subscribed_topic_names)

    # ------------------------------------------------------------------ describe / list / delete

    def describe_groups(self, group_ids: Iterable[str]) -> list[DescribedGroup]:
        """DescribeGroups of groups of any type; an unknown group is Dead with no error (v0-5)."""
        names = {tid: name for name, (tid, _) in self.migration.topics.items()}
        out = []
        for gid in group_ids:
            if (e := self.coordinator_error(gid)) is not ErrorCode.NONE:
                out.append(DescribedGroup(e, gid, "", "", ""))
            else:
                out.append(describe.classic_view(self.group(gid), gid, names))
        return out

    def consumer_group_describe(self, group_ids: Iterable[str], names: Mapping) -> list[dict]:
        """ConsumerGroupDescribe entries (without authorized operations)."""
        return [
            describe.failed(gid, e)
            if (e := self.coordinator_error(gid)) is not ErrorCode.NONE
            else describe.as_consumer_group(self.group(gid), gid, self.consumer.assignor_of, names)
            for gid in group_ids
        ]

    def share_group_describe(self, group_ids: Iterable[str], names: Mapping) -> list[dict]:
        """ShareGroupDescribe entries (without authorized operations)."""
        return [
            describe.failed(gid, e)
            if (e := self.coordinator_error(gid)) is not ErrorCode.NONE
            else describe.as_share_group(self.group(gid), gid, names)
            for gid in group_ids
        ]

    def streams_group_describe(self, group_ids: Iterable[str], names: Mapping) -> list[dict]:
        """StreamsGroupDescribe entries (without authorized operations)."""
        return [
            describe.failed_streams(gid, e)
            if (e := self.coordinator_error(gid)) is not ErrorCode.NONE
            else describe.as_streams_group(self.group(gid), gid)
            for gid in group_ids
        ]

    def list_groups(
        self, states_filter: Iterable[str] | None = None, types_filter: Iterable[str] | None = None
    ) -> tuple[ErrorCode, list[ListedGroup]]:
        """ListGroups of every type; filters (v4 states, v5 types) compare case-insensitively,
        empty = all."""
        states = {s.lower() for s in states_filter or ()}
        types = {t.lower() for t in types_filter or ()}
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.registry.any_loading else ErrorCode.NONE
        listed = []
        for g in self.registry.groups.values():
            entry = describe.listed(g)
            if (not states or entry.group_state.lower() in states) and (
                not types or entry.group_type.lower() in types
            ):
                listed.append(entry)
        return error, listed

    def delete_groups(self, group_ids: Iterable[str], *, now_ms: int) -> Output:
        """DeleteGroups of Empty groups of any type and their offsets. `Output.response` is a list
        of (group_id, ErrorCode)."""
        out = Output()
        self.registry.run_timers(now_ms, out)
        results = []
        for gid in group_ids:
            g = self.group(gid)
            if (error := self.coordinator_error(gid)) is not ErrorCode.NONE:
                pass
            elif g is None:
                error = ErrorCode.GROUP_ID_NOT_FOUND
            elif isinstance(g, ClassicGroup):
                if not g.is_(GroupState.EMPTY):
                    error = ErrorCode.NON_EMPTY_GROUP
                else:
                    self.offsets.delete_group(gid, out)
                    self.classic.delete(g, out)
            else:
                if isinstance(g, ConsumerGroup):
                    error = self.consumer.delete(g, out)
                elif isinstance(g, StreamsGroup):
                    error = self.streams.delete(g, out)
                else:
                    error = self.share.delete(g, out)
                if error is ErrorCode.NONE:
                    self.offsets.delete_group(gid, out)
            results.append((gid, error))
        out.response = results
        return out

    # ------------------------------------------------------------------ KIP-848 / KIP-932

    def consumer_group_heartbeat(self, hb: Heartbeat, topics: TopicsView, *, now_ms: int) -> Output:
        """ConsumerGroupHeartbeat; `Output.response` is the response body (a dict)."""
        self._topics(topics)
        out = Output()
        self.registry.run_timers(now_ms, out)
        error, message = self.consumer.validate(hb) if not hb.group_id else (ErrorCode.NONE, None)
        if error is ErrorCode.NONE and (e := self.coordinator_error(hb.group_id)) is not ErrorCode.NONE:
            error = e
        if error is ErrorCode.NONE:
            error, message = self.consumer.validate(hb)
        if error is not ErrorCode.NONE:
            out.response = error_response(error, message)
            return out
        g = self.group(hb.group_id)
        if isinstance(g, (ShareGroup, StreamsGroup)):
            out.response = error_response(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {hb.group_id} is not a consumer group."
            )
            return out
        if isinstance(g, ClassicGroup):
            if not g.members:
                self.classic.delete(g, out)  # an empty classic group gives way, its offsets stay
                g = None
            elif hb.member_epoch == 0 and self.migration.can_upgrade(g):
                g = self.migration.upgrade(g, now_ms, out)
            else:
                g = None
            if g is None and self.group(hb.group_id) is not None:
                out.response = error_response(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"Group {hb.group_id} is not a consumer group."
                )
                return out
        self.consumer.heartbeat(self.consumer.group(hb.group_id), hb, topics, now_ms=now_ms, out=out)
        return out

    def share_group_heartbeat(self, hb: ShareHeartbeat, topics: TopicsView, *, now_ms: int) -> Output:
        """ShareGroupHeartbeat; `Output.response` is the response body (a dict)."""
        out = Output()
        self.registry.run_timers(now_ms, out)
        error, message = self.share.validate(hb) if not hb.group_id else (ErrorCode.NONE, None)
        if error is ErrorCode.NONE and (e := self.coordinator_error(hb.group_id)) is not ErrorCode.NONE:
            error = e
        if error is ErrorCode.NONE:
            g = self.group(hb.group_id)
            if isinstance(g, (ConsumerGroup, StreamsGroup)) or (isinstance(g, ClassicGroup) and g.members):
                error = ErrorCode.GROUP_ID_NOT_FOUND
        if error is ErrorCode.NONE:
            error, message = self.share.validate(hb)
        if error is not ErrorCode.NONE:
            out.response = error_response(error, message)
            out.response["error_message"] = message
            return out
        g = self.group(hb.group_id)
        if isinstance(g, ClassicGroup):
            self.classic.delete(g, out)  # an empty classic group gives way, its offsets stay
        self.share.heartbeat(self.share.group(hb.group_id), hb, topics, now_ms=now_ms, out=out)
        return out

    def streams_group_heartbeat(self, hb: StreamsHeartbeat, topics: TopicsView, *, now_ms: int) -> Output:
        """StreamsGroupHeartbeat; `Output.response` is a `streams.HeartbeatResult`."""
        self._topics(topics)
        out = Output()
        self.registry.run_timers(now_ms, out)
        error, message = validate_streams(hb)
        if error is ErrorCode.NONE and (e := self.coordinator_error(hb.group_id)) is not ErrorCode.NONE:
            error, message = e, None
        g = self.group(hb.group_id) if error is ErrorCode.NONE else None
        if isinstance(g, (ConsumerGroup, ShareGroup)) or (isinstance(g, ClassicGroup) and g.members):
            error, message = ErrorCode.GROUP_ID_NOT_FOUND, f"Group {hb.group_id} is not a streams group."
        if error is not ErrorCode.NONE:
            out.response = HeartbeatResult(streams_error(error, message))
            return out
        if isinstance(g, ClassicGroup):
            if hb.member_epoch != 0:
                out.response = HeartbeatResult(
                    streams_error(
                        ErrorCode.GROUP_ID_NOT_FOUND, f"Group {hb.group_id} is not a streams group."
                    )
                )
                return out
            self.classic.delete(g, out)  # an empty classic group gives way, its offsets stay
        self.streams.heartbeat(self.streams.group(hb.group_id), hb, topics, now_ms=now_ms, out=out)
        return out

    # ------------------------------------------------------------------ loading

    def mark_loading(self, partition: int) -> None:
        """Answer COORDINATOR_LOAD_IN_PROGRESS for `partition` until `load_partition`."""
        self.registry.mark_loading(partition)

    def load_partition(self, partition: int, records: Iterable[LogEntry], *, now_ms: int) -> None:
        """Become coordinator of `partition`, rebuilding its groups and offsets from its records:
        (key, value[, offset]) entries, `TxnOffsetRecord` / `TxnMarkerRecord` for transactional
        batches and markers."""
        self.registry.drop_partition(partition)
        self.offsets.drop_partition(partition)
        replay(records, partition, self.offsets, self.classic, self.consumer, self.share, self.streams)
        for gid in self.offsets.group_ids():
            if self.partition_for(gid) == partition and gid not in self.registry.groups:
                self.classic.get_or_create(gid, now_ms).state_timestamp_ms = None  # a standalone group
        for g in list(self.registry.groups.values()):
            if g.partition != partition:
                continue
            if isinstance(g, ClassicGroup):
                self.classic.loaded(g, now_ms)
            elif isinstance(g, ConsumerGroup):
                self.consumer.loaded(g, now_ms)
            elif isinstance(g, StreamsGroup):
                self.streams.loaded(g, now_ms)
            else:
                self.share.loaded(g, now_ms)
        self.registry.loaded(partition)
        self.retention.arm(now_ms)

    def unload_partition(self, partition: int) -> Output:
        """Stop coordinating `partition` (leadership lost / append failure): parked requests fail."""
        out = Output()
        for g in self.registry.drop_partition(partition):
            if isinstance(g, ClassicGroup):
                for m in g.members.values():
                    self.classic.fail_parked(m, ErrorCode.NOT_COORDINATOR, out)
        self.offsets.drop_partition(partition)
        self.registry.unloaded(partition)
        return out


def _merged(first: Output, then: Output) -> Output:
    """Two outputs of one call as one: records in order, then completions."""
    first.records.extend(then.records)
    first.completions.extend(then.completions)
    if then.response is not None:
        first.response = then.response
    return first
