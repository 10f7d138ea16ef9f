"""What DescribeGroups, ConsumerGroupDescribe, ShareGroupDescribe and StreamsGroupDescribe say of a
group, whatever its type.

ConsumerGroupDescribe and ShareGroupDescribe share one shape (epochs, assignor, members with
their assignments by topic id and name); DescribeGroups (the classic API) sees every type: a
classic group with its protocol, metadata and assignments when Stable, a consumer or share group
with its state and members, and its classic members' metadata and assignments. StreamsGroupDescribe
(KIP-1071) shows the topology (internal topics with the partition counts the coordinator decided)
and each member's process, endpoint, tags and current and target tasks.
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
from pylog.groups.streams import tasks_to_wire
from pylog.groups.streams_group import StreamsGroup, Tasks, TopicInfo
from pylog.groups.types import DescribedGroup, DescribedMember, ListedGroup
from pylog.protocol.errors import ErrorCode

TopicNames = Mapping[uuid.UUID, str]
AnyGroup = ClassicGroup | ConsumerGroup | ShareGroup | StreamsGroup


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


def _opening(group: ConsumerGroup | ShareGroup | StreamsGroup, assignment_epoch: int) -> dict[str, Any]:
    """The fields every description of a consumer, share or streams group starts with."""
    return {
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "group_id": group.group_id,
        "group_state": group.state,
        "group_epoch": group.group_epoch,
        "assignment_epoch": assignment_epoch,
    }


def consumer_group(group: ConsumerGroup, assignor: str, names: TopicNames) -> dict[str, Any]:
    """One DescribedGroup of ConsumerGroupDescribe."""
    return {
        **_opening(group, group.assignment_epoch),
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
        **_opening(group, group.group_epoch),
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


def classic_view(group: AnyGroup | None, group_id: str, names: TopicNames) -> DescribedGroup:
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
    if isinstance(group, (ShareGroup, StreamsGroup)):
        kind = "share" if isinstance(group, ShareGroup) else "streams"
        members = tuple(
            DescribedMember(m.member_id, None, m.client_id, m.client_host, b"", b"")
            for m in group.members.values()
        )
        return DescribedGroup(ErrorCode.NONE, group_id, group.state, kind, "", members)
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
    group: AnyGroup | None,
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


def as_share_group(group: AnyGroup | None, group_id: str, names: TopicNames) -> dict[str, Any]:
    """ShareGroupDescribe of whatever `group_id` names."""
    return share_group(group, names) if isinstance(group, ShareGroup) else not_found(group_id)


def listed(group: AnyGroup) -> ListedGroup:
    """A ListGroups entry."""
    if isinstance(group, ClassicGroup):
        return ListedGroup(group.group_id, group.protocol_type or "", group.state.value, "classic")
    if isinstance(group, ConsumerGroup):
        return ListedGroup(group.group_id, "consumer", group.state, "consumer")
    if isinstance(group, StreamsGroup):
        return ListedGroup(group.group_id, "streams", group.state, "streams")
    return ListedGroup(group.group_id, "share", group.state, "share")


# ---------------------------------------------------------------------------- streams groups


def failed_streams(group_id: str, error: ErrorCode, message: str | None = None) -> dict[str, Any]:
    """A StreamsGroupDescribe entry for a group that cannot be described."""
    return {
        "error_code": error,
        "error_message": message if message is not None else error.name,
        "group_id": group_id,
        "group_state": "",
        "group_epoch": -1,
        "assignment_epoch": -1,
        "topology": None,
        "members": [],
    }


def _tasks(active: Tasks) -> dict[str, Any]:
    return {"active_tasks": tasks_to_wire(active), "standby_tasks": [], "warmup_tasks": []}


def streams_group(group: StreamsGroup) -> dict[str, Any]:
    """One DescribedGroup of StreamsGroupDescribe."""
    decided = group.configured.partitions if group.configured is not None else {}

    def info(t: TopicInfo) -> dict[str, Any]:
        return {
            "name": t.name,
            "partitions": t.partitions or decided.get(t.name, 0),
            "replication_factor": t.replication_factor,
            "topic_configs": [{"key": k, "value": v} for k, v in t.configs],
        }

    topology = None
    if group.topology is not None:
        topology = {
            "epoch": group.topology.epoch,
            "subtopologies": [
                {
                    "subtopology_id": s.subtopology_id,
                    "source_topics": list(s.source_topics),
                    "repartition_sink_topics": list(s.repartition_sink_topics),
                    "state_changelog_topics": [info(t) for t in s.state_changelog_topics],
                    "repartition_source_topics": [info(t) for t in s.repartition_source_topics],
                }
                for s in group.topology.subtopologies
            ],
        }
    return {
        **_opening(group, group.assignment_epoch),
        "topology": topology,
        "members": [
            {
                "member_id": m.member_id,
                "member_epoch": m.member_epoch,
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "topology_epoch": m.topology_epoch,
                "process_id": m.process_id,
                "user_endpoint": None
                if m.user_endpoint is None
                else {"host": m.user_endpoint[0], "port": m.user_endpoint[1]},
                "client_tags": [{"key": k, "value": v} for k, v in m.client_tags],
                "task_offsets": [],
                "task_end_offsets": [],
                "assignment": _tasks(m.assigned),
                "target_assignment": _tasks(group.target.get(m.member_id, {})),
                "is_classic": False,
            }
            for m in group.members.values()
        ],
    }


def as_streams_group(group: AnyGroup | None, group_id: str) -> dict[str, Any]:
    """StreamsGroupDescribe of whatever `group_id` names."""
    if isinstance(group, StreamsGroup):
        return streams_group(group)
    if group is not None and not (isinstance(group, ClassicGroup) and not group.members):
        return failed_streams(
            group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group."
        )
    return failed_streams(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
