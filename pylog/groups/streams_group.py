"""The state of one streams group (KIP-1071): its topology, members and task assignments, as data
(`streams` holds the rules).

A task is a (subtopology id, partition) pair; `Tasks` maps a subtopology id to its partitions. The
topology is what the first member brought (Kafka 4.2 does not update it); `ConfiguredTopology` is
what the coordinator made of it against the topic metadata: the number of tasks of each
subtopology, or why it cannot be run yet (missing source topics, internal topics to create).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from pylog.groups.timers import Deadline

Tasks = dict[str, frozenset[int]]
"""Partitions by subtopology id (empty sets are dropped)."""


class MemberState(IntEnum):
    """Kafka's streams `MemberState` codes, as kept in StreamsGroupCurrentMemberAssignment."""

    STABLE = 1
    UNREVOKED_TASKS = 2
    UNRELEASED_TASKS = 3


class Status(IntEnum):
    """StreamsGroupHeartbeat status codes."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4
    ASSIGNMENT_DELAYED = 5


@dataclass(frozen=True)
class TopicInfo:
    """An internal topic of a subtopology; partitions 0 means "decided by the coordinator"."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    # (source topic indexes, repartition source topic indexes) of each copartition group
    copartition_groups: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]

    def required_topics(self) -> list[str]:
        """Every topic the topology names (source, repartition and changelog), once."""
        names: dict[str, None] = {}
        for s in self.subtopologies:
            for n in (
                *s.source_topics,
                *s.repartition_sink_topics,
                *(t.name for t in s.repartition_source_topics),
                *(t.name for t in s.state_changelog_topics),
            ):
                names.setdefault(n, None)
        return list(names)


@dataclass(frozen=True)
class InternalTopic:
    """An internal topic the coordinator asks to be created."""

    name: str
    partitions: int
    replication_factor: int  # -1: the broker's default
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ConfiguredTopology:
    """A topology checked against the topics: the task count of each subtopology when every
    source topic exists, the internal topics still to create, and the status that holds it back."""

    epoch: int
    tasks: dict[str, int] | None  # subtopology id -> number of tasks (None: not configurable)
    partitions: dict[str, int] = field(default_factory=dict)  # internal topic -> partition count
    to_create: tuple[InternalTopic, ...] = ()
    status: tuple[Status, str] | None = None

    @property
    def ready(self) -> bool:
        return self.tasks is not None and self.status is None


@dataclass
class StreamsMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Tasks = field(default_factory=dict)
    pending_revocation: Tasks = field(default_factory=dict)
    session: Deadline = field(default_factory=Deadline)
    revocation: Deadline = field(default_factory=Deadline)

    def metadata(self) -> tuple:
        """What StreamsGroupMemberMetadata persists: a change bumps the group epoch."""
        return (
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout_ms,
            self.topology_epoch,
            self.process_id,
            self.user_endpoint,
            self.client_tags,
        )


@dataclass
class StreamsGroup:
    group_id: str
    partition: int
    group_epoch: int = 0
    assignment_epoch: int = 0
    metadata_hash: int = 0
    validated_topology_epoch: int = -1
    topology: Topology | None = None
    configured: ConfiguredTopology | None = None  # not persisted: recomputed after loading
    members: dict[str, StreamsMember] = field(default_factory=dict)
    target: dict[str, Tasks] = field(default_factory=dict)  # by member, as of assignment_epoch
    shutdown_requested_by: str | None = None
    delay_seq: int | None = None  # the initial rebalance delay's timer, while it runs
    # Moves when a member with a user endpoint gets other tasks: members that saw an older one get
    # every endpoint's partitions again (interactive queries). Not persisted, as in Kafka.
    endpoint_epoch: int = 0

    @property
    def state(self) -> str:
        """Kafka's StreamsGroupState names."""
        if not self.members:
            return "Empty"
        if self.topology is None or self.topology.epoch != self.validated_topology_epoch:
            return "NotReady"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(
            m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
            for m in self.members.values()
        ):
            return "Reconciling"
        return "Stable"

    def owner_of(self, subtopology_id: str, partition: int) -> str | None:
        """The member holding an active task now (assigned or still revoking it)."""
        for m in self.members.values():
            if partition in m.assigned.get(subtopology_id, ()) or partition in m.pending_revocation.get(
                subtopology_id, ()
            ):
                return m.member_id
        return None
