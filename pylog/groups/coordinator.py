"""The group coordinator: classic membership plus offsets, admin APIs and log replay.

Durability: every change that must survive a restart is returned as `CoordinatorRecord`s
(Kafka's binary `__consumer_offsets` keys and values, see `records`):

* an OffsetCommit value per committed partition, a tombstone per expired / deleted offset;
* a GroupMetadata value when a generation's assignment is set (leader SyncGroup), when a group
  becomes Empty, when a static member takes over a member id, and when a group is created;
* a GroupMetadata tombstone when a group is deleted or expires.

The in-memory state is updated when the call returns; the shell appends the records before it
answers anyone, so an acknowledged commit is durable. If an append fails, the in-memory state of
that partition is ahead of the log: the shell answers the affected requests with
`append_error_to_response` and reloads the partition (`unload_partition`, then `load_partition`
from the log), which is what Kafka does when it loses the partition.

TxnOffsetCommit follows Kafka: the offsets are written as a transactional batch of the producer
(`CoordinatorRecord.producer_id`) and kept *pending* per producer; they become the group's
committed offsets when the transaction's COMMIT marker lands in the group's partition
(`complete_txn`, called by the shell that writes markers) and are dropped on ABORT. OffsetFetch
with `require_stable` answers UNSTABLE_OFFSET_COMMIT for a partition with a pending commit.
Whichever record was appended later wins, as in Kafka: every offset remembers the log offset of
its record (`records_appended` live, the replayed entries' offsets on load), a COMMIT marker
materialises a pending offset only over an older committed one, and an offset tombstone (expiry,
OffsetDelete, group deletion) also drops pending offsets of that partition.

`load_partition` replays a partition's records: offsets come back as committed, groups come
back with their generation, protocol, leader, members and assignments (Stable), or Empty;
transactional offsets follow their markers (still pending when no marker came yet). Loaded
members are not trusted to be alive: their session restarts at load time, so members that keep
heartbeating carry on in the same generation and the others expire.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from pylog.groups.group import CONSUMER_PROTOCOL_TYPE, ClassicGroup, GroupState
from pylog.groups.membership import GroupMembership
from pylog.groups.records import (
    GroupKey,
    GroupMetadataValue,
    OffsetAndMetadata,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_offset_value,
    group_metadata_key,
    offset_commit_key,
)
from pylog.groups.types import (
    CoordinatorRecord,
    DescribedGroup,
    DescribedMember,
    FetchedOffset,
    GroupConfig,
    ListedGroup,
    OffsetCommitPartition,
    OffsetDeleteResult,
    OffsetFetchResult,
    Output,
    PartitionError,
    TopicPartition,
    TxnMarkerRecord,
    TxnOffsetRecord,
)
from pylog.protocol.errors import ErrorCode

__all__ = ["GroupCoordinator", "LogEntry", "append_error_to_response"]

LogEntry = tuple[bytes, bytes | None] | tuple[bytes, bytes | None, int] | TxnOffsetRecord | TxnMarkerRecord
"""A replayed record: (key, value) or (key, value, log offset), a transactional one, or a marker."""


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


class GroupCoordinator(GroupMembership):
    """Sans-IO classic group coordinator for the `__consumer_offsets` partitions it owns.

    `rng` draws member ids (seed it from the OS in the broker: ids must not repeat across
    restarts, since loaded groups keep theirs). `owned_partitions=None` owns every partition
    (single node); otherwise requests for other partitions get NOT_COORDINATOR.
    """

    def __init__(
        self,
        config: GroupConfig | None = None,
        *,
        rng: random.Random,
        owned_partitions: Iterable[int] | None = None,
    ) -> None:
        super().__init__(config, rng=rng, owned_partitions=owned_partitions)
        self._next_retention_check_ms: int | None = None
        # Whether a group of another type (KIP-848 / KIP-932) with members uses the offsets kept
        # here under its id: they do not expire then, as a classic group's with members do not.
        self.offsets_in_use: Callable[[str], bool] = lambda _group_id: False
        # producer id -> group id -> offsets committed in that producer's open transaction
        self._pending_txn: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}

    # ------------------------------------------------------------------ timers

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for d in (super().next_deadline_ms(), self._next_retention_check_ms) if d is not None]
        return min(deadlines, default=None)

    def _run_timers(self, now_ms: int, out: Output) -> None:
        super()._run_timers(now_ms, out)
        if self._next_retention_check_ms is None:
            self._next_retention_check_ms = now_ms + self.config.offsets_retention_check_interval_ms
        elif now_ms >= self._next_retention_check_ms:
            self._expire_offsets(now_ms, out)
            self._next_retention_check_ms = now_ms + self.config.offsets_retention_check_interval_ms

    def expire_offsets(self, now_ms: int) -> Output:
        """Run the offsets-retention cleanup now (normally done by `tick` every check interval)."""
        out = Output()
        super()._run_timers(now_ms, out)
        self._expire_offsets(now_ms, out)
        return out

    def _expire_offsets(self, now_ms: int, out: Output) -> None:
        retention = self.config.offsets_retention_ms
        for group in list(self._groups.values()):
            for tp in self._expired_offsets(group, now_ms, retention):
                del group.offsets[tp]
                self._offset_tombstone(group, tp, out)
            if (
                group.is_(GroupState.EMPTY)
                and not group.offsets
                and not group.members
                and not group.pending_members
                and not any(group.group_id in by_group for by_group in self._pending_txn.values())
            ):
                self._delete_group(group, out)

    def _expired_offsets(self, group: ClassicGroup, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        if self.offsets_in_use(group.group_id):
            return []
        # Kafka 2.1+ semantics: offsets of a group with members never expire (except for topics a
        # Stable consumer group no longer subscribes to); an Empty group's offsets expire one
        # retention period after it became Empty; a standalone group's after their commit.
        if group.protocol_type is not None and group.is_(GroupState.EMPTY):
            since = group.state_timestamp_ms
            subscribed: frozenset[str] = frozenset()
        elif (
            group.protocol_type == CONSUMER_PROTOCOL_TYPE
            and group.subscribed_topics is not None
            and group.is_(GroupState.STABLE)
        ):
            since, subscribed = None, group.subscribed_topics
        elif group.protocol_type is None:
            since, subscribed = None, frozenset()
        else:
            return []
        expired = []
        for tp, o in group.offsets.items():
            if tp[0] in subscribed or self.has_pending_txn_offsets(group.group_id, tp):
                continue
            if o.expire_timestamp is not None:
                if now_ms >= o.expire_timestamp:
                    expired.append(tp)
            elif now_ms - (since if since is not None else o.commit_timestamp) >= retention_ms:
                expired.append(tp)
        return expired

    def _offset_tombstone(self, group: ClassicGroup, tp: TopicPartition, out: Output) -> None:
        out.records.append(CoordinatorRecord(group.partition, offset_commit_key(group.group_id, *tp), None))
        _drop_pending(self._pending_txn, group.group_id, tp)

    def _delete_group(self, group: ClassicGroup, out: Output) -> None:
        for tp in group.offsets:
            self._offset_tombstone(group, tp, out)
        group.offsets.clear()
        group.transition(GroupState.DEAD, group.state_timestamp_ms or 0)
        out.records.append(CoordinatorRecord(group.partition, group_metadata_key(group.group_id), None))
        del self._groups[group.group_id]

    # ------------------------------------------------------------------ OffsetCommit

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
        that is accepted only while the group has no members. `retention_time_ms` (v2-4) sets a
        per-offset expiry instead of the group-level retention.
        """
        out = Output()
        self._run_timers(now_ms, out)
        parts = list(partitions)
        error = self._validate_commit(group_id, generation_id, member_id, group_instance_id, api_version)
        if error is not ErrorCode.NONE:
            out.response = [PartitionError(p.topic, p.partition, error) for p in parts]
            return out
        group = self._get_or_create(group_id, now_ms)
        m = group.members.get(member_id)
        if m is not None and generation_id >= 0:
            self._schedule_heartbeat(group, m, now_ms)
        results = []
        for p in parts:
            metadata = p.metadata or ""
            if len(metadata) > self.config.offset_metadata_max_bytes:
                results.append(PartitionError(p.topic, p.partition, ErrorCode.OFFSET_METADATA_TOO_LARGE))
                continue
            commit_ts = p.commit_timestamp if p.commit_timestamp >= 0 else now_ms
            expire_ts = now_ms + retention_time_ms if retention_time_ms >= 0 else None
            value = OffsetAndMetadata(p.offset, p.leader_epoch, metadata, commit_ts, expire_ts)
            group.offsets[(p.topic, p.partition)] = value
            out.records.append(
                CoordinatorRecord(
                    group.partition,
                    offset_commit_key(group_id, p.topic, p.partition),
                    encode_offset_value(value),
                )
            )
            results.append(PartitionError(p.topic, p.partition, ErrorCode.NONE))
        out.response = results
        return out

    def _validate_commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        api_version: int,
    ) -> ErrorCode:
        if (e := self._coordinator_error(group_id)) is not ErrorCode.NONE:
            return e
        group = self._groups.get(group_id)
        if group is None:
            if generation_id < 0:
                return ErrorCode.NONE  # created by the commit: a standalone / admin group
            return ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 9 else ErrorCode.ILLEGAL_GENERATION
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return ErrorCode.NONE
        if generation_id >= 0 or member_id or group_instance_id is not None:
            if (e := group.validate_member(member_id, group_instance_id)) is not ErrorCode.NONE:
                return e
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.COMPLETING_REBALANCE):
            # The member knows the new generation but has no assignment yet.
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # ------------------------------------------------------------------ TxnOffsetCommit

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
        """TxnOffsetCommit. `Output.response` is a list of PartitionError in request order.

        v0-2 carry no member: the commit is accepted whatever the group does (Kafka's rule);
        v3+ members are checked like OffsetCommit's, without the rebalance check.
        """
        out = Output()
        self._run_timers(now_ms, out)
        parts = list(partitions)
        error = self._validate_txn_commit(group_id, generation_id, member_id, group_instance_id)
        if error is not ErrorCode.NONE:
            out.response = [PartitionError(p.topic, p.partition, error) for p in parts]
            return out
        group = self._get_or_create(group_id, now_ms)
        pending = self._pending_txn.setdefault(producer_id, {}).setdefault(group_id, {})
        results = []
        for p in parts:
            metadata = p.metadata or ""
            if len(metadata) > self.config.offset_metadata_max_bytes:
                results.append(PartitionError(p.topic, p.partition, ErrorCode.OFFSET_METADATA_TOO_LARGE))
                continue
            value = OffsetAndMetadata(p.offset, p.leader_epoch, metadata, now_ms)
            pending[(p.topic, p.partition)] = value
            out.records.append(
                CoordinatorRecord(
                    group.partition,
                    offset_commit_key(group_id, p.topic, p.partition),
                    encode_offset_value(value),
                    producer_id,
                    producer_epoch,
                )
            )
            results.append(PartitionError(p.topic, p.partition, ErrorCode.NONE))
        out.response = results
        return out

    def _validate_txn_commit(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if (e := self._coordinator_error(group_id)) is not ErrorCode.NONE:
            return e
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.NONE
        if group_instance_id is not None and group.static_members.get(group_instance_id) != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id and member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id >= 0 and generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def complete_txn(self, producer_id: int, partition: int, commit: bool, *, now_ms: int) -> None:
        """A COMMIT / ABORT marker of `producer_id` was written to `partition`: its pending offsets
        for the groups of that partition become committed offsets unless a plain commit of the
        same partition was appended after them, or are dropped."""
        by_group = self._pending_txn.get(producer_id)
        if not by_group:
            return
        for gid in [g for g in by_group if self.partition_for(g) == partition]:
            offsets = by_group.pop(gid)
            if commit:
                _materialise(self._get_or_create(gid, now_ms).offsets, offsets)
        if not by_group:
            del self._pending_txn[producer_id]

    def records_appended(self, records: Sequence[CoordinatorRecord], first_offset: int) -> None:
        """The shell appended `records` (one batch of an Output's records) at consecutive log
        offsets from `first_offset`: the offsets they carry remember where they landed."""
        for at, r in enumerate(records, first_offset):
            if r.value is None:
                continue
            k = decode_key(r.key)
            if not isinstance(k, OffsetKey):
                continue
            if r.producer_id >= 0:
                offsets = self._pending_txn.get(r.producer_id, {}).get(k.group_id)
            else:
                group = self._groups.get(k.group_id)
                offsets = group.offsets if group is not None else None
            tp = (k.topic, k.partition)
            if offsets is not None and tp in offsets:
                offsets[tp] = replace(offsets[tp], record_offset=at)

    def has_pending_txn_offsets(self, group_id: str, tp: TopicPartition) -> bool:
        return any(tp in by_group.get(group_id, ()) for by_group in self._pending_txn.values())

    # ------------------------------------------------------------------ OffsetFetch / OffsetDelete

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
    ) -> OffsetFetchResult:
        """OffsetFetch for one group; `partitions=None` fetches all. Unknown: offset -1, no error.

        `require_stable` (v7+): a partition with a pending transactional commit answers
        UNSTABLE_OFFSET_COMMIT (the client retries until the transaction ends).
        """
        if (e := self._coordinator_error(group_id)) is not ErrorCode.NONE:
            return OffsetFetchResult(group_id, e)
        group = self._groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        wanted = list(offsets) if partitions is None else list(partitions)
        result = []
        for tp in wanted:
            o = offsets.get(tp)
            if require_stable and self._pending_txn and self.has_pending_txn_offsets(group_id, tp):
                result.append(FetchedOffset(tp[0], tp[1], -1, error=ErrorCode.UNSTABLE_OFFSET_COMMIT))
            elif o is None:
                result.append(FetchedOffset(tp[0], tp[1], -1))
            else:
                result.append(FetchedOffset(tp[0], tp[1], o.offset, o.leader_epoch, o.metadata))
        return OffsetFetchResult(group_id, ErrorCode.NONE, tuple(result))

    def fetch_offsets_groups(
        self, groups: Iterable[tuple[str, Iterable[TopicPartition] | None]]
    ) -> list[OffsetFetchResult]:
        """The multi-group form of OffsetFetch v8+."""
        return [self.fetch_offsets(gid, parts) for gid, parts in groups]

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition], *, now_ms: int) -> Output:
        """OffsetDelete. `Output.response` is an OffsetDeleteResult."""
        out = Output()
        self._run_timers(now_ms, out)
        parts = list(partitions)
        group = self._groups.get(group_id)
        error = self._coordinator_error(group_id)
        if error is ErrorCode.NONE and group is None:
            error = ErrorCode.GROUP_ID_NOT_FOUND
        elif (
            error is ErrorCode.NONE
            and group is not None
            and not group.is_(GroupState.EMPTY)
            and group.protocol_type != CONSUMER_PROTOCOL_TYPE
        ):
            error = ErrorCode.NON_EMPTY_GROUP
        if error is not ErrorCode.NONE or group is None:
            out.response = OffsetDeleteResult(error)
            return out
        results = []
        for topic, partition in parts:
            if not group.is_(GroupState.EMPTY) and group.is_subscribed_to(topic):
                results.append(PartitionError(topic, partition, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC))
                continue
            if group.offsets.pop((topic, partition), None) is not None:
                self._offset_tombstone(group, (topic, partition), out)
            results.append(PartitionError(topic, partition, ErrorCode.NONE))
        out.response = OffsetDeleteResult(ErrorCode.NONE, tuple(results))
        return out

    # ------------------------------------------------------------------ Describe / List / DeleteGroups

    def describe_groups(self, group_ids: Iterable[str]) -> list[DescribedGroup]:
        """DescribeGroups; an unknown group is reported as Dead with no error (v0-5)."""
        result = []
        for gid in group_ids:
            if (e := self._coordinator_error(gid)) is not ErrorCode.NONE:
                result.append(DescribedGroup(e, gid, "", "", ""))
                continue
            group = self._groups.get(gid)
            if group is None:
                result.append(DescribedGroup(ErrorCode.NONE, gid, GroupState.DEAD.value, "", ""))
                continue
            stable = group.is_(GroupState.STABLE)
            members = tuple(
                DescribedMember(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata_for(group.protocol_name) if stable else b"",
                    m.assignment if stable else b"",
                )
                for m in group.members.values()
            )
            result.append(
                DescribedGroup(
                    ErrorCode.NONE,
                    gid,
                    group.state.value,
                    group.protocol_type or "",
                    (group.protocol_name or "") if stable else "",
                    members,
                )
            )
        return result

    def list_groups(
        self, states_filter: Iterable[str] | None = None, types_filter: Iterable[str] | None = None
    ) -> tuple[ErrorCode, list[ListedGroup]]:
        """ListGroups; filters (v4 states, v5 types) compare case-insensitively, empty = all."""
        states = {s.lower() for s in states_filter or ()}
        types = {t.lower() for t in types_filter or ()}
        if types and "classic" not in types:
            return ErrorCode.NONE, []
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self._loading else ErrorCode.NONE
        listed = [
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in self._groups.values()
            if not states or g.state.value.lower() in states
        ]
        return error, listed

    def delete_groups(self, group_ids: Iterable[str], *, now_ms: int) -> Output:
        """DeleteGroups. `Output.response` is a list of (group_id, ErrorCode)."""
        out = Output()
        self._run_timers(now_ms, out)
        results = []
        for gid in group_ids:
            group = self._groups.get(gid)
            if (error := self._coordinator_error(gid)) is not ErrorCode.NONE:
                pass
            elif group is None:
                error = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_(GroupState.EMPTY):
                error = ErrorCode.NON_EMPTY_GROUP
            else:
                self._delete_group(group, out)
            results.append((gid, error))
        out.response = results
        return out

    # ------------------------------------------------------------------ loading

    def mark_loading(self, partition: int) -> None:
        """Answer COORDINATOR_LOAD_IN_PROGRESS for `partition` until `load_partition`."""
        self._loading.add(partition)

    def load_partition(self, partition: int, records: Iterable[LogEntry], *, now_ms: int) -> None:
        """Become coordinator of `partition`, rebuilding its groups from its records: (key, value)
        pairs, with `TxnOffsetRecord` / `TxnMarkerRecord` for transactional batches and markers."""
        for gid in [g for g, grp in self._groups.items() if grp.partition == partition]:
            del self._groups[gid]
        self._drop_pending_txn(partition)
        self._replay(records, now_ms)
        self._loading.discard(partition)
        if self._owned is not None:
            self._owned.add(partition)

    def load(self, records: Iterable[LogEntry], *, now_ms: int) -> None:
        """Replay records of any partitions (single node start-up: the whole topic)."""
        self._replay(records, now_ms)

    def unload_partition(self, partition: int) -> Output:
        """Stop coordinating `partition` (leadership lost / append failure): parked requests fail."""
        out = Output()
        for group in [g for g in self._groups.values() if g.partition == partition]:
            for m in group.members.values():
                self._fail_parked(m, ErrorCode.NOT_COORDINATOR, out)
            del self._groups[group.group_id]
        self._drop_pending_txn(partition)
        if self._owned is None:
            self._owned = set(range(self.config.offsets_topic_num_partitions))
        self._owned.discard(partition)
        return out

    def _drop_pending_txn(self, partition: int) -> None:
        for pid in list(self._pending_txn):
            by_group = self._pending_txn[pid]
            for gid in [g for g in by_group if self.partition_for(g) == partition]:
                del by_group[gid]
            if not by_group:
                del self._pending_txn[pid]

    def _replay(self, records: Iterable[LogEntry], now_ms: int) -> None:
        if self._next_retention_check_ms is None:
            self._next_retention_check_ms = now_ms + self.config.offsets_retention_check_interval_ms
        metas: dict[str, GroupMetadataValue] = {}
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        pending: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}
        at = -1  # log offset of the entry (counted when the entries do not carry it)
        for entry in records:
            if isinstance(entry, TxnMarkerRecord):
                for gid, committed in pending.pop(entry.producer_id, {}).items():
                    if entry.commit:
                        _materialise(offsets.setdefault(gid, {}), committed)
                continue
            if isinstance(entry, TxnOffsetRecord):
                at = entry.offset if entry.offset >= 0 else at + 1
                k = decode_key(bytes(entry.key))
                if isinstance(k, OffsetKey) and entry.value is not None:
                    by_group = pending.setdefault(entry.producer_id, {}).setdefault(k.group_id, {})
                    value = replace(decode_offset_value(bytes(entry.value)), record_offset=at)
                    by_group[(k.topic, k.partition)] = value
                continue
            key, value = entry[0], entry[1]
            at = entry[2] if len(entry) > 2 and entry[2] >= 0 else at + 1  # type: ignore[misc]
            k = decode_key(bytes(key))
            if isinstance(k, OffsetKey):
                tp = (k.topic, k.partition)
                if value is None:
                    offsets.get(k.group_id, {}).pop(tp, None)
                    _drop_pending(pending, k.group_id, tp)
                else:
                    stored = replace(decode_offset_value(bytes(value)), record_offset=at)
                    offsets.setdefault(k.group_id, {})[tp] = stored
            elif isinstance(k, GroupKey):
                if value is None:
                    metas.pop(k.group_id, None)
                else:
                    metas[k.group_id] = decode_group_value(bytes(value))
        for pid, by_group in pending.items():
            for gid, txn_offsets in by_group.items():
                self._pending_txn.setdefault(pid, {}).setdefault(gid, {}).update(txn_offsets)
        with_pending = (g for by_group in pending.values() for g in by_group)
        for gid in dict.fromkeys([*metas, *(g for g, o in offsets.items() if o), *with_pending]):
            p = self.partition_for(gid)
            group = ClassicGroup.from_metadata(gid, p, metas[gid]) if gid in metas else ClassicGroup(gid, p)
            group.offsets = offsets.get(gid, {})
            for m in group.members.values():
                self._schedule_heartbeat(group, m, now_ms)
            self._groups[gid] = group


def _materialise(
    committed: dict[TopicPartition, OffsetAndMetadata], txn_offsets: dict[TopicPartition, OffsetAndMetadata]
) -> None:
    """A COMMIT marker: each transactional offset replaces the committed one unless that was
    appended later (Kafka compares record offsets; unknown ones let the transactional offset win)."""
    for tp, o in txn_offsets.items():
        current = committed.get(tp)
        if current is None or min(o.record_offset, current.record_offset) < 0 or (
            o.record_offset > current.record_offset
        ):
            committed[tp] = o


def _drop_pending(
    pending: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]], group_id: str, tp: TopicPartition
) -> None:
    """An offset tombstone of `group_id` / `tp` also removes that partition's pending offsets."""
    for by_group in pending.values():
        offsets = by_group.get(group_id)
        if offsets is not None:
            offsets.pop(tp, None)
