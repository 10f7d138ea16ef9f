"""Sans-IO membership coordinator of share groups (KIP-932): ShareGroupHeartbeat, describe,
session timeouts and the group's records in `__consumer_offsets` (Kafka's types 10-14).

Theory of operation. Share groups do not own partitions exclusively: the records of a partition
are handed out one acquisition at a time by the share partition (`pylog.share.partition`), so
membership only tells each member which partitions to fetch from. The assignment is therefore
simple and never needs revocation: every member gets every partition of the topics it
subscribes to, and a member's epoch jumps straight to the group epoch whenever the assignment
changes (a member joins or leaves, a subscription or a partition count changes). A member that
stops heartbeating for `group.share.session.timeout.ms` is removed; its acquired records go back
when their acquisition locks expire, which the share partitions handle on their own.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pylog.groups.group_records import (
    SHARE_GROUP_CURRENT_MEMBER,
    SHARE_GROUP_MEMBER_METADATA,
    SHARE_GROUP_METADATA,
    SHARE_GROUP_TARGET_MEMBER,
    SHARE_GROUP_TARGET_METADATA,
    Assignment,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    from_wire,
    to_wire,
)
from pylog.groups.records import partition_for
from pylog.groups.types import CoordinatorRecord, ListedGroup, Output
from pylog.protocol.errors import ErrorCode

TopicsView = Mapping[str, tuple[uuid.UUID, int]]
SESSION_TIMEOUT = "share.session.timeout.ms"  # the GROUP configs a group may override
HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"


@dataclass(frozen=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size
    offsets_topic_num_partitions: int = 50

    @classmethod
    def from_kafka(cls, props: Mapping[str, str], num_partitions: int) -> ShareGroupConfig:
        return cls(
            int(props.get("group.share.session.timeout.ms", 45000)),
            int(props.get("group.share.heartbeat.interval.ms", 5000)),
            int(props.get("group.share.max.size", 200)),
            num_partitions,
        )


@dataclass
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    assigned: Assignment = field(default_factory=dict)
    session_deadline_ms: int | None = None


@dataclass
class ShareGroup:
    group_id: str
    partition: int
    group_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    subscribed_partitions: dict[uuid.UUID, int] | None = field(default_factory=dict)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def assigned_partitions(self) -> set[tuple[uuid.UUID, int]]:
        return {(t, p) for m in self.members.values() for t, ps in m.assigned.items() for p in ps}


class ShareGroupCoordinator:
    def __init__(
        self,
        config: ShareGroupConfig,
        *,
        rng: random.Random,
        group_configs: Callable[[str], Mapping[str, str]] = lambda group_id: {},
    ) -> None:
        self.config = config
        self._group_configs = group_configs  # a group's GROUP config overrides (the metadata image)
        self._rng = rng
        self._groups: dict[str, ShareGroup] = {}
        self._loading: set[int] = set()

    def _timeout_ms(self, group_id: str, name: str) -> int:
        """``share.session.timeout.ms`` / ``share.heartbeat.interval.ms`` of a group: its GROUP
        config override, else the broker-wide setting."""
        value = self._group_configs(group_id).get(name)
        if value is not None:
            return int(value)
        c = self.config
        return c.session_timeout_ms if name == SESSION_TIMEOUT else c.heartbeat_interval_ms

    def has_group(self, group_id: str) -> bool:
        return group_id in self._groups

    def group(self, group_id: str) -> ShareGroup | None:
        return self._groups.get(group_id)

    def groups(self) -> list[ShareGroup]:
        return list(self._groups.values())

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def list_groups(self) -> list[ListedGroup]:
        return [ListedGroup(g.group_id, "share", g.state, "share") for g in self._groups.values()]

    def is_member(self, group_id: str, member_id: str) -> bool:
        g = self._groups.get(group_id)
        return g is not None and member_id in g.members

    # ------------------------------------------------------------------ heartbeat

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        subscribed_topic_names: list[str] | None,
        topics: TopicsView,
        *,
        rack_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
        now_ms: int,
    ) -> Output:
        out = Output()
        self._expire(now_ms, out)
        if not group_id:
            out.response = _error(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
            return out
        if member_epoch == 0 and not subscribed_topic_names:
            out.response = _error(
                ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request."
            )
            return out
        if member_epoch != 0 and not member_id:
            out.response = _error(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
            return out
        if self.partition_for(group_id) in self._loading:
            out.response = _error(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            return out
        group = self._groups.get(group_id)
        if member_epoch == -1:
            member = group.members.get(member_id) if group else None
            if group is None or member is None:
                out.response = _error(ErrorCode.UNKNOWN_MEMBER_ID)
                return out
            self._remove(group, member, out)
            self._bump(group, out)
            out.response = _ok(member_id, -1, 0, None)
            return out
        if group is None:
            group = self._groups[group_id] = ShareGroup(group_id, self.partition_for(group_id))
        bump = False
        if member_epoch == 0:
            mid = member_id or str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
            member = group.members.get(mid)
            if member is None:
                if len(group.members) >= self.config.max_size:
                    out.response = _error(ErrorCode.GROUP_MAX_SIZE_REACHED)
                    return out
                member = group.members[mid] = ShareMember(mid)
                bump = True
        else:
            member = group.members.get(member_id)
            if member is None:
                out.response = _error(ErrorCode.UNKNOWN_MEMBER_ID)
                return out
            if member_epoch not in (member.member_epoch, member.previous_member_epoch):
                out.response = _error(ErrorCode.FENCED_MEMBER_EPOCH)
                return out
        before = member.assigned, member.member_epoch
        changed = False
        if (
            subscribed_topic_names is not None
            and tuple(sorted(set(subscribed_topic_names))) != member.subscribed_topic_names
        ):
            member.subscribed_topic_names = tuple(sorted(set(subscribed_topic_names)))
            bump = changed = True
        if rack_id is not None and rack_id != member.rack_id:
            member.rack_id, changed = rack_id, True
        if (client_id, client_host) != (member.client_id, member.client_host):
            member.client_id, member.client_host, changed = client_id, client_host, True
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
        if bump:
            self._bump(group, out)
        target = {
            topics[n][0]: frozenset(range(topics[n][1])) for n in member.subscribed_topic_names if n in topics
        }
        target = {t: ps for t, ps in target.items() if ps}
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
        member.session_deadline_ms = now_ms + self._timeout_ms(group_id, SESSION_TIMEOUT)
        send = member_epoch == 0 or (member.assigned, member.member_epoch) != before
        out.response = _ok(
            member.member_id,
            member.member_epoch,
            self._timeout_ms(group_id, HEARTBEAT_INTERVAL),
            {"topic_partitions": to_wire(member.assigned)} if send else None,
        )
        return out

    def _bump(self, group: ShareGroup, out: Output) -> None:
        group.group_epoch += 1
        out.records.append(self._record(group, SHARE_GROUP_METADATA, None, {"epoch": group.group_epoch}))
        out.records.append(
            self._record(group, SHARE_GROUP_TARGET_METADATA, None, {"assignment_epoch": group.group_epoch})
        )

    def _remove(self, group: ShareGroup, member: ShareMember, out: Output) -> None:
        del group.members[member.member_id]
        for rt in (SHARE_GROUP_CURRENT_MEMBER, SHARE_GROUP_TARGET_MEMBER, SHARE_GROUP_MEMBER_METADATA):
            out.records.append(
                CoordinatorRecord(group.partition, encode_key(rt, group.group_id, member.member_id), None)
            )

    # ------------------------------------------------------------------ timers

    def next_deadline_ms(self) -> int | None:
        return min(
            (
                m.session_deadline_ms
                for g in self._groups.values()
                for m in g.members.values()
                if m.session_deadline_ms is not None
            ),
            default=None,
        )

    def tick(self, now_ms: int) -> Output:
        out = Output()
        self._expire(now_ms, out)
        return out

    def _expire(self, now_ms: int, out: Output) -> None:
        for g in self._groups.values():
            for m in list(g.members.values()):
                if m.session_deadline_ms is not None and now_ms >= m.session_deadline_ms:
                    self._remove(g, m, out)
                    self._bump(g, out)

    # ------------------------------------------------------------------ describe / delete

    def describe(self, group_id: str, topic_names: Mapping[uuid.UUID, str]) -> dict[str, Any]:
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
        return {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "group_id": group_id,
            "group_state": group.state,
            "group_epoch": group.group_epoch,
            "assignment_epoch": group.group_epoch,
            "assignor_name": "simple",
            "members": [
                {
                    "member_id": m.member_id,
                    "rack_id": m.rack_id,
                    "member_epoch": m.member_epoch,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_topic_names),
                    "assignment": {
                        "topic_partitions": [
                            {
                                "topic_id": tp["topic_id"],
                                "topic_name": topic_names.get(tp["topic_id"], ""),
                                "partitions": tp["partitions"],
                            }
                            for tp in to_wire(m.assigned)
                        ]
                    },
                }
                for m in group.members.values()
            ],
        }

    def delete_group(self, group_id: str) -> Output:
        out = Output()
        group = self._groups.get(group_id)
        if group is None:
            out.response = ErrorCode.GROUP_ID_NOT_FOUND
        elif group.members:
            out.response = ErrorCode.NON_EMPTY_GROUP
        else:
            for rt in (SHARE_GROUP_TARGET_METADATA, SHARE_GROUP_METADATA):
                out.records.append(CoordinatorRecord(group.partition, encode_key(rt, group_id), None))
            del self._groups[group_id]
            out.response = ErrorCode.NONE
        return out

    # ------------------------------------------------------------------ loading

    def mark_loading(self, partition: int) -> None:
        self._loading.add(partition)

    def load_partition(self, partition: int, records: Iterable[Any], *, now_ms: int) -> None:
        self.unload_partition(partition)
        for entry in records:
            if not isinstance(entry, tuple):
                continue
            k = decode_key(bytes(entry[0]))
            if k is None or k.record_type not in (10, 11, 14):
                continue
            group = self._groups.get(k.group_id)
            if entry[1] is None:
                if group is not None and k.record_type == SHARE_GROUP_METADATA:
                    del self._groups[k.group_id]
                elif group is not None and k.record_type == SHARE_GROUP_MEMBER_METADATA:
                    group.members.pop(k.member_id or "", None)
                continue
            if group is None:
                group = self._groups[k.group_id] = ShareGroup(k.group_id, partition)
            v = decode_value(k.record_type, bytes(entry[1]))
            if k.record_type == SHARE_GROUP_METADATA:
                group.group_epoch = v.epoch
                continue
            m = group.members.setdefault(k.member_id or "", ShareMember(k.member_id or ""))
            if k.record_type == SHARE_GROUP_MEMBER_METADATA:
                m.rack_id, m.client_id, m.client_host = v.rack_id, v.client_id, v.client_host
                m.subscribed_topic_names = tuple(v.subscribed_topic_names)
            else:
                m.member_epoch, m.previous_member_epoch = v.member_epoch, v.previous_member_epoch
                m.assigned = from_wire(v.assigned_partitions)
        for g in self._groups.values():
            if g.partition == partition:
                g.subscribed_partitions = None
                for m in g.members.values():
                    m.session_deadline_ms = now_ms + self._timeout_ms(g.group_id, SESSION_TIMEOUT)
        self._loading.discard(partition)

    def unload_partition(self, partition: int) -> Output:
        for gid in [g for g, grp in self._groups.items() if grp.partition == partition]:
            del self._groups[gid]
        return Output()

    def _record(self, group: ShareGroup, rt: int, member_id: str | None, value: dict) -> CoordinatorRecord:
        return CoordinatorRecord(
            group.partition, encode_key(rt, group.group_id, member_id), encode_value(rt, value)
        )


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


def _error(error: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "error_message": message or error.name,
        "member_id": None,
        "member_epoch": -1,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }
