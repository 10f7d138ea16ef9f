"""The consumer group protocol (KIP-848): ConsumerGroupHeartbeat, session and revocation timeouts,
offset-commit validation by member epoch, and the group's records in `__consumer_offsets`.

Theory of operation: see `consumer_group` (epochs, target, derived state) and `reconciliation`
(how a member walks to its target). One heartbeat does, in order: validate the member and its
epoch; resolve the regular expressions earlier heartbeats brought; apply what the member changed
(subscription, assignor) and bump the group epoch if that changes the assignment; recompute the
target when the group epoch is ahead of it; reconcile the member; answer with its epoch and, when
it changed or the member reported something else, its assignment. Every change is returned as
records (Kafka's types 3, 5-8, see `group_records`); the shell appends them before answering, so a
restart replays the same groups. Replayed members get a fresh session: the ones still alive keep
heartbeating with their epoch, the others expire.

A member is removed (fenced) when its session runs out (`group.consumer.session.timeout.ms`, or
the session timeout a classic member joined with), when it keeps partitions it was asked to
revoke for longer than its rebalance timeout (the consumer's `max.poll.interval.ms`), or when it
leaves (epoch -1). Its partitions then have no owner; the next heartbeat computes the new target.
A consumer that exceeds `max.poll.interval.ms` stops heartbeating, gives its partitions up and
leaves with epoch -1 before rejoining with epoch 0 (librdkafka, Kafka's client): the partitions
stay where they are until that leave or the session timeout, and the members that were there
before are first in line for them (`assignors`).

The clock is passed in (`now_ms`) and topic metadata too (`TopicsView`: name -> (id, partitions)),
so this module reads no clock and no broker state. Offsets live in `offsets`; this module only
validates member epochs of OffsetCommit / OffsetFetch.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from pylog.groups.assignors import ASSIGNORS, MemberSubscription
from pylog.groups.consumer_group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerMember,
    GroupConfigs,
    Heartbeat,
    no_group_configs,
)
from pylog.groups.group_records import (
    CONSUMER_GROUP_CURRENT_MEMBER,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_TARGET_MEMBER,
    CONSUMER_GROUP_TARGET_METADATA,
    Assignment,
    RecordKey,
    decode_value,
    encode_key,
    encode_value,
    from_wire,
    to_wire,
)
from pylog.groups.reconciliation import MemberAssignment, MemberState, reconcile
from pylog.groups.registry import GroupRegistry
from pylog.groups.timers import Timer, TimerKind
from pylog.groups.types import CoordinatorRecord, Output
from pylog.protocol.errors import ErrorCode

TopicsView = Mapping[str, tuple[uuid.UUID, int]]
"""Every topic of the cluster: name -> (topic id, partition count)."""

__all__ = [
    "ConsumerGroupConfig",
    "ConsumerProtocol",
    "GroupConfigs",
    "Heartbeat",
    "TopicsView",
    "error_response",
    "no_group_configs",
]


class ConsumerProtocol:
    """KIP-848 membership over the consumer groups of the registry."""

    def __init__(self, registry: GroupRegistry, config: ConsumerGroupConfig) -> None:
        self.reg = registry
        self.config = config
        self.group_configs: GroupConfigs = no_group_configs
        # Called when a member is fenced; True if it converted the group instead (`migration`).
        self.downgrade: Callable[[ConsumerGroup, ConsumerMember, int, Output], bool] = lambda *_: False
        registry.on_timer(TimerKind.CONSUMER_SESSION, self._session_live, self._on_session_timer)
        registry.on_timer(TimerKind.CONSUMER_REVOCATION, self._revocation_live, self._on_revocation_timer)

    # ------------------------------------------------------------------ queries

    def group(self, group_id: str) -> ConsumerGroup | None:
        return self.reg.get(group_id, ConsumerGroup)

    def session_timeout_ms(self, group_id: str, member: ConsumerMember | None = None) -> int:
        if member is not None and member.classic is not None:
            return member.classic.session_timeout_ms
        v = self.group_configs(group_id).get("consumer.session.timeout.ms")
        return int(v) if v is not None else self.config.session_timeout_ms

    def heartbeat_interval_ms(self, group_id: str) -> int:
        v = self.group_configs(group_id).get("consumer.heartbeat.interval.ms")
        return int(v) if v is not None else self.config.heartbeat_interval_ms

    # ------------------------------------------------------------------ heartbeat

    def validate(self, hb: Heartbeat) -> tuple[ErrorCode, str | None]:
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

    def heartbeat(
        self, group: ConsumerGroup | None, hb: Heartbeat, topics: TopicsView, *, now_ms: int, out: Output
    ) -> None:
        """ConsumerGroupHeartbeat on a validated request; `out.response` is the response body.

        `group` None (a new group id) is created here; the caller dealt with other group types."""
        if hb.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            self._leave(group, hb, now_ms, out)
            return
        created = group is None
        if group is None:
            group = ConsumerGroup(hb.group_id, self.reg.partition_for(hb.group_id))
            self.reg.put(group)
        member, error = self._member_for(group, hb, out)
        if member is None:
            out.response = error_response(error)
            if created and not group.members and group.group_epoch == 0:
                self.reg.remove(hb.group_id)
            return
        before = member.assignment
        bump = self._resolve_regexes(group)
        bump |= self._update_member(group, member, hb, out)
        bump |= self._refresh_subscribed_partitions(group, topics)
        if bump:
            self.bump_epoch(group, out)
        self.update_target(group, topics, out, now_ms=now_ms)
        self.reconcile(group, member, hb.owned, now_ms, out)
        self.reg.arm(
            member.session,
            now_ms + self.session_timeout_ms(group.group_id, member),
            TimerKind.CONSUMER_SESSION,
            group.group_id,
            member.member_id,
        )
        response: dict[str, Any] = {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "member_id": member.member_id,
            "member_epoch": member.member_epoch,
            "heartbeat_interval_ms": self.heartbeat_interval_ms(group.group_id),
            "assignment": None,
        }
        if (
            hb.member_epoch == 0
            or member.assignment != before
            or (hb.owned is not None and hb.owned != member.assignment.assigned)
        ):
            response["assignment"] = {"topic_partitions": to_wire(member.assignment.assigned)}
        out.response = response

    def _member_for(
        self, group: ConsumerGroup, hb: Heartbeat, out: Output
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
        member_id = hb.member_id or self.reg.new_member_id(taken=group.members)
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
            self.remove_member(group, existing, out)
            self.bump_epoch(group, out)
        if len(group.members) >= self.config.max_size:
            return None, ErrorCode.GROUP_MAX_SIZE_REACHED
        member = ConsumerMember(member_id, hb.instance_id)
        self.add_member(group, member, out)
        return member, ErrorCode.NONE

    def add_member(self, group: ConsumerGroup, member: ConsumerMember, out: Output) -> None:
        group.members[member.member_id] = member
        if member.instance_id is not None:
            group.static_members[member.instance_id] = member.member_id
        self.write_member(group, member, out)

    def _replace_static(
        self, group: ConsumerGroup, previous: ConsumerMember, member_id: str, hb: Heartbeat, out: Output
    ) -> ConsumerMember:
        """A static member rejoins under a new member id: it takes over the old one's assignment
        and epoch, so the group does not rebalance."""
        self.remove_member(group, previous, out)
        member = replace(previous, member_id=member_id)
        member.session, member.revocation = type(previous.session)(), type(previous.revocation)()
        a = previous.assignment
        member.assignment = replace(a, member_epoch=a.previous_member_epoch, previous_member_epoch=-1)
        group.members[member_id] = member
        group.static_members[hb.instance_id or ""] = member_id
        target = group.target.pop(previous.member_id, {})
        group.target[member_id] = target
        self.write_member(group, member, out)
        out.records.append(
            self.record(group, CONSUMER_GROUP_TARGET_MEMBER, member_id, {"topic_partitions": to_wire(target)})
        )
        self.write_current(group, member, out)
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
            self.write_member(group, member, out)
        return new or after != before

    def _resolve_regexes(self, group: ConsumerGroup) -> bool:
        """Resolve the regexes earlier heartbeats brought (and forget unused ones); True if any
        new one counts now, which gives the group a new epoch."""
        used = {m.subscribed_topic_regex for m in group.members.values() if m.subscribed_topic_regex}
        new = used - group.resolved_regexes
        group.resolved_regexes = used
        return bool(new)

    def _refresh_subscribed_partitions(self, group: ConsumerGroup, topics: TopicsView) -> bool:
        names = self._subscribed_names(group, topics)
        now = {tid: n for name, (tid, n) in topics.items() if name in names}
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
            names.update(self.member_topics(group, m, topics))
        return names

    @staticmethod
    def member_topics(group: ConsumerGroup, m: ConsumerMember, topics: TopicsView) -> set[str]:
        """The topics `m` subscribes to: its names, and its regex's matches once resolved."""
        names = {t for t in m.subscribed_topic_names if t in topics}
        regex = m.subscribed_topic_regex
        if regex and regex in group.resolved_regexes:
            pattern = re.compile(regex)
            names.update(t for t in topics if not t.startswith("__") and pattern.fullmatch(t))
        return names

    def bump_epoch(self, group: ConsumerGroup, out: Output) -> None:
        group.group_epoch += 1
        out.records.append(self.record(group, CONSUMER_GROUP_METADATA, None, {"epoch": group.group_epoch}))

    def update_target(
        self, group: ConsumerGroup, topics: TopicsView, out: Output, *, now_ms: int | None = None
    ) -> None:
        """Recompute the target if the group epoch is ahead of it. From a heartbeat (`now_ms`), at
        most once per `group.consumer.assignment.interval.ms`, as Kafka does: subscription changes
        arriving in a burst are assigned together, and until then members keep the last target
        (a consumer changing its subscription rapidly is not asked to revoke partitions of a
        subscription it has already left). A group where no member holds a target yet (new, or
        every member rejoining) gets its first target at once."""
        if group.group_epoch <= group.assignment_epoch:
            return
        interval = self.config.assignment_interval_ms
        last = group.assignment_timestamp_ms
        settled = any(group.target.get(m) for m in group.members)  # someone has partitions to keep
        if now_ms is not None and settled and last and interval > 0 and now_ms < last + interval:
            return
        group.assignment_timestamp_ms = now_ms or 0
        if group.subscribed_partitions is None:
            self._refresh_subscribed_partitions(group, topics)
        assignor = ASSIGNORS[self.assignor_of(group)]
        subs = {
            mid: MemberSubscription(
                frozenset(topics[n][0] for n in self.member_topics(group, m, topics)),
                group.target.get(mid, {}),
                mid not in group.target,
            )
            for mid, m in group.members.items()
        }
        target = assignor(subs, group.subscribed_partitions or {})
        for mid, a in target.items():
            if group.target.get(mid) != a:
                out.records.append(
                    self.record(group, CONSUMER_GROUP_TARGET_MEMBER, mid, {"topic_partitions": to_wire(a)})
                )
        group.target = dict(target)
        group.assignment_epoch = group.group_epoch
        out.records.append(
            self.record(
                group, CONSUMER_GROUP_TARGET_METADATA, None, {"assignment_epoch": group.assignment_epoch}
            )
        )

    def assignor_of(self, group: ConsumerGroup) -> str:
        """The assignor most members ask for, else the first configured one (Kafka's rule)."""
        votes: dict[str, int] = {}
        for m in group.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return self.config.assignors[0]
        return max(sorted(votes), key=lambda a: votes[a])

    def reconcile(
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
            if member.revocation.deadline_ms is None:
                self.reg.arm(
                    member.revocation,
                    now_ms + member.rebalance_timeout_ms,
                    TimerKind.CONSUMER_REVOCATION,
                    group.group_id,
                    member.member_id,
                )
        else:
            member.revocation.clear()
        self.write_current(group, member, out)

    # ------------------------------------------------------------------ leaving, fencing, timers

    def _leave(self, group: ConsumerGroup | None, hb: Heartbeat, now_ms: int, out: Output) -> None:
        member = None
        if group is not None:
            member = group.members.get(hb.member_id)
            if member is None and hb.instance_id is not None:
                member = group.members.get(group.static_members.get(hb.instance_id, ""))
        if group is None or member is None:
            out.response = error_response(ErrorCode.UNKNOWN_MEMBER_ID)
            return
        if hb.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # The static member keeps its partitions until its session expires or it returns.
            a = member.assignment
            member.assignment = replace(
                a, member_epoch=STATIC_LEAVE_EPOCH, previous_member_epoch=a.member_epoch
            )
            self.reg.arm(
                member.session,
                now_ms + self.session_timeout_ms(group.group_id, member),
                TimerKind.CONSUMER_SESSION,
                group.group_id,
                member.member_id,
            )
            self.write_current(group, member, out)
        else:
            self.fence(group, member, now_ms, out)
        out.response = {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "member_id": member.member_id,
            "member_epoch": hb.member_epoch,
            "heartbeat_interval_ms": 0,
            "assignment": None,
        }

    def fence(self, group: ConsumerGroup, member: ConsumerMember, now_ms: int, out: Output) -> None:
        """Remove `member`; its partitions become free and the others get a new target (computed
        at the next heartbeat, which brings topic metadata). If only classic members remain, the
        group may go back to being a classic group instead (`migration`)."""
        if self.downgrade(group, member, now_ms, out):
            return
        self.remove_member(group, member, out)
        self.bump_epoch(group, out)

    def remove_member(self, group: ConsumerGroup, member: ConsumerMember, out: Output) -> None:
        group.members.pop(member.member_id, None)
        group.target.pop(member.member_id, None)
        member.session.clear()
        member.revocation.clear()
        member.sync.clear()
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

    def _member_of(self, t: Timer) -> tuple[ConsumerGroup, ConsumerMember] | None:
        group = self.group(t.group_id)
        m = group.members.get(t.member_id) if group is not None else None
        return None if group is None or m is None else (group, m)

    def _session_live(self, t: Timer) -> bool:
        gm = self._member_of(t)
        return gm is not None and gm[1].session.seq == t.seq

    def _revocation_live(self, t: Timer) -> bool:
        gm = self._member_of(t)
        return gm is not None and gm[1].revocation.seq == t.seq

    def _on_session_timer(self, t: Timer, now_ms: int, out: Output) -> None:
        gm = self._member_of(t)
        assert gm is not None
        if self.reg.due(gm[1].session, t, now_ms):
            self.fence(gm[0], gm[1], now_ms, out)

    def _on_revocation_timer(self, t: Timer, now_ms: int, out: Output) -> None:
        gm = self._member_of(t)
        assert gm is not None
        if self.reg.due(gm[1].revocation, t, now_ms):
            self.fence(gm[0], gm[1], now_ms, out)

    # ------------------------------------------------------------------ offsets, delete

    def validate_offset_commit(
        self, group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int
    ) -> ErrorCode:
        """The error of an OffsetCommit to a consumer group (NONE = accept)."""
        if member_epoch < 0 and not member_id:
            return ErrorCode.NONE if not group.members else ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.classic is not None:
            # A classic member commits with its generation, which is its member epoch.
            return ErrorCode.NONE if member_epoch == member.member_epoch else ErrorCode.ILLEGAL_GENERATION
        if member_epoch not in (member.member_epoch, member.assignment.previous_member_epoch):
            return ErrorCode.STALE_MEMBER_EPOCH if api_version >= 9 else ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def validate_offset_fetch(
        self, group: ConsumerGroup, member_id: str | None, member_epoch: int
    ) -> ErrorCode:
        if member_id is None or member_epoch < 0:
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch not in (member.member_epoch, member.assignment.previous_member_epoch):
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def delete(self, group: ConsumerGroup, out: Output) -> ErrorCode:
        """DeleteGroups of a consumer group (its offsets are the caller's)."""
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        self.tombstone_group(group, out)
        self.reg.remove(group.group_id)
        return ErrorCode.NONE

    def tombstone_group(self, group: ConsumerGroup, out: Output) -> None:
        """Tombstones of every record of the group (its members' and its own)."""
        for m in list(group.members.values()):
            self.remove_member(group, m, out)
        for record_type in (CONSUMER_GROUP_TARGET_METADATA, CONSUMER_GROUP_METADATA):
            out.records.append(
                CoordinatorRecord(group.partition, encode_key(record_type, group.group_id), None)
            )

    # ------------------------------------------------------------------ loading

    def replay(self, k: RecordKey, value: bytes | None, partition: int) -> None:
        """Apply one consumer-group record of a replayed partition."""
        group = self.group(k.group_id)
        if value is None:
            if group is None:
                return
            if k.record_type == CONSUMER_GROUP_METADATA:
                self.reg.remove(k.group_id)
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
            group = ConsumerGroup(k.group_id, partition)
            self.reg.put(group)  # replaces a group of another type: its tombstone came before
        v = decode_value(k.record_type, bytes(value))
        if v is None:  # a record type this version does not read
            return
        mid = k.member_id or ""
        if k.record_type == CONSUMER_GROUP_METADATA:
            group.group_epoch = v.epoch
        elif k.record_type == CONSUMER_GROUP_TARGET_METADATA:
            group.assignment_epoch = v.assignment_epoch
        elif k.record_type == CONSUMER_GROUP_TARGET_MEMBER:
            group.target[mid] = from_wire(v.topic_partitions)
        elif k.record_type == CONSUMER_GROUP_MEMBER_METADATA:
            m = group.members.get(mid) or ConsumerMember(mid)
            m.instance_id, m.rack_id, m.client_id, m.client_host = (
                v.instance_id,
                v.rack_id,
                v.client_id,
                v.client_host,
            )
            m.subscribed_topic_names = tuple(v.subscribed_topic_names)
            m.subscribed_topic_regex = v.subscribed_topic_regex
            m.rebalance_timeout_ms, m.server_assignor = v.rebalance_timeout_ms, v.server_assignor
            c = getattr(v, "classic_member_metadata", None)
            m.classic = (
                None
                if c is None
                else ClassicMemberMetadata(
                    c.session_timeout_ms, tuple((p.name, bytes(p.metadata)) for p in c.supported_protocols)
                )
            )
            group.members[m.member_id] = m
            if m.instance_id is not None:
                group.static_members[m.instance_id] = m.member_id
        elif k.record_type == CONSUMER_GROUP_CURRENT_MEMBER:
            m = group.members.get(mid) or ConsumerMember(mid)
            group.members[m.member_id] = m
            m.assignment = MemberAssignment(
                MemberState(v.state) if v.state in (0, 1, 2) else MemberState.STABLE,
                v.member_epoch,
                v.previous_member_epoch,
                from_wire(v.assigned_partitions),
                from_wire(v.partitions_pending_revocation),
            )

    def loaded(self, group: ConsumerGroup, now_ms: int) -> None:
        """A replayed group: fresh sessions, its regexes resolved, topics taken at the next heartbeat."""
        for m in group.members.values():
            self.reg.arm(
                m.session,
                now_ms + self.session_timeout_ms(group.group_id, m),
                TimerKind.CONSUMER_SESSION,
                group.group_id,
                m.member_id,
            )
            if m.assignment.state is MemberState.UNREVOKED_PARTITIONS:
                self.reg.arm(
                    m.revocation,
                    now_ms + m.rebalance_timeout_ms,
                    TimerKind.CONSUMER_REVOCATION,
                    group.group_id,
                    m.member_id,
                )
        group.subscribed_partitions = None
        group.resolved_regexes = {
            m.subscribed_topic_regex for m in group.members.values() if m.subscribed_topic_regex
        }

    # ------------------------------------------------------------------ records

    def record(
        self, group: ConsumerGroup, record_type: int, member_id: str | None, value: dict
    ) -> CoordinatorRecord:
        return CoordinatorRecord(
            group.partition,
            encode_key(record_type, group.group_id, member_id),
            encode_value(record_type, value),
        )

    def write_member(self, group: ConsumerGroup, member: ConsumerMember, out: Output) -> None:
        out.records.append(
            self.record(group, CONSUMER_GROUP_MEMBER_METADATA, member.member_id, member.metadata_value())
        )

    def write_current(self, group: ConsumerGroup, member: ConsumerMember, out: Output) -> None:
        a = member.assignment
        out.records.append(
            self.record(
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


def error_response(error: ErrorCode, message: str | None = None) -> dict[str, Any]:
    """A ConsumerGroupHeartbeat (or ShareGroupHeartbeat) error answer."""
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "error_message": message or error.name,
        "member_id": None,
        "member_epoch": -1,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }


def _subset(a: Assignment, b: Assignment) -> bool:
    return all(ps <= b.get(t, frozenset()) for t, ps in a.items())
