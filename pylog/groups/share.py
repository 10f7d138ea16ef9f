"""The share group protocol (KIP-932): ShareGroupHeartbeat, session timeouts and the group's records
in `__consumer_offsets` (Kafka's types 10-14).

Theory of operation. Share groups do not own partitions exclusively: the records of a partition
are handed out one acquisition at a time by the share partition (`pylog.share.partition`), so
membership only tells each member which partitions to fetch from. The assignment never needs
revocation: Kafka's simple assignor (`assignors.simple`) splits the subscribed partitions evenly
(one member per partition while members are fewer than partitions, several beyond that), and a
member's epoch jumps straight to the group epoch whenever its assignment changes. A new target is
computed at the first heartbeat after the group epoch moved (a member joins or leaves, a
subscription or a partition count changes). As in Kafka, a partition is only assigned once the
group's share state for it is initialized, which the heartbeat that first brings it to the group
starts: that heartbeat assigns nothing new, and the next one (a heartbeat interval later, by when
the members starting together have all joined) bumps the group epoch and assigns it. A member that
stops heartbeating for `group.share.session.timeout.ms` is removed; its acquired records go back
when their acquisition locks expire, which the share partitions handle on their own. Time and
topic metadata are passed in.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pylog.groups.assignors import MemberSubscription, simple
from pylog.groups.consumer import GroupConfigs, TopicsView, error_response, no_group_configs
from pylog.groups.group_records import (
    SHARE_GROUP_CURRENT_MEMBER,
    SHARE_GROUP_MEMBER_METADATA,
    SHARE_GROUP_METADATA,
    SHARE_GROUP_TARGET_MEMBER,
    SHARE_GROUP_TARGET_METADATA,
    RecordKey,
    decode_value,
    encode_key,
    encode_value,
    from_wire,
    to_wire,
)
from pylog.groups.registry import GroupRegistry
from pylog.groups.share_group import ShareGroup, ShareMember
from pylog.groups.timers import Timer, TimerKind
from pylog.groups.types import CoordinatorRecord, Output, int_settings
from pylog.protocol.errors import ErrorCode


@dataclass(frozen=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size

    @classmethod
    def from_kafka(cls, props: Mapping[str, str]) -> ShareGroupConfig:
        """Build from broker properties (`group.share.*`); unrelated keys are ignored."""
        return cls(**int_settings(cls, props, "group.share."))


@dataclass(frozen=True)
class ShareHeartbeat:
    """A ShareGroupHeartbeat request, as the coordinator reads it."""

    group_id: str
    member_id: str
    member_epoch: int
    subscribed_topic_names: list[str] | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""


class ShareProtocol:
    """KIP-932 membership over the share groups of the registry."""

    def __init__(self, registry: GroupRegistry, config: ShareGroupConfig) -> None:
        self.reg = registry
        self.config = config
        self.group_configs: GroupConfigs = no_group_configs
        registry.on_timer(TimerKind.SHARE_SESSION, self._session_live, self._on_session_timer)

    def group(self, group_id: str) -> ShareGroup | None:
        return self.reg.get(group_id, ShareGroup)

    def session_timeout_ms(self, group_id: str) -> int:
        v = self.group_configs(group_id).get("share.session.timeout.ms")
        return int(v) if v is not None else self.config.session_timeout_ms

    def heartbeat_interval_ms(self, group_id: str) -> int:
        v = self.group_configs(group_id).get("share.heartbeat.interval.ms")
        return int(v) if v is not None else self.config.heartbeat_interval_ms

    # ------------------------------------------------------------------ heartbeat

    @staticmethod
    def validate(hb: ShareHeartbeat) -> tuple[ErrorCode, str | None]:
        if not hb.group_id:
            return ErrorCode.INVALID_REQUEST, "GroupId can't be empty."
        if hb.member_epoch == 0 and not hb.subscribed_topic_names:
            return ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request."
        if hb.member_epoch != 0 and not hb.member_id:
            return ErrorCode.INVALID_REQUEST, "MemberId can't be empty."
        return ErrorCode.NONE, None

    def heartbeat(
        self, group: ShareGroup | None, hb: ShareHeartbeat, topics: TopicsView, *, now_ms: int, out: Output
    ) -> None:
        """ShareGroupHeartbeat on a validated request; `out.response` is the response body."""
        if hb.member_epoch == -1:
            member = group.members.get(hb.member_id) if group else None
            if group is None or member is None:
                out.response = error_response(ErrorCode.UNKNOWN_MEMBER_ID)
                return
            self._remove(group, member, out)
            self._bump(group, out)
            out.response = _ok(hb.member_id, -1, 0, None)
            return
        if group is None:
            group = ShareGroup(hb.group_id, self.reg.partition_for(hb.group_id))
            self.reg.put(group)
        bump = False
        if hb.member_epoch == 0:
            mid = hb.member_id or self.reg.new_member_id(taken=group.members)
            member = group.members.get(mid)
            if member is None:
                if len(group.members) >= self.config.max_size:
                    out.response = error_response(ErrorCode.GROUP_MAX_SIZE_REACHED)
                    return
                member = group.members[mid] = ShareMember(mid)
                bump = True
        else:
            found = group.members.get(hb.member_id)
            if found is None:
                out.response = error_response(ErrorCode.UNKNOWN_MEMBER_ID)
                return
            if hb.member_epoch not in (found.member_epoch, found.previous_member_epoch):
                out.response = error_response(ErrorCode.FENCED_MEMBER_EPOCH)
                return
            member = found
        before = member.assigned, member.member_epoch
        changed = False
        names = hb.subscribed_topic_names
        if names is not None and tuple(sorted(set(names))) != member.subscribed_topic_names:
            member.subscribed_topic_names = tuple(sorted(set(names)))
            bump = changed = True
        if hb.rack_id is not None and hb.rack_id != member.rack_id:
            member.rack_id, changed = hb.rack_id, True
        if (hb.client_id, hb.client_host) != (member.client_id, member.client_host):
            member.client_id, member.client_host, changed = hb.client_id, hb.client_host, True
        if changed:
            out.records.append(
                self._record(
                    group,
                    SHARE_GROUP_MEMBER_METADATA,
                    member.member_id,
                    {
                        "rack_id": member.rack_id,
                        "client_id": member.client_id,
                        "client_host": member.client_host,
                        "subscribed_topic_names": list(member.subscribed_topic_names),
                    },
                )
            )
        subscribed = {n for m in group.members.values() for n in m.subscribed_topic_names if n in topics}
        partitions = {topics[n][0]: topics[n][1] for n in subscribed}
        if group.subscribed_partitions is None:
            group.subscribed_partitions = partitions
        elif partitions != group.subscribed_partitions:
            group.subscribed_partitions = partitions
            bump = True
        if group.initialized is None:  # loaded: these were initialized before
            group.initialized = dict(partitions)
        ready = group.initialized
        assignable = {t: min(n, ready[t]) for t, n in partitions.items() if ready.get(t)}
        if group.assignment_epoch >= group.group_epoch and assignable != _assigned_counts(group):
            bump = True  # partitions initialized since the last target
        if bump:
            self._bump(group, out)
        if group.assignment_epoch < group.group_epoch:
            self._update_target(group, topics, assignable)
        group.initialized.update(partitions)  # what was not initialized is, from now on
        target = group.target.get(member.member_id, {})
        if target != member.assigned or member.member_epoch != group.group_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.group_epoch
            member.assigned = target
            out.records.append(
                self._record(
                    group, SHARE_GROUP_TARGET_MEMBER, member.member_id, {"topic_partitions": to_wire(target)}
                )
            )
            out.records.append(
                self._record(
                    group,
                    SHARE_GROUP_CURRENT_MEMBER,
                    member.member_id,
                    {
                        "member_epoch": member.member_epoch,
                        "previous_member_epoch": member.previous_member_epoch,
                        "state": 2,
                        "assigned_partitions": to_wire(target),
                    },
                )
            )
        self.reg.arm(
            member.session,
            now_ms + self.session_timeout_ms(group.group_id),
            TimerKind.SHARE_SESSION,
            group.group_id,
            member.member_id,
        )
        send = hb.member_epoch == 0 or (member.assigned, member.member_epoch) != before
        out.response = _ok(
            member.member_id,
            member.member_epoch,
            self.heartbeat_interval_ms(group.group_id),
            {"topic_partitions": to_wire(member.assigned)} if send else None,
        )

    @staticmethod
    def _update_target(group: ShareGroup, topics: TopicsView, assignable: dict[uuid.UUID, int]) -> None:
        """Every member's partitions for the current group epoch among the `assignable` ones,
        sticking to the last target."""
        subs = {
            mid: MemberSubscription(
                frozenset(topics[n][0] for n in m.subscribed_topic_names if n in topics),
                group.target.get(mid, m.assigned),
            )
            for mid, m in group.members.items()
        }
        group.target = simple(subs, assignable)
        group.assignment_epoch = group.group_epoch

    def _bump(self, group: ShareGroup, out: Output) -> None:
        group.group_epoch += 1
        out.records.append(self._record(group, SHARE_GROUP_METADATA, None, {"epoch": group.group_epoch}))
        out.records.append(
            self._record(group, SHARE_GROUP_TARGET_METADATA, None, {"assignment_epoch": group.group_epoch})
        )

    def _remove(self, group: ShareGroup, member: ShareMember, out: Output) -> None:
        del group.members[member.member_id]
        member.session.clear()
        for rt in (SHARE_GROUP_CURRENT_MEMBER, SHARE_GROUP_TARGET_MEMBER, SHARE_GROUP_MEMBER_METADATA):
            out.records.append(
                CoordinatorRecord(group.partition, encode_key(rt, group.group_id, member.member_id), None)
            )

    # ------------------------------------------------------------------ timers

    def _session_live(self, t: Timer) -> bool:
        group = self.group(t.group_id)
        m = group.members.get(t.member_id) if group is not None else None
        return m is not None and m.session.seq == t.seq

    def _on_session_timer(self, t: Timer, now_ms: int, out: Output) -> None:
        group = self.group(t.group_id)
        assert group is not None
        m = group.members[t.member_id]
        if self.reg.due(m.session, t, now_ms):
            self._remove(group, m, out)
            self._bump(group, out)

    # ------------------------------------------------------------------ delete / loading

    def delete(self, group: ShareGroup, out: Output) -> ErrorCode:
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        for rt in (SHARE_GROUP_TARGET_METADATA, SHARE_GROUP_METADATA):
            out.records.append(CoordinatorRecord(group.partition, encode_key(rt, group.group_id), None))
        self.reg.remove(group.group_id)
        return ErrorCode.NONE

    def replay(self, k: RecordKey, value: bytes | None, partition: int) -> None:
        if k.record_type not in (
            SHARE_GROUP_MEMBER_METADATA,
            SHARE_GROUP_METADATA,
            SHARE_GROUP_CURRENT_MEMBER,
        ):
            return
        group = self.group(k.group_id)
        if value is None:
            if group is not None and k.record_type == SHARE_GROUP_METADATA:
                self.reg.remove(k.group_id)
            elif group is not None and k.record_type == SHARE_GROUP_MEMBER_METADATA:
                group.members.pop(k.member_id or "", None)
            return
        if group is None:
            group = ShareGroup(k.group_id, partition)
            self.reg.put(group)
        v = decode_value(k.record_type, bytes(value))
        if v is None:  # a record type this version does not read
            return
        if k.record_type == SHARE_GROUP_METADATA:
            group.group_epoch = v.epoch
            return
        m = group.members.setdefault(k.member_id or "", ShareMember(k.member_id or ""))
        if k.record_type == SHARE_GROUP_MEMBER_METADATA:
            m.rack_id, m.client_id, m.client_host = v.rack_id, v.client_id, v.client_host
            m.subscribed_topic_names = tuple(v.subscribed_topic_names)
        else:
            m.member_epoch, m.previous_member_epoch = v.member_epoch, v.previous_member_epoch
            m.assigned = from_wire(v.assigned_partitions)

    def loaded(self, group: ShareGroup, now_ms: int) -> None:
        group.subscribed_partitions = None
        group.initialized = None
        for m in group.members.values():
            self.reg.arm(
                m.session,
                now_ms + self.session_timeout_ms(group.group_id),
                TimerKind.SHARE_SESSION,
                group.group_id,
                m.member_id,
            )

    def _record(self, group: ShareGroup, rt: int, member_id: str | None, value: dict) -> CoordinatorRecord:
        return CoordinatorRecord(
            group.partition, encode_key(rt, group.group_id, member_id), encode_value(rt, value)
        )


def _assigned_counts(group: ShareGroup) -> dict[uuid.UUID, int]:
    """Partition counts per topic in the group's target (the simple assignor assigns every
    assignable partition of a subscribed topic)."""
    seen: dict[uuid.UUID, set[int]] = {}
    for a in group.target.values():
        for t, ps in a.items():
            seen.setdefault(t, set()).update(ps)
    return {t: len(ps) for t, ps in seen.items()}


def _ok(member_id: str, epoch: int, interval: int, assignment: dict | None) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "member_id": member_id,
        "member_epoch": epoch,
        "heartbeat_interval_ms": interval,
        "assignment": assignment,
    }
