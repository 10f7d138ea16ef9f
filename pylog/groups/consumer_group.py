"""The state of one consumer group (KIP-848) and its members, as data.

Theory of operation. A group has a *group epoch*, bumped whenever something that changes the
assignment changes: a member joins or leaves, a subscription changes, a subscribed topic gains
partitions. When the group epoch runs ahead of the *assignment epoch*, the coordinator runs the
assignor over all members and stores the new target, stamped with the group epoch. Each member
then reconciles towards its target at its own pace (`reconciliation`). The group's state is
derived, never stored: Empty (no members), Assigning (target behind the group epoch),
Reconciling (some member not yet at the target epoch), Stable.

Members speak ConsumerGroupHeartbeat, or the classic protocol when the group was converted from
a classic group (or a classic consumer joined it): see `migration`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pylog.groups.assignors import ASSIGNORS
from pylog.groups.group_records import Assignment
from pylog.groups.reconciliation import MemberAssignment, MemberState
from pylog.groups.timers import Deadline

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 300000
    assignment: MemberAssignment = field(default_factory=MemberAssignment)
    # Set for a member that speaks the classic protocol (JoinGroup / SyncGroup / Heartbeat).
    classic: ClassicMemberMetadata | None = None
    session: Deadline = field(default_factory=Deadline)
    revocation: Deadline = field(default_factory=Deadline)
    sync: Deadline = field(default_factory=Deadline)  # classic members: JoinGroup answered, no SyncGroup yet

    @property
    def member_epoch(self) -> int:
        return self.assignment.member_epoch

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def metadata_value(self) -> dict:
        return {
            "instance_id": self.instance_id,
            "rack_id": self.rack_id,
            "client_id": self.client_id,
            "client_host": self.client_host,
            "subscribed_topic_names": list(self.subscribed_topic_names),
            "subscribed_topic_regex": self.subscribed_topic_regex,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "server_assignor": self.server_assignor,
            "classic_member_metadata": None
            if self.classic is None
            else {
                "session_timeout_ms": self.classic.session_timeout_ms,
                "supported_protocols": [{"name": n, "metadata": m} for n, m in self.classic.protocols],
            },
        }


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """What a classic member of a consumer group joined with (Kafka's ClassicMemberMetadata)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass
class ConsumerGroup:
    group_id: str
    partition: int
    group_epoch: int = 0
    assignment_epoch: int = 0
    # when the target was last computed (0: never, or not since loading): the next one waits for
    # group.consumer.assignment.interval.ms after it
    assignment_timestamp_ms: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    # topic id -> partition count of every subscribed topic when the target was computed
    # (None after a replay: taken from the topics at the next heartbeat, without a new epoch)
    subscribed_partitions: dict[uuid.UUID, int] | None = field(default_factory=dict)
    # Regular expressions whose topics count in the assignment. A new regex is resolved one
    # heartbeat after it appears, as Kafka resolves them off the request path: the literal topics
    # of a new subscription are assigned first, the regex's topics in a later heartbeat.
    resolved_regexes: set[str] = field(default_factory=set)

    def all_classic_except(self, member_id: str) -> bool:
        """Whether every member other than `member_id` speaks the classic protocol."""
        return all(m.uses_classic_protocol for mid, m in self.members.items() if mid != member_id)

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            behind = m.member_epoch != self.assignment_epoch or m.assignment.state is not MemberState.STABLE
            if behind and m.member_epoch != STATIC_LEAVE_EPOCH:
                return "Reconciling"
        return "Stable"

    def holders(self, except_member: str) -> dict[tuple[uuid.UUID, int], str]:
        """Who owns or is still revoking each partition, other than `except_member`."""
        out: dict[tuple[uuid.UUID, int], str] = {}
        for mid, m in self.members.items():
            if mid == except_member:
                continue
            for a in (m.assignment.assigned, m.assignment.pending_revocation):
                for t, ps in a.items():
                    for p in ps:
                        out[(t, p)] = mid
        return out


GroupConfigs = Callable[[str], Mapping[str, str]]
"""A group's own configs (Kafka's GROUP config resource: `consumer.session.timeout.ms`, ...)."""


def no_group_configs(_group_id: str) -> Mapping[str, str]:
    return {}


@dataclass(frozen=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5000  # group.consumer.heartbeat.interval.ms
    assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors
    max_size: int = 2**31 - 1  # group.consumer.max.size
    # group.consumer.migration.policy: which online conversions are allowed
    migration_policy: str = "bidirectional"
    assignment_interval_ms: int = 1000  # group.consumer.assignment.interval.ms

    @classmethod
    def from_kafka(cls, props: Mapping[str, str]) -> ConsumerGroupConfig:
        assignors = tuple(
            a.strip() for a in props.get("group.consumer.assignors", "uniform,range").split(",") if a.strip()
        )
        unknown = [a for a in assignors if a not in ASSIGNORS]
        if unknown or not assignors:
            raise ValueError(
                f"group.consumer.assignors: unknown assignor(s) {unknown}; known: {sorted(ASSIGNORS)}"
            )
        policy = props.get("group.consumer.migration.policy", "bidirectional").strip().lower()
        if policy not in ("bidirectional", "upgrade", "downgrade", "disabled"):
            raise ValueError(
                f"group.consumer.migration.policy: {policy!r} is not one of "
                "bidirectional, upgrade, downgrade, disabled"
            )
        return cls(
            int(props.get("group.consumer.session.timeout.ms", 45000)),
            int(props.get("group.consumer.heartbeat.interval.ms", 5000)),
            assignors,
            int(props.get("group.consumer.max.size", 2**31 - 1)),
            policy,
            int(props.get("group.consumer.assignment.interval.ms", 1000)),
        )

    @property
    def upgrade_enabled(self) -> bool:
        return self.migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_enabled(self) -> bool:
        return self.migration_policy in ("bidirectional", "downgrade")


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
