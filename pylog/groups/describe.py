"""What DescribeGroups, ConsumerGroupDescribe and ShareGroupDescribe say of a group, whatever its type.

ConsumerGroupDescribe and ShareGroupDescribe share one shape (epochs, assignor, members with
their assignments by topic id and name); DescribeGroups (the classic API) sees every type: a
classic group with its protocol, metadata and assignments when Stable, a consumer or share group
with its state and members, and its classic members' metadata and assignments.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from pylog.groups.consumer_group import ConsumerGroup
from pylog.groups.consumer_protocol import encode_assignment, subscription_version
from pylog.groups.group import ClassicGroup, GroupState
from pylog.groups.group_records import Assignment, to_wire
from pylog.groups.share_group import ShareGroup
from pylog.groups.types import DescribedGroup, DescribedMember, ListedGroup
from pylog.protocol.errors import ErrorCode

TopicNames = Mapping[uuid.UUID, str]


def failed(group_id: str, error: ErrorCode, message: str | None = None, state: str = "") -> dict[str, Any]:
    """A ConsumerGroupDescribe / ShareGroupDescribe entry for a group that cannot be described."""
    return {
        "error_code": error,
        "error_message": message if message is not None else error.name,
        "group_id": group_id,
        "group_state": state,
        "group_epoch": -1,
        "assignment_epoch": -1,
        "assignor_name": "",
        "members": [],
    }


def not_found(group_id: str) -> dict[str, Any]:
    return failed(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", "Dead")


def _described(a: Assignment, names: TopicNames) -> dict[str, Any]:
    return {
        "topic_partitions": [
            {
                "topic_id": t["topic_id"],
                "topic_name": names.get(t["topic_id"], ""),
                "partitions": t["partitions"],
            }
            for t in to_wire(a)
        ]
    }


def consumer_group(group: ConsumerGroup, assignor: str, names: TopicNames) -> dict[str, Any]:
    """One DescribedGroup of ConsumerGroupDescribe."""
    return {
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "group_id": group.group_id,
        "group_state": group.state,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": assignor,
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
                "assignment": _described(m.assignment.assigned, names),
                "target_assignment": _described(group.target.get(m.member_id, {}), names),
                "member_type": 0 if m.classic is not None else 1,  # Kafka: 0 classic, 1 consumer
            }
            for m in group.members.values()
        ],
    }


def share_group(group: ShareGroup, names: TopicNames) -> dict[str, Any]:
    """One DescribedGroup of ShareGroupDescribe."""
    return {
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "group_id": group.group_id,
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
                "assignment": _described(m.assigned, names),
            }
            for m in group.members.values()
        ],
    }


def classic_view(
    group: ClassicGroup | ConsumerGroup | ShareGroup | None, group_id: str, names: TopicNames
) -> DescribedGroup:
    """DescribeGroups of any group; an unknown group is Dead with no error (v0-5)."""
    if group is None:
        return DescribedGroup(ErrorCode.NONE, group_id, GroupState.DEAD.value, "", "")
    if isinstance(group, ClassicGroup):
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
        protocol = (group.protocol_name or "") if stable else ""
        return DescribedGroup(
            ErrorCode.NONE, group_id, group.state.value, group.protocol_type or "", protocol, members
        )
    if isinstance(group, ShareGroup):
        members = tuple(
            DescribedMember(m.member_id, None, m.client_id, m.client_host, b"", b"")
            for m in group.members.values()
        )
        return DescribedGroup(ErrorCode.NONE, group_id, group.state, "share", "", members)
    described = []
    for m in group.members.values():
        metadata = assignment = b""
        if m.classic is not None:
            metadata = m.classic.protocols[0][1]
            by_name = {names[t]: ps for t, ps in m.assignment.assigned.items() if t in names}
            assignment = encode_assignment(by_name, subscription_version(metadata))
        described.append(
            DescribedMember(m.member_id, m.instance_id, m.client_id, m.client_host, metadata, assignment)
        )
    return DescribedGroup(ErrorCode.NONE, group_id, group.state, "consumer", "", tuple(described))


def as_consumer_group(
    group: ClassicGroup | ConsumerGroup | ShareGroup | None,
    group_id: str,
    assignor_of: Callable[[ConsumerGroup], str],
    names: TopicNames,
) -> dict[str, Any]:
    """ConsumerGroupDescribe of whatever `group_id` names."""
    if isinstance(group, ConsumerGroup):
        return consumer_group(group, assignor_of(group), names)
    if isinstance(group, ClassicGroup) and (group.members or group.pending_members):
        return failed(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
    return not_found(group_id)


def as_share_group(
    group: ClassicGroup | ConsumerGroup | ShareGroup | None, group_id: str, names: TopicNames
) -> dict[str, Any]:
    """ShareGroupDescribe of whatever `group_id` names."""
    return share_group(group, names) if isinstance(group, ShareGroup) else not_found(group_id)


def listed(group: ClassicGroup | ConsumerGroup | ShareGroup) -> ListedGroup:
    """A ListGroups entry."""
    if isinstance(group, ClassicGroup):
        return ListedGroup(group.group_id, group.protocol_type or "", group.state.value, "classic")
    if isinstance(group, ConsumerGroup):
        return ListedGroup(group.group_id, "consumer", group.state, "consumer")
    return ListedGroup(group.group_id, "share", group.state, "share")
