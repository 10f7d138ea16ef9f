"""Sans-IO coordinator of consumer groups (KIP-848): ConsumerGroupHeartbeat, describe, offsets
validation, session and revocation timeouts, and the group's records in `__consumer_offsets`.

Theory of operation: see `consumer_group` (epochs, target, derived state) and `reconciliation`
(how a member walks to its target). One heartbeat does, in order: validate the member and its
epoch; apply what the member changed (subscription, assignor) and bump the group epoch if that
changes the assignment; recompute the target when the group epoch is ahead of it; reconcile the
member; answer with its epoch and, when it changed or the member reported something else, its
assignment. Every change is returned as records (Kafka's types 3, 5-8, see `group_records`); the
shell appends them before answering, so a restart replays the same groups. Replayed members get
a fresh session: the ones still alive keep heartbeating with their epoch, the others expire.

The clock is passed in (`now_ms`) and topic metadata too (`TopicsView`: name -> (id,
partitions)), so this module reads no clock and no broker state. Offsets are not kept here: the
offsets store is shared with classic groups, and this coordinator only validates member epochs of
OffsetCommit / OffsetFetch for the groups it owns.
"""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pylog.groups.assignors import ASSIGNORS, MemberSubscription
from pylog.groups.consumer_group import LEAVE_EPOCH, STATIC_LEAVE_EPOCH, ConsumerGroup, ConsumerMember
from pylog.groups.group_records import (
    CONSUMER_GROUP_CURRENT_MEMBER,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_TARGET_MEMBER,
    CONSUMER_GROUP_TARGET_METADATA,
    Assignment,
    RecordKey,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    from_wire,
    normalise,
    to_wire,
)
from pylog.groups.reconciliation import MemberAssignment, MemberState, reconcile
from pylog.groups.records import partition_for
from pylog.groups.types import CoordinatorRecord, ListedGroup, Output
from pylog.protocol.errors import ErrorCode

TopicsView = Mapping[str, tuple[uuid.UUID, int]]
"""Every topic of the cluster: name -> (topic id, partition count)."""
SESSION_TIMEOUT = "consumer.session.timeout.ms"  # the GROUP configs a group may override
HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"


@dataclass(frozen=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5000  # group.consumer.heartbeat.interval.ms
    assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors
    max_size: int = 2**31 - 1  # group.consumer.max.size
    offsets_topic_num_partitions: int = 50

    @classmethod
    def from_kafka(cls, props: Mapping[str, str], num_partitions: int) -> ConsumerGroupConfig:
        assignors = tuple(
            a.strip() for a in props.get("group.consumer.assignors", "uniform,range").split(",") if a.strip()
        )
        unknown = [a for a in assignors if a not in ASSIGNORS]
        if unknown or not assignors:
            raise ValueError(
                f"group.consumer.assignors: unknown assignor(s) {unknown}; known: {sorted(ASSIGNORS)}"
            )
        return cls(
            int(props.get("group.consumer.session.timeout.ms", 45000)),
            int(props.get("group.consumer.heartbeat.interval.ms", 5000)),
            assignors,
            int(props.get("group.consumer.max.size", 2**31 - 1)),
            num_partitions,
        )


@dataclass(frozen=True)
class Heartbeat:
    """A ConsumerGroupHeartbeat request, as the coordinator reads it."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""


class ConsumerGroupCoordinator:
    """Consumer groups of the `__consumer_offsets` partitions this broker coordinates."""

    def __init__(
        self,
        config: ConsumerGroupConfig,
        *,
        rng: random.Random,
        group_configs: Callable[[str], Mapping[str, str]] = lambda group_id: {},
    ) -> None:
        self.config = config
        self._group_configs = group_configs  # a group's GROUP config overrides (the metadata image)
        self._rng = rng
        self._groups: dict[str, ConsumerGroup] = {}
        self._loading: set[int] = set()

    def _timeout_ms(self, group_id: str, name: str) -> int:
        """``consumer.session.timeout.ms`` / ``consumer.heartbeat.interval.ms`` of a group: its
        GROUP config override, else the broker-wide setting."""
        value = self._group_configs(group_id).get(name)
        if value is not None:
            return int(value)
        c = self.config
        return c.session_timeout_ms if name == SESSION_TIMEOUT else c.heartbeat_interval_ms

    # ------------------------------------------------------------------ queries

    def has_group(self, group_id: str) -> bool:
        return group_id in self._groups

    def group(self, group_id: str) -> ConsumerGroup | None:
        return self._groups.get(group_id)

    def groups(self) -> list[ConsumerGroup]:
        return list(self._groups.values())

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def list_groups(self) -> list[ListedGroup]:
        return [ListedGroup(g.group_id, "consumer", g.state, "consumer") for g in self._groups.values()]

    # ------------------------------------------------------------------ heartbeat

    def heartbeat(self, hb: Heartbeat, topics: TopicsView, *, now_ms: int) -> Output:
        """ConsumerGroupHeartbeat; `Output.response` is the response body (a dict)."""
        out = Output()
        self._expire(now_ms, out)
        error, message = self._validate(hb)
        if error is not ErrorCode.NONE:
            out.response = self._error(error, message)
            return out
        if self.partition_for(hb.group_id) in self._loading:
            out.response = self._error(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            return out
        group = self._groups.get(hb.group_id)
        if hb.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(group, hb, now_ms, out)
        if group is None:
            group = ConsumerGroup(hb.group_id, self.partition_for(hb.group_id))
            self._groups[hb.group_id] = group
        member, error = self._member_for(group, hb, now_ms, out)
        if member is None:
            out.response = self._error(error)
            if not group.members and group.group_epoch == 0:
                del self._groups[hb.group_id]
            return out
        before = member.assignment
        bump = self._update_member(group, member, hb, out)
        bump |= self._refresh_subscribed_partitions(group, topics)
        if bump:
            self._bump_epoch(group, out)
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group, topics, out)
        self._reconcile(group, member, hb.owned, now_ms, out)
        member.session_deadline_ms = now_ms + self._timeout_ms(group.group_id, SESSION_TIMEOUT)
        response = {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "member_id": member.member_id,
            "member_epoch": member.member_epoch,
            "heartbeat_interval_ms": self._timeout_ms(group.group_id, HEARTBEAT_INTERVAL),
            "assignment": None,
        }
        if (
            hb.member_epoch == 0
            or member.assignment != before
            or (hb.owned is not None and hb.owned != member.assignment.assigned)
        ):
            response["assignment"] = {"topic_partitions": to_wire(member.assignment.assigned)}
        out.response = response
        return out

    def _validate(self, hb: Heartbeat) -> tuple[ErrorCode, str | None]:
        if not hb.group_id:
            return ErrorCode.INVALID_REQUEST, "GroupId can't be empty."
        if hb.member_epoch == 0:
            if hb.rebalance_timeout_ms == -1:
                return ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."
            if hb.subscribed_topic_names is None and hb.subscribed_topic_regex is None:
                return (
                    ErrorCode.INVALID_REQUEST,
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                )
        elif hb.member_epoch > 0 or hb.member_epoch == LEAVE_EPOCH:
            if not hb.member_id:
                return ErrorCode.INVALID_REQUEST, "MemberId can't be empty."
        elif hb.member_epoch == STATIC_LEAVE_EPOCH:
            if hb.instance_id is None:
                return ErrorCode.INVALID_REQUEST, "InstanceId can't be null when leaving with -2."
        else:
            return ErrorCode.INVALID_REQUEST, f"MemberEpoch {hb.member_epoch} is invalid."
        if hb.server_assignor is not None and hb.server_assignor not in self.config.assignors:
            return ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {hb.server_assignor} is not supported."
        if hb.subscribed_topic_regex is not None:
            try:
                re.compile(hb.subscribed_topic_regex)
            except re.error as exc:
                return ErrorCode.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex is invalid: {exc}"
        return ErrorCode.NONE, None

    def _member_for(
        self, group: ConsumerGroup, hb: Heartbeat, now_ms: int, out: Output
    ) -> tuple[ConsumerMember | None, ErrorCode]:
        if hb.member_epoch > 0:
            member = group.members.get(hb.member_id)
            if member is None:
                return None, ErrorCode.UNKNOWN_MEMBER_ID
            a = member.assignment
            if hb.member_epoch == a.member_epoch:
                return member, ErrorCode.NONE
            if hb.member_epoch == a.previous_member_epoch and (
                hb.owned is None or _subset(hb.owned, a.assigned)
            ):
                return member, ErrorCode.NONE  # the answer that bumped its epoch was lost
            return None, ErrorCode.FENCED_MEMBER_EPOCH
        # member_epoch == 0: join (or rejoin after being fenced)
        member_id = hb.member_id or _new_member_id(self._rng)
        if hb.instance_id is not None:
            previous_id = group.static_members.get(hb.instance_id)
            if previous_id is not None and previous_id != member_id:
                previous = group.members.get(previous_id)
                if previous is not None and previous.member_epoch != STATIC_LEAVE_EPOCH:
                    return None, ErrorCode.UNRELEASED_INSTANCE_ID
                if previous is not None:
                    return self._replace_static(group, previous, member_id, hb, out), ErrorCode.NONE
        existing = group.members.get(member_id)
        if existing is not None:
            # A member re-joining with epoch 0 starts over: it lost its partitions.
            self._remove_member(group, existing, out)
            self._bump_epoch(group, out)
        if len(group.members) >= self.config.max_size:
            return None, ErrorCode.GROUP_MAX_SIZE_REACHED
        member = ConsumerMember(member_id, hb.instance_id)
        group.members[member_id] = member
        if hb.instance_id is not None:
            group.static_members[hb.instance_id] = member_id
        out.records.append(
            self._record(group, CONSUMER_GROUP_MEMBER_METADATA, member_id, member.metadata_value())
        )
        return member, ErrorCode.NONE

    def _replace_static(
        self, group: ConsumerGroup, previous: ConsumerMember, member_id: str, hb: Heartbeat, out: Output
    ) -> ConsumerMember:
        """A static member rejoins under a new member id: it takes over the old one's assignment
        and epoch, so the group does not rebalance."""
        self._remove_member(group, previous, out)
        member = replace(previous, member_id=member_id)
        a = previous.assignment
        member.assignment = replace(a, member_epoch=a.previous_member_epoch, previous_member_epoch=-1)
        group.members[member_id] = member
        group.static_members[hb.instance_id or ""] = member_id
        target = group.target.pop(previous.member_id, {})
        group.target[member_id] = target
        out.records.append(
            self._record(group, CONSUMER_GROUP_MEMBER_METADATA, member_id, member.metadata_value())
        )
        out.records.append(
            self._record(
                group, CONSUMER_GROUP_TARGET_MEMBER, member_id, {"topic_partitions": to_wire(target)}
            )
        )
        self._write_current(group, member, out)
        return member

    def _update_member(
        self, group: ConsumerGroup, member: ConsumerMember, hb: Heartbeat, out: Output
    ) -> bool:
        """Apply the member's changes; True if they change the assignment (a new group epoch)."""
        before = (member.subscribed_topic_names, member.subscribed_topic_regex, member.server_assignor)
        new = (
            member.member_epoch == 0
            and not member.assignment.assigned
            and member.member_id not in group.target
        )
        if hb.subscribed_topic_names is not None:
            member.subscribed_topic_names = tuple(sorted(set(hb.subscribed_topic_names)))
        if hb.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = hb.subscribed_topic_regex or None
        if hb.server_assignor is not None:
            member.server_assignor = hb.server_assignor
        if hb.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = hb.rebalance_timeout_ms
        if hb.rack_id is not None:
            member.rack_id = hb.rack_id
        changed_client = (member.client_id, member.client_host) != (hb.client_id, hb.client_host)
        member.client_id, member.client_host = hb.client_id, hb.client_host
        after = (member.subscribed_topic_names, member.subscribed_topic_regex, member.server_assignor)
        if after != before or changed_client:
            out.records.append(
                self._record(group, CONSUMER_GROUP_MEMBER_METADATA, member.member_id, member.metadata_value())
            )
        return new or after != before

    def _refresh_subscribed_partitions(self, group: ConsumerGroup, topics: TopicsView) -> bool:
        now = {tid: n for name, (tid, n) in topics.items() if name in self._subscribed_names(group, topics)}
        if group.subscribed_partitions is None:  # replayed: adopt without a new epoch
            group.subscribed_partitions = now
            return False
        if now != group.subscribed_partitions:
            group.subscribed_partitions = now
            return True
        return False

    def _subscribed_names(self, group: ConsumerGroup, topics: TopicsView) -> set[str]:
        names: set[str] = set()
        for m in group.members.values():
            names.update(self._member_topics(m, topics))
        return names

    @staticmethod
    def _member_topics(m: ConsumerMember, topics: TopicsView) -> set[str]:
        names = {t for t in m.subscribed_topic_names if t in topics}
        if m.subscribed_topic_regex:
            pattern = re.compile(m.subscribed_topic_regex)
            names.update(t for t in topics if not t.startswith("__") and pattern.fullmatch(t))
        return names

    def _bump_epoch(self, group: ConsumerGroup, out: Output) -> None:
        group.group_epoch += 1
        out.records.append(self._record(group, CONSUMER_GROUP_METADATA, None, {"epoch": group.group_epoch}))

    def _compute_target(self, group: ConsumerGroup, topics: TopicsView, out: Output) -> None:
        assignor = ASSIGNORS[self._assignor_of(group)]
        subs = {
            mid: MemberSubscription(
                frozenset(topics[n][0] for n in self._member_topics(m, topics)), group.target.get(mid, {})
            )
            for mid, m in group.members.items()
        }
        target = assignor(subs, group.subscribed_partitions)
        for mid, a in target.items():
            if group.target.get(mid) != a:
                out.records.append(
                    self._record(group, CONSUMER_GROUP_TARGET_MEMBER, mid, {"topic_partitions": to_wire(a)})
                )
        group.target = dict(target)
        group.assignment_epoch = group.group_epoch
        out.records.append(
            self._record(
                group, CONSUMER_GROUP_TARGET_METADATA, None, {"assignment_epoch": group.assignment_epoch}
            )
        )

    def _assignor_of(self, group: ConsumerGroup) -> str:
        """The assignor most members ask for, else the first configured one (Kafka's rule)."""
        votes: dict[str, int] = {}
        for m in group.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return self.config.assignors[0]
        return max(sorted(votes), key=lambda a: votes[a])

    def _reconcile(
        self, group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None, now_ms: int, out: Output
    ) -> None:
        holders = group.holders(member.member_id)
        nxt = reconcile(
            member.member_id,
            member.assignment,
            group.assignment_epoch,
            group.target.get(member.member_id, {}),
            owned,
            lambda t, p: holders.get((t, p)),
        )
        if nxt == member.assignment:
            return
        member.assignment = nxt
        if nxt.state is MemberState.UNREVOKED_PARTITIONS:
            if member.revocation_deadline_ms is None:
                member.revocation_deadline_ms = now_ms + member.rebalance_timeout_ms
        else:
            member.revocation_deadline_ms = None
        self._write_current(group, member, out)

    # ------------------------------------------------------------------ leaving, fencing, timers

    def _leave(self, group: ConsumerGroup | None, hb: Heartbeat, now_ms: int, out: Output) -> Output:
        member = None
        if group is not None:
            member = group.members.get(hb.member_id)
            if member is None and hb.instance_id is not None:
                member = group.members.get(group.static_members.get(hb.instance_id, ""))
        if group is None or member is None:
            out.response = self._error(ErrorCode.UNKNOWN_MEMBER_ID)
            return out
        if hb.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # The static member keeps its partitions until its session expires or it returns.
            a = member.assignment
            member.assignment = replace(
                a, member_epoch=STATIC_LEAVE_EPOCH, previous_member_epoch=a.member_epoch
            )
            member.session_deadline_ms = now_ms + self._timeout_ms(group.group_id, SESSION_TIMEOUT)
            self._write_current(group, member, out)
        else:
            self._fence(group, member, out)
        out.response = {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "member_id": member.member_id,
            "member_epoch": hb.member_epoch,
            "heartbeat_interval_ms": 0,
            "assignment": None,
        }
        return out

    def _fence(self, group: ConsumerGroup, member: ConsumerMember, out: Output) -> None:
        """Remove `member`; its partitions become free and the others get a new target."""
        self._remove_member(group, member, out)
        self._bump_epoch(group, out)
        # The new target is computed at the next heartbeat (it needs topic metadata); until then
        # the removed member's partitions have no owner.

    def _remove_member(self, group: ConsumerGroup, member: ConsumerMember, out: Output) -> None:
        group.members.pop(member.member_id, None)
        group.target.pop(member.member_id, None)
        if (
            member.instance_id is not None
            and group.static_members.get(member.instance_id) == member.member_id
        ):
            del group.static_members[member.instance_id]
        for record_type in (
            CONSUMER_GROUP_CURRENT_MEMBER,
            CONSUMER_GROUP_TARGET_MEMBER,
            CONSUMER_GROUP_MEMBER_METADATA,
        ):
            out.records.append(
                CoordinatorRecord(
                    group.partition, encode_key(record_type, group.group_id, member.member_id), None
                )
            )

    def next_deadline_ms(self) -> int | None:
        deadlines = [
            d
            for g in self._groups.values()
            for m in g.members.values()
            for d in (m.session_deadline_ms, m.revocation_deadline_ms)
            if d is not None
        ]
        return min(deadlines, default=None)

    def tick(self, now_ms: int) -> Output:
        out = Output()
        self._expire(now_ms, out)
        return out

    def _expire(self, now_ms: int, out: Output) -> None:
        for group in list(self._groups.values()):
            for member in list(group.members.values()):
                expired = member.session_deadline_ms is not None and now_ms >= member.session_deadline_ms
                slow = member.revocation_deadline_ms is not None and now_ms >= member.revocation_deadline_ms
                if expired or slow:
                    self._fence(group, member, out)

    # ------------------------------------------------------------------ offsets, describe, delete

    def validate_offset_commit(
        self, group_id: str, member_id: str, member_epoch: int, api_version: int
    ) -> ErrorCode | None:
        """None if `group_id` is not a consumer group here; else the commit's error (NONE = accept)."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        if member_epoch < 0 and not member_id:
            return ErrorCode.NONE if not group.members else ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch not in (member.member_epoch, member.assignment.previous_member_epoch):
            return ErrorCode.STALE_MEMBER_EPOCH if api_version >= 9 else ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def validate_offset_fetch(
        self, group_id: str, member_id: str | None, member_epoch: int
    ) -> ErrorCode | None:
        group = self._groups.get(group_id)
        if group is None:
            return None
        if member_id is None or member_epoch < 0:
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch not in (member.member_epoch, member.assignment.previous_member_epoch):
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def describe(self, group_id: str, topic_names: Mapping[uuid.UUID, str]) -> dict[str, Any]:
        """One DescribedGroup of ConsumerGroupDescribe; GROUP_ID_NOT_FOUND for an unknown group."""
        group = self._groups.get(group_id)
        if group is None:
            return {
                "error_code": ErrorCode.GROUP_ID_NOT_FOUND,
                "error_message": f"Group {group_id} not found.",
                "group_id": group_id,
                "group_state": "Dead",
                "group_epoch": -1,
                "assignment_epoch": -1,
                "assignor_name": "",
                "members": [],
            }

        def described(a: Assignment) -> dict:
            return {
                "topic_partitions": [
                    {
                        "topic_id": t["topic_id"],
                        "topic_name": topic_names.get(t["topic_id"], ""),
                        "partitions": t["partitions"],
                    }
                    for t in to_wire(a)
                ]
            }

        return {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "group_id": group_id,
            "group_state": group.state,
            "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "assignor_name": self._assignor_of(group),
            "members": [
                {
                    "member_id": m.member_id,
                    "instance_id": m.instance_id,
                    "rack_id": m.rack_id,
                    "member_epoch": m.member_epoch,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_topic_names),
                    "subscribed_topic_regex": m.subscribed_topic_regex,
                    "assignment": described(m.assignment.assigned),
                    "target_assignment": described(group.target.get(m.member_id, {})),
                    "member_type": 1,
                }
                for m in group.members.values()
            ],
        }

    def delete_group(self, group_id: str) -> Output:
        """DeleteGroups for a consumer group: `Output.response` is the ErrorCode."""
        out = Output()
        group = self._groups.get(group_id)
        if group is None:
            out.response = ErrorCode.GROUP_ID_NOT_FOUND
        elif group.members:
            out.response = ErrorCode.NON_EMPTY_GROUP
        else:
            for record_type in (CONSUMER_GROUP_TARGET_METADATA, CONSUMER_GROUP_METADATA):
                out.records.append(
                    CoordinatorRecord(group.partition, encode_key(record_type, group_id), None)
                )
            del self._groups[group_id]
            out.response = ErrorCode.NONE
        return out

    # ------------------------------------------------------------------ loading

    def mark_loading(self, partition: int) -> None:
        self._loading.add(partition)

    def load_partition(self, partition: int, records: Iterable[Any], *, now_ms: int) -> None:
        """Become coordinator of `partition`: rebuild its consumer groups from (key, value, ...) entries."""
        self.unload_partition(partition)
        for entry in records:
            if not isinstance(entry, tuple):
                continue  # transactional offset commits and markers are not ours
            k = decode_key(bytes(entry[0]))
            if k is not None and k.record_type in (3, 5, 6, 7, 8):
                self._replay(k, entry[1], partition)
        for g in self._groups.values():
            if g.partition != partition:
                continue
            for m in g.members.values():
                m.session_deadline_ms = now_ms + self._timeout_ms(g.group_id, SESSION_TIMEOUT)
                if m.assignment.state is MemberState.UNREVOKED_PARTITIONS:
                    m.revocation_deadline_ms = now_ms + m.rebalance_timeout_ms
            g.subscribed_partitions = None  # taken from the topics at the next heartbeat
        self._loading.discard(partition)

    def unload_partition(self, partition: int) -> Output:
        for gid in [g for g, grp in self._groups.items() if grp.partition == partition]:
            del self._groups[gid]
        return Output()

    def _replay(self, k: RecordKey, value: Any, partition: int) -> None:
        group = self._groups.get(k.group_id)
        if value is None:
            if group is None:
                return
            if k.record_type == CONSUMER_GROUP_METADATA:
                del self._groups[k.group_id]
            elif k.record_type == CONSUMER_GROUP_MEMBER_METADATA and k.member_id is not None:
                m = group.members.pop(k.member_id, None)
                if m is not None and m.instance_id is not None:
                    group.static_members.pop(m.instance_id, None)
            elif k.record_type == CONSUMER_GROUP_TARGET_MEMBER and k.member_id is not None:
                group.target.pop(k.member_id, None)
            elif k.record_type == CONSUMER_GROUP_CURRENT_MEMBER and k.member_id in group.members:
                group.members[k.member_id].assignment = MemberAssignment()
            return
        if group is None:
            group = self._groups[k.group_id] = ConsumerGroup(k.group_id, partition)
        v = decode_value(k.record_type, bytes(value))
        if k.record_type == CONSUMER_GROUP_METADATA:
            group.group_epoch = v.epoch
        elif k.record_type == CONSUMER_GROUP_TARGET_METADATA:
            group.assignment_epoch = v.assignment_epoch
        elif k.record_type == CONSUMER_GROUP_TARGET_MEMBER:
            group.target[k.member_id or ""] = from_wire(v.topic_partitions)
        elif k.record_type == CONSUMER_GROUP_MEMBER_METADATA:
            m = group.members.get(k.member_id or "") or ConsumerMember(k.member_id or "")
            m.instance_id, m.rack_id, m.client_id, m.client_host = (
                v.instance_id,
                v.rack_id,
                v.client_id,
                v.client_host,
            )
            m.subscribed_topic_names = tuple(v.subscribed_topic_names)
            m.subscribed_topic_regex = v.subscribed_topic_regex
            m.rebalance_timeout_ms, m.server_assignor = v.rebalance_timeout_ms, v.server_assignor
            group.members[m.member_id] = m
            if m.instance_id is not None:
                group.static_members[m.instance_id] = m.member_id
        elif k.record_type == CONSUMER_GROUP_CURRENT_MEMBER:
            m = group.members.get(k.member_id or "") or ConsumerMember(k.member_id or "")
            group.members[m.member_id] = m
            m.assignment = MemberAssignment(
                MemberState(v.state) if v.state in (0, 1, 2) else MemberState.STABLE,
                v.member_epoch,
                v.previous_member_epoch,
                from_wire(v.assigned_partitions),
                from_wire(v.partitions_pending_revocation),
            )

    # ------------------------------------------------------------------ records

    def _record(
        self, group: ConsumerGroup, record_type: int, member_id: str | None, value: dict
    ) -> CoordinatorRecord:
        return CoordinatorRecord(
            group.partition,
            encode_key(record_type, group.group_id, member_id),
            encode_value(record_type, value),
        )

    def _write_current(self, group: ConsumerGroup, member: ConsumerMember, out: Output) -> None:
        a = member.assignment
        out.records.append(
            self._record(
                group,
                CONSUMER_GROUP_CURRENT_MEMBER,
                member.member_id,
                {
                    "member_epoch": a.member_epoch,
                    "previous_member_epoch": a.previous_member_epoch,
                    "state": int(a.state),
                    "assigned_partitions": to_wire(a.assigned),
                    "partitions_pending_revocation": to_wire(a.pending_revocation),
                },
            )
        )

    def _error(self, error: ErrorCode, message: str | None = None) -> dict[str, Any]:
        return {
            "throttle_time_ms": 0,
            "error_code": error,
            "error_message": message or error.name,
            "member_id": None,
            "member_epoch": -1,
            "heartbeat_interval_ms": 0,
            "assignment": None,
        }


def _new_member_id(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _subset(a: Assignment, b: Assignment) -> bool:
    return all(ps <= b.get(t, frozenset()) for t, ps in a.items())


__all__ = ["ConsumerGroupConfig", "ConsumerGroupCoordinator", "Heartbeat", "TopicsView", "normalise"]
