"""The streams group protocol (KIP-1071, as Kafka 4.2 makes it generally available):
StreamsGroupHeartbeat, session and revocation timeouts, and the group's records in
`__consumer_offsets` (Kafka's types 17 and 19-23).

Theory of operation. A Kafka Streams member joins (epoch 0) with its application's topology: the
subtopologies, each reading source topics and repartition topics and writing changelog and
repartition topics. The first member's topology becomes the group's (Kafka 4.2 does not update a
topology: a different one at the same or a newer epoch is INVALID_REQUEST; an older epoch gets the
STALE_TOPOLOGY status). The coordinator configures the topology against the topic metadata at
every heartbeat: every source topic must exist (else MISSING_SOURCE_TOPICS), repartition topics
without a fixed partition count take the largest task count of the subtopologies writing to them,
copartitioned topics must agree, changelog topics get one partition per task of their
subtopology; internal topics that do not exist yet are reported as MISSING_INTERNAL_TOPICS and
handed to the caller to create (Kafka's coordinator creates them through the broker). Only a
ready topology has tasks: subtopology `s` has as many tasks as its largest source topic has
partitions, task `(s, p)` reads partition `p` of each of them.

Any change of a member's metadata, of the topic metadata (a hash over the topology's topics) or of
whether the topology is ready bumps the group epoch (from 0 straight to 2, as Kafka); the next
heartbeat then computes a new target assignment of the active tasks with a sticky assignor
(`assign`): every task goes to one member, members keep what they had as far as balance allows.
Standby and warm-up tasks are not assigned (`group.streams.num.standby.replicas` is accepted).
The first member of an empty group starts `group.streams.initial.rebalance.delay.ms`: until it
ends no target is computed (its members get no tasks, status ASSIGNMENT_DELAYED), so members
starting together get their tasks in one rebalance.
Each member then reconciles towards its target as KIP-1071 describes (Kafka's streams
`CurrentAssignmentBuilder`): tasks leaving it are revoked first, at its current epoch, until it
stops reporting them (for at most its rebalance timeout, else it is fenced); tasks still owned by
another member are held back (UNRELEASED_TASKS) until released; otherwise it moves to the target
epoch. A member that stops heartbeating for `group.streams.session.timeout.ms` is fenced and the
group epoch bumps, so the others take its tasks over. Time and topic metadata are passed in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pylog.groups.consumer import GroupConfigs, TopicsView, no_group_configs
from pylog.groups.group_records import (
    STREAMS_GROUP_CURRENT_MEMBER,
    STREAMS_GROUP_MEMBER_METADATA,
    STREAMS_GROUP_METADATA,
    STREAMS_GROUP_TARGET_MEMBER,
    STREAMS_GROUP_TARGET_METADATA,
    STREAMS_GROUP_TOPOLOGY,
    RecordKey,
    decode_value,
    encode_key,
    encode_value,
)
from pylog.groups.registry import GroupRegistry
from pylog.groups.streams_group import (
    ConfiguredTopology,
    InternalTopic,
    MemberState,
    Status,
    StreamsGroup,
    StreamsMember,
    Subtopology,
    Tasks,
    TopicInfo,
    Topology,
)
from pylog.groups.timers import Timer, TimerKind
from pylog.groups.types import CoordinatorRecord, Output, int_settings
from pylog.protocol.errors import ErrorCode

LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2


@dataclass(frozen=True)
class StreamsGroupConfig:
    session_timeout_ms: int = 45000  # group.streams.session.timeout.ms
    heartbeat_interval_ms: int = 5000  # group.streams.heartbeat.interval.ms
    max_size: int = 2147483647  # group.streams.max.size
    num_standby_replicas: int = 0  # group.streams.num.standby.replicas (accepted, not assigned)
    initial_rebalance_delay_ms: int = 3000  # group.streams.initial.rebalance.delay.ms

    @classmethod
    def from_kafka(cls, props: Mapping[str, str]) -> StreamsGroupConfig:
        """Build from broker properties (`group.streams.*`); unrelated keys are ignored."""
        return cls(**int_settings(cls, props, "group.streams."))


@dataclass(frozen=True)
class StreamsHeartbeat:
    """A StreamsGroupHeartbeat request, as the coordinator reads it (None: unchanged)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Topology | None = None
    active_tasks: Tasks | None = None
    standby_tasks: Tasks | None = None
    warmup_tasks: Tasks | None = None
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""
    endpoint_information_epoch: int = 0
    # fields Kafka 4.2 refuses (not supported yet): set when the request carried them
    task_offsets: bool = False
    source_topic_regex: bool = False


@dataclass(frozen=True)
class HeartbeatResult:
    """The response body, and the internal topics the broker should create."""

    response: dict[str, Any]
    to_create: tuple[InternalTopic, ...] = ()


def error_response(error: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "error_message": message if message is not None else error.name,
        "member_id": "",
        "member_epoch": 0,
        "heartbeat_interval_ms": 0,
        "acceptable_recovery_lag": 0,
        "task_offset_interval_ms": 0,
        "status": None,
        "active_tasks": None,
        "standby_tasks": None,
        "warmup_tasks": None,
        "endpoint_information_epoch": 0,
        "partitions_by_user_endpoint": None,
    }


def validate(hb: StreamsHeartbeat) -> tuple[ErrorCode, str | None]:
    """Kafka's request checks (GroupCoordinatorService), unsupported features first."""
    e = ErrorCode.INVALID_REQUEST
    if hb.instance_id is not None:
        return e, "Static membership is not yet supported."
    if hb.task_offsets:
        return e, "TaskOffsets are not supported yet."
    if hb.warmup_tasks:
        return e, "WarmupTasks are not supported yet."
    if hb.source_topic_regex:
        return e, "Regular expressions for source topics are not supported yet."
    if not hb.member_id:
        return e, "MemberId can't be empty."
    if not hb.group_id:
        return e, "GroupId can't be empty."
    if hb.rack_id == "":
        return e, "RackId can't be empty."
    if hb.member_epoch == 0:
        if hb.rebalance_timeout_ms == -1:
            return e, "RebalanceTimeoutMs must be provided in first request."
        for name, tasks in (
            ("ActiveTasks", hb.active_tasks),
            ("StandbyTasks", hb.standby_tasks),
            ("WarmupTasks", hb.warmup_tasks),
        ):
            if tasks:
                return e, f"{name} must be empty when (re-)joining."
        if hb.topology is None:
            return e, "Topology must be non-null when (re-)joining."
        if (msg := _topology_error(hb.topology)) is not None:
            return ErrorCode.STREAMS_INVALID_TOPOLOGY, msg
    elif hb.member_epoch == LEAVE_STATIC_EPOCH:
        return e, "InstanceId can't be null."
    elif hb.member_epoch < LEAVE_STATIC_EPOCH:
        return e, f"MemberEpoch is {hb.member_epoch}, but must be greater than or equal to -2."
    kinds = (hb.active_tasks, hb.standby_tasks, hb.warmup_tasks)
    if any(k is not None for k in kinds) and any(k is None for k in kinds):
        return e, "If one task-type is non-null, all must be non-null."
    if hb.member_epoch != 0 and hb.topology is not None:
        return e, "Topology can only be provided when (re-)joining."
    return ErrorCode.NONE, None


def _topology_error(topology: Topology) -> str | None:
    """Kafka's `throwIfInvalidTopology`: repartition sources must be written by some subtopology."""
    sinks = {t for s in topology.subtopologies for t in s.repartition_sink_topics}
    for s in topology.subtopologies:
        for t in s.repartition_source_topics:
            if t.name not in sinks:
                return (
                    f"Repartition source topic {t.name} is not a repartition sink topic of any subtopology."
                )
    return None


# ---------------------------------------------------------------------------- topology


def metadata_hash(topology: Topology | None, topics: TopicsView) -> int:
    """A signed 64-bit hash of what the topology's topics look like now (id, partition count)."""
    if topology is None:
        return 0
    h = hashlib.blake2b(digest_size=8)
    for name in sorted(topology.required_topics()):
        t = topics.get(name)
        h.update(f"{name}\0{t[0] if t else ''}\0{t[1] if t else -1}\n".encode())
    return int.from_bytes(h.digest(), "big", signed=True)


def configure(topology: Topology, topics: TopicsView) -> ConfiguredTopology:
    """The topology against the topics (Kafka's `InternalTopicManager.configureTopics`)."""
    missing = sorted({t for s in topology.subtopologies for t in s.source_topics if t not in topics})
    if missing:
        return ConfiguredTopology(
            topology.epoch,
            None,
            status=(Status.MISSING_SOURCE_TOPICS, f"Source topics {', '.join(missing)} are missing."),
        )
    decided: dict[str, int] = {}

    def count(name: str) -> int | None:
        if name in topics:
            return topics[name][1]
        return decided.get(name)

    def tasks_of(s: Subtopology) -> int | None:
        counts = [count(t) for t in (*s.source_topics, *(r.name for r in s.repartition_source_topics))]
        return (
            None if not counts or any(c is None for c in counts) else max(c for c in counts if c is not None)
        )

    for s in topology.subtopologies:
        for r in s.repartition_source_topics:
            if r.partitions > 0:
                decided[r.name] = r.partitions
    flexible = {
        r.name for s in topology.subtopologies for r in s.repartition_source_topics if r.partitions <= 0
    }
    changed = True
    while changed:  # a repartition topic takes the largest task count of the subtopologies writing it
        changed = False
        for name in flexible:
            writers = [tasks_of(s) for s in topology.subtopologies if name in s.repartition_sink_topics]
            known = [w for w in writers if w is not None]
            if known and decided.get(name) != max(known):
                decided[name], changed = max(known), True
    for s in topology.subtopologies:
        for sources, repartitions in s.copartition_groups:
            names = [s.source_topics[i] for i in sources if i < len(s.source_topics)]
            names += [
                s.repartition_source_topics[i].name
                for i in repartitions
                if i < len(s.repartition_source_topics)
            ]
            fixed = {n: count(n) for n in names if n not in flexible or n in topics}
            if len({c for c in fixed.values() if c is not None}) > 1:
                listed = ", ".join(sorted(fixed))
                return ConfiguredTopology(
                    topology.epoch,
                    None,
                    status=(
                        Status.INCORRECTLY_PARTITIONED_TOPICS,
                        f"Following topics do not have the same number of partitions: [{listed}]",
                    ),
                )
            target = next((c for c in fixed.values() if c is not None), None)
            if target is None:
                target = max((decided.get(n, 0) for n in names), default=0) or None
            for n in names:
                if n in flexible and n not in topics and target is not None:
                    decided[n] = target
    tasks: dict[str, int] = {}
    for s in topology.subtopologies:
        num_tasks = tasks_of(s)
        if num_tasks is None:
            undecided = [r.name for r in s.repartition_source_topics if count(r.name) is None]
            return ConfiguredTopology(
                topology.epoch,
                None,
                status=(
                    Status.INCORRECTLY_PARTITIONED_TOPICS,
                    f"Number of partitions could not be decided for topics {', '.join(undecided)}.",
                ),
            )
        tasks[s.subtopology_id] = num_tasks
        for c in s.state_changelog_topics:
            decided.setdefault(c.name, c.partitions if c.partitions > 0 else num_tasks)
    to_create: dict[str, InternalTopic] = {}
    for s in topology.subtopologies:
        for info in (*s.repartition_source_topics, *s.state_changelog_topics):
            want = decided.get(info.name, count(info.name) or 0)
            if info.name in topics:
                have = topics[info.name][1]
                if have != want:
                    return ConfiguredTopology(
                        topology.epoch,
                        None,
                        status=(
                            Status.INCORRECTLY_PARTITIONED_TOPICS,
                            f"Existing topic {info.name} has different number of partitions: expected "
                            f"{want}, found {have}",
                        ),
                    )
                continue
            to_create[info.name] = InternalTopic(info.name, want, info.replication_factor or -1, info.configs)
    status = None
    if to_create:
        status = (
            Status.MISSING_INTERNAL_TOPICS,
            f"Internal topics are missing: [{', '.join(sorted(to_create))}]",
        )
    return ConfiguredTopology(topology.epoch, tasks, dict(decided), tuple(to_create.values()), status)


# ---------------------------------------------------------------------------- assignment


def assign(previous: Mapping[str, Tasks], tasks: Mapping[str, int]) -> dict[str, Tasks]:
    """Every active task to one member, balanced (counts differ by at most one), members keeping
    the tasks of `previous` (their last target) as far as balance allows."""
    members = sorted(previous)
    if not members:
        return {}
    every = [(s, p) for s in sorted(tasks) for p in range(tasks[s])]
    base, extra = divmod(len(every), len(members))
    kept: dict[str, list[tuple[str, int]]] = {m: [] for m in members}
    taken: set[tuple[str, int]] = set()
    for m in sorted(members, key=lambda m: -sum(len(ps) for ps in previous[m].values())):
        cap = base + 1 if extra > 0 else base
        for s in sorted(previous[m]):
            for p in sorted(previous[m][s]):
                if len(kept[m]) < cap and p < tasks.get(s, 0) and (s, p) not in taken:
                    kept[m].append((s, p))
                    taken.add((s, p))
        if len(kept[m]) > base:
            extra -= 1
    free = [t for t in every if t not in taken]
    for t in free:
        m = min(members, key=lambda m: (len(kept[m]) >= base + (1 if extra > 0 else 0), len(kept[m]), m))
        if len(kept[m]) >= base:
            extra -= 1
        kept[m].append(t)
    out: dict[str, Tasks] = {}
    for m, ts in kept.items():
        by: dict[str, set[int]] = {}
        for s, p in ts:
            by.setdefault(s, set()).add(p)
        out[m] = {s: frozenset(ps) for s, ps in by.items()}
    return out


def _minus(a: Tasks, b: Tasks) -> Tasks:
    return _norm({s: ps - b.get(s, frozenset()) for s, ps in a.items()})


def _and(a: Tasks, b: Tasks) -> Tasks:
    return _norm({s: ps & b.get(s, frozenset()) for s, ps in a.items()})


def _or(a: Tasks, b: Tasks) -> Tasks:
    return _norm({s: a.get(s, frozenset()) | b.get(s, frozenset()) for s in {*a, *b}})


def _norm(t: Mapping[str, Iterable[int]]) -> Tasks:
    return {s: frozenset(ps) for s, ps in t.items() if ps}


def _overlaps(a: Tasks, b: Tasks) -> bool:
    return any(ps & b.get(s, frozenset()) for s, ps in a.items())


def tasks_to_wire(tasks: Tasks) -> list[dict[str, Any]]:
    return [{"subtopology_id": s, "partitions": sorted(ps)} for s, ps in sorted(tasks.items())]


def tasks_from_wire(entries: Any) -> Tasks | None:
    if entries is None:
        return None
    by: dict[str, set[int]] = {}
    for e in entries:
        by.setdefault(e.subtopology_id, set()).update(e.partitions)
    return _norm(by)


def topology_from_wire(t: Any) -> Topology:
    """The request's (or a record's) topology as data."""

    def info(i: Any) -> TopicInfo:
        configs = tuple((c.key, c.value) for c in (i.topic_configs or ()))
        return TopicInfo(i.name, i.partitions, i.replication_factor, configs)

    return Topology(
        t.epoch,
        tuple(
            Subtopology(
                s.subtopology_id,
                tuple(s.source_topics),
                tuple(s.repartition_sink_topics),
                tuple(info(c) for c in s.state_changelog_topics),
                tuple(info(r) for r in s.repartition_source_topics),
                tuple(
                    (tuple(g.source_topics), tuple(g.repartition_source_topics)) for g in s.copartition_groups
                ),
            )
            for s in t.subtopologies
        ),
    )


def topology_to_record(t: Topology) -> dict[str, Any]:
    def info(i: TopicInfo) -> dict[str, Any]:
        return {
            "name": i.name,
            "partitions": i.partitions,
            "replication_factor": i.replication_factor,
            "topic_configs": [{"key": k, "value": v} for k, v in i.configs],
        }

    return {
        "epoch": t.epoch,
        "subtopologies": [
            {
                "subtopology_id": s.subtopology_id,
                "source_topics": list(s.source_topics),
                "source_topic_regex": [],
                "state_changelog_topics": [info(c) for c in s.state_changelog_topics],
                "repartition_sink_topics": list(s.repartition_sink_topics),
                "repartition_source_topics": [info(r) for r in s.repartition_source_topics],
                "copartition_groups": [
                    {"source_topics": list(a), "source_topic_regex": [], "repartition_source_topics": list(b)}
                    for a, b in s.copartition_groups
                ],
            }
            for s in t.subtopologies
        ],
    }


# ---------------------------------------------------------------------------- the protocol


class StreamsProtocol:
    """KIP-1071 membership over the streams groups of the registry."""

    def __init__(self, registry: GroupRegistry, config: StreamsGroupConfig) -> None:
        self.reg = registry
        self.config = config
        self.group_configs: GroupConfigs = no_group_configs
        registry.on_timer(TimerKind.STREAMS_SESSION, self._session_live, self._on_session_timer)
        registry.on_timer(TimerKind.STREAMS_REVOCATION, self._revocation_live, self._on_revocation_timer)
        registry.on_timer(TimerKind.STREAMS_INITIAL_DELAY, self._delay_live, self._on_delay_timer)

    def group(self, group_id: str) -> StreamsGroup | None:
        return self.reg.get(group_id, StreamsGroup)

    def session_timeout_ms(self, group_id: str) -> int:
        v = self.group_configs(group_id).get("streams.session.timeout.ms")
        return int(v) if v is not None else self.config.session_timeout_ms

    def heartbeat_interval_ms(self, group_id: str) -> int:
        v = self.group_configs(group_id).get("streams.heartbeat.interval.ms")
        return int(v) if v is not None else self.config.heartbeat_interval_ms

    def initial_rebalance_delay_ms(self, group_id: str) -> int:
        v = self.group_configs(group_id).get("streams.initial.rebalance.delay.ms")
        return int(v) if v is not None else self.config.initial_rebalance_delay_ms

    # ------------------------------------------------------------------ heartbeat

    def heartbeat(
        self,
        group: StreamsGroup | None,
        hb: StreamsHeartbeat,
        topics: TopicsView,
        *,
        now_ms: int,
        out: Output,
    ) -> None:
        """StreamsGroupHeartbeat on a validated request; `out.response` is a HeartbeatResult."""
        if hb.member_epoch == LEAVE_EPOCH:
            self._leave(group, hb, out)
            return
        joining = hb.member_epoch == 0
        if group is None:
            if not joining:
                out.response = HeartbeatResult(
                    error_response(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {hb.group_id} not found.")
                )
                return
            group = StreamsGroup(hb.group_id, self.reg.partition_for(hb.group_id))  # kept once joined
        member = group.members.get(hb.member_id)
        if member is None:
            if not joining:
                out.response = HeartbeatResult(
                    error_response(
                        ErrorCode.UNKNOWN_MEMBER_ID,
                        f"Member {hb.member_id} is not a member of group {hb.group_id}.",
                    )
                )
                return
            if len(group.members) >= self.config.max_size:
                out.response = HeartbeatResult(
                    error_response(
                        ErrorCode.GROUP_MAX_SIZE_REACHED,
                        "The streams group has reached its maximum capacity of "
                        f"{self.config.max_size} members.",
                    )
                )
                return
        elif not joining and (error := self._epoch_error(member, hb)) is not None:
            out.response = HeartbeatResult(error_response(ErrorCode.FENCED_MEMBER_EPOCH, error))
            return
        # A different topology at the group's epoch or later cannot be taken (Kafka 4.2).
        if (
            hb.topology is not None
            and group.topology is not None
            and hb.topology.epoch >= group.topology.epoch
            and hb.topology != group.topology
        ):
            out.response = HeartbeatResult(
                error_response(ErrorCode.INVALID_REQUEST, "Topology updates are not supported yet.")
            )
            return
        current = group.configured  # the owned tasks must exist (checked before any change)
        if current is not None and current.ready and current.tasks is not None:
            for owned in (hb.active_tasks, hb.standby_tasks, hb.warmup_tasks):
                if (msg := _invalid_tasks(owned, current.tasks)) is not None:
                    out.response = HeartbeatResult(error_response(ErrorCode.INVALID_REQUEST, msg))
                    return
        created = self.group(group.group_id) is not group
        if created:
            self.reg.put(group)
        was_empty = not group.members
        new = member is None
        if member is None:
            member = group.members[hb.member_id] = StreamsMember(hb.member_id)
        before_meta = None if new else member.metadata()
        before_tasks = (dict(member.assigned), member.member_epoch)
        if hb.rack_id is not None:
            member.rack_id = hb.rack_id
        if hb.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = hb.rebalance_timeout_ms
        if hb.topology is not None:
            member.topology_epoch = hb.topology.epoch
        member.client_id, member.client_host = hb.client_id, hb.client_host
        if hb.process_id is not None:
            member.process_id = hb.process_id
        if hb.client_tags is not None:
            member.client_tags = hb.client_tags
        if hb.user_endpoint is not None:
            member.user_endpoint = hb.user_endpoint
        bump = False
        if member.metadata() != before_meta:
            out.records.append(self._member_record(group, member))
            bump = True
        if group.topology is None and hb.topology is not None:
            group.topology = hb.topology
            out.records.append(
                self._record(group, STREAMS_GROUP_TOPOLOGY, None, topology_to_record(hb.topology))
            )
        assert group.topology is not None  # every member joined with one
        status: list[dict[str, Any]] = []
        if member.topology_epoch < group.topology.epoch:
            status.append(
                _status(
                    Status.STALE_TOPOLOGY,
                    f"The member's topology epoch {member.topology_epoch} is behind the group's "
                    f"topology epoch {group.topology.epoch}.",
                )
            )
        mhash = metadata_hash(group.topology, topics)
        if mhash != group.metadata_hash or group.configured is None:
            if mhash != group.metadata_hash:
                bump = True
            group.metadata_hash = mhash
            group.configured = configure(group.topology, topics)
        configured = group.configured
        validated = group.topology.epoch if configured.ready else -1
        if validated != group.validated_topology_epoch:
            group.validated_topology_epoch = validated
            bump = True
        if bump:
            self._bump(group, out)
        if (
            was_empty
            and group.delay_seq is None
            and (delay := self.initial_rebalance_delay_ms(group.group_id)) > 0
        ):
            # the first member of a group waits for the others to join before tasks are assigned
            group.delay_seq = self.reg.push(now_ms + delay, TimerKind.STREAMS_INITIAL_DELAY, group.group_id)
        target_epoch, target = group.assignment_epoch, group.target.get(member.member_id, {})
        if group.group_epoch > group.assignment_epoch:
            if group.delay_seq is not None:
                target_epoch, target = max(1, group.assignment_epoch), {}
                status.append(
                    _status(
                        Status.ASSIGNMENT_DELAYED,
                        "Assignment delayed due to the configured initial rebalance delay.",
                    )
                )
            else:
                self._update_target(group, out)
                target_epoch, target = group.assignment_epoch, group.target.get(member.member_id, {})
        self._reconcile(group, member, hb.active_tasks, target_epoch, target, now_ms, out)
        self.reg.arm(
            member.session,
            now_ms + self.session_timeout_ms(group.group_id),
            TimerKind.STREAMS_SESSION,
            group.group_id,
            member.member_id,
        )
        if hb.shutdown_application and group.shutdown_requested_by is None:
            group.shutdown_requested_by = member.member_id
        to_create: tuple[InternalTopic, ...] = ()
        if configured.status is not None:
            status.append(_status(*configured.status))
            to_create = configured.to_create
        if group.shutdown_requested_by is not None:
            status.append(
                _status(
                    Status.SHUTDOWN_APPLICATION,
                    f"Streams group member {group.shutdown_requested_by} encountered a fatal error and "
                    f"requested a shutdown for the entire application.",
                )
            )
        response = _ok(
            member.member_id, member.member_epoch, self.heartbeat_interval_ms(group.group_id), status
        )
        if joining or (member.assigned, member.member_epoch) != before_tasks:
            response["active_tasks"] = tasks_to_wire(member.assigned)
            response["standby_tasks"] = []
            response["warmup_tasks"] = []
            if member.user_endpoint is not None:
                group.endpoint_epoch += 1
        if group.endpoint_epoch != hb.endpoint_information_epoch:
            response["partitions_by_user_endpoint"] = endpoint_partitions(group, member, topics)
        response["endpoint_information_epoch"] = 0 if created else group.endpoint_epoch
        out.response = HeartbeatResult(response, to_create)

    @staticmethod
    def _epoch_error(member: StreamsMember, hb: StreamsHeartbeat) -> str | None:
        if hb.member_epoch > member.member_epoch:
            return (
                f"The streams group member has a greater member epoch ({hb.member_epoch}) than the one "
                f"known by the group coordinator ({member.member_epoch}). The member must abandon all "
                f"its partitions and rejoin."
            )
        if hb.member_epoch < member.member_epoch:
            owned = hb.active_tasks
            if hb.member_epoch != member.previous_member_epoch or (
                owned is not None and _minus(owned, member.assigned)
            ):
                return (
                    f"The streams group member has a smaller member epoch ({hb.member_epoch}) than the one "
                    f"known by the group coordinator ({member.member_epoch}). The member must abandon all "
                    f"its partitions and rejoin."
                )
        return None

    def _leave(self, group: StreamsGroup | None, hb: StreamsHeartbeat, out: Output) -> None:
        if group is None:
            out.response = HeartbeatResult(
                error_response(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {hb.group_id} not found.")
            )
            return
        if hb.shutdown_application and group.shutdown_requested_by is None:
            group.shutdown_requested_by = hb.member_id
        member = group.members.get(hb.member_id)
        if member is None:
            out.response = HeartbeatResult(
                error_response(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {hb.member_id} is not a member of group {hb.group_id}.",
                )
            )
            return
        self.fence(group, member, out)
        response = _ok(hb.member_id, hb.member_epoch, 0, [])
        out.response = HeartbeatResult(response)

    def fence(self, group: StreamsGroup, member: StreamsMember, out: Output) -> None:
        """Remove `member` (left, session expired, revocation timed out) and bump the group epoch."""
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        member.session.clear()
        member.revocation.clear()
        for rt in (STREAMS_GROUP_CURRENT_MEMBER, STREAMS_GROUP_TARGET_MEMBER, STREAMS_GROUP_MEMBER_METADATA):
            out.records.append(
                CoordinatorRecord(group.partition, encode_key(rt, group.group_id, member.member_id), None)
            )
        if not group.members:
            group.shutdown_requested_by = None
        self._bump(group, out)

    def _bump(self, group: StreamsGroup, out: Output) -> None:
        group.group_epoch = 2 if group.group_epoch == 0 else group.group_epoch + 1
        out.records.append(
            self._record(
                group,
                STREAMS_GROUP_METADATA,
                None,
                {
                    "epoch": group.group_epoch,
                    "metadata_hash": group.metadata_hash,
                    "validated_topology_epoch": group.validated_topology_epoch,
                },
            )
        )

    def _update_target(self, group: StreamsGroup, out: Output) -> None:
        """The target assignment for the group epoch, written as a delta (changed members only)."""
        configured = group.configured
        if configured is not None and configured.ready and configured.tasks is not None:
            target = assign({m: group.target.get(m, {}) for m in group.members}, configured.tasks)
        else:
            target = {m: {} for m in group.members}
        for mid, tasks in target.items():
            if group.target.get(mid) != tasks:
                out.records.append(
                    self._record(
                        group,
                        STREAMS_GROUP_TARGET_MEMBER,
                        mid,
                        {"active_tasks": tasks_to_wire(tasks), "standby_tasks": [], "warmup_tasks": []},
                    )
                )
        group.target = target
        group.assignment_epoch = group.group_epoch
        out.records.append(
            self._record(
                group, STREAMS_GROUP_TARGET_METADATA, None, {"assignment_epoch": group.assignment_epoch}
            )
        )

    def _reconcile(
        self,
        group: StreamsGroup,
        member: StreamsMember,
        owned: Tasks | None,
        target_epoch: int,
        target: Tasks,
        now_ms: int,
        out: Output,
    ) -> None:
        """Move `member` towards its target (Kafka's streams CurrentAssignmentBuilder, active tasks)."""
        if member.member_epoch == target_epoch and member.state is MemberState.STABLE:
            return
        before = (
            member.member_epoch,
            member.previous_member_epoch,
            member.state,
            member.assigned,
            member.pending_revocation,
        )
        if member.state is MemberState.UNREVOKED_TASKS:
            if owned is None or _overlaps(owned, member.pending_revocation):
                return
            self._next(group, member, member.member_epoch + 1, owned, target_epoch, target)
        else:
            self._next(group, member, member.member_epoch, owned, target_epoch, target)
        after = (
            member.member_epoch,
            member.previous_member_epoch,
            member.state,
            member.assigned,
            member.pending_revocation,
        )
        if after == before:
            return
        out.records.append(
            self._record(
                group,
                STREAMS_GROUP_CURRENT_MEMBER,
                member.member_id,
                {
                    "member_epoch": member.member_epoch,
                    "previous_member_epoch": member.previous_member_epoch,
                    "state": int(member.state),
                    "active_tasks": tasks_to_wire(member.assigned),
                    "standby_tasks": [],
                    "warmup_tasks": [],
                    "active_tasks_pending_revocation": tasks_to_wire(member.pending_revocation),
                    "standby_tasks_pending_revocation": [],
                    "warmup_tasks_pending_revocation": [],
                },
            )
        )
        if member.state is MemberState.UNREVOKED_TASKS:
            timeout = (
                member.rebalance_timeout_ms
                if member.rebalance_timeout_ms > 0
                else self.session_timeout_ms(group.group_id)
            )
            member.revocation.clear()
            self.reg.arm(
                member.revocation,
                now_ms + timeout,
                TimerKind.STREAMS_REVOCATION,
                group.group_id,
                member.member_id,
            )
        else:
            member.revocation.clear()

    def _next(
        self,
        group: StreamsGroup,
        member: StreamsMember,
        epoch: int,
        owned: Tasks | None,
        target_epoch: int,
        target: Tasks,
    ) -> None:
        current = member.assigned  # what it revoked is gone already
        keep = _and(current, target)
        revoke = _minus(current, keep)
        owners: dict[tuple[str, int], str] = {}
        for m in group.members.values():
            if m is member:
                continue
            for tasks in (m.assigned, m.pending_revocation):
                for s, ps in tasks.items():
                    for p in ps:
                        owners[(s, p)] = m.member_id
        pending = _minus(target, keep)
        unreleased = {s: frozenset(p for p in ps if (s, p) in owners) for s, ps in pending.items()}
        unreleased = _norm(unreleased)
        pending = _minus(pending, unreleased)
        if revoke and (owned is None or _overlaps(owned, revoke)):
            member.state = MemberState.UNREVOKED_TASKS
            member.assigned, member.pending_revocation = keep, revoke
            if epoch != member.member_epoch:
                member.previous_member_epoch, member.member_epoch = member.member_epoch, epoch
            return
        member.state = MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE
        member.assigned, member.pending_revocation = _or(keep, pending), {}
        if member.member_epoch != target_epoch:
            member.previous_member_epoch, member.member_epoch = member.member_epoch, target_epoch

    # ------------------------------------------------------------------ offsets

    @staticmethod
    def validate_offset_commit(
        group: StreamsGroup, member_id: str, member_epoch: int, api_version: int
    ) -> ErrorCode:
        """The error of an OffsetCommit to a streams group (NONE = accept)."""
        if member_epoch < 0 and not member_id:
            return ErrorCode.NONE if not group.members else ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch not in (member.member_epoch, member.previous_member_epoch):
            return ErrorCode.STALE_MEMBER_EPOCH if api_version >= 9 else ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    @staticmethod
    def source_topics(group: StreamsGroup) -> frozenset[str]:
        if group.topology is None or not group.members:
            return frozenset()
        return frozenset(
            t
            for s in group.topology.subtopologies
            for t in (*s.source_topics, *(r.name for r in s.repartition_source_topics))
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
            self.fence(group, m, out)

    def _revocation_live(self, t: Timer) -> bool:
        group = self.group(t.group_id)
        m = group.members.get(t.member_id) if group is not None else None
        return m is not None and m.revocation.seq == t.seq

    def _on_revocation_timer(self, t: Timer, now_ms: int, out: Output) -> None:
        group = self.group(t.group_id)
        assert group is not None
        m = group.members[t.member_id]
        if self.reg.due(m.revocation, t, now_ms) and m.state is MemberState.UNREVOKED_TASKS:
            self.fence(group, m, out)

    def _delay_live(self, t: Timer) -> bool:
        group = self.group(t.group_id)
        return group is not None and group.delay_seq == t.seq

    def _on_delay_timer(self, t: Timer, now_ms: int, out: Output) -> None:
        group = self.group(t.group_id)
        assert group is not None
        group.delay_seq = None
        if group.members and group.group_epoch > group.assignment_epoch:
            self._update_target(group, out)

    # ------------------------------------------------------------------ delete / loading

    def delete(self, group: StreamsGroup, out: Output) -> ErrorCode:
        """DeleteGroups of an empty streams group (its offsets are the caller's)."""
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        for rt in (STREAMS_GROUP_TARGET_METADATA, STREAMS_GROUP_TOPOLOGY, STREAMS_GROUP_METADATA):
            out.records.append(CoordinatorRecord(group.partition, encode_key(rt, group.group_id), None))
        self.reg.remove(group.group_id)
        return ErrorCode.NONE

    def replay(self, k: RecordKey, value: bytes | None, partition: int) -> None:
        group = self.group(k.group_id)
        mid = k.member_id or ""
        if value is None:
            if group is None:
                return
            if k.record_type == STREAMS_GROUP_METADATA:
                self.reg.remove(k.group_id)
            elif k.record_type == STREAMS_GROUP_MEMBER_METADATA:
                group.members.pop(mid, None)
            elif k.record_type == STREAMS_GROUP_TARGET_MEMBER:
                group.target.pop(mid, None)
            elif k.record_type == STREAMS_GROUP_TOPOLOGY:
                group.topology = None
            return
        v = decode_value(k.record_type, bytes(value))
        if v is None:  # a record type this version does not read
            return
        if group is None:
            group = StreamsGroup(k.group_id, partition)
            self.reg.put(group)
        rt = k.record_type
        if rt == STREAMS_GROUP_METADATA:
            group.group_epoch, group.metadata_hash = v.epoch, v.metadata_hash
            group.validated_topology_epoch = v.validated_topology_epoch
        elif rt == STREAMS_GROUP_TARGET_METADATA:
            group.assignment_epoch = v.assignment_epoch
        elif rt == STREAMS_GROUP_TOPOLOGY:
            group.topology = topology_from_wire(v)
        elif rt == STREAMS_GROUP_TARGET_MEMBER:
            group.target[mid] = tasks_from_wire(v.active_tasks) or {}
        elif rt in (STREAMS_GROUP_MEMBER_METADATA, STREAMS_GROUP_CURRENT_MEMBER):
            m = group.members.setdefault(mid, StreamsMember(mid))
            if rt == STREAMS_GROUP_MEMBER_METADATA:
                m.instance_id, m.rack_id = v.instance_id, v.rack_id
                m.client_id, m.client_host = v.client_id, v.client_host
                m.rebalance_timeout_ms, m.topology_epoch, m.process_id = (
                    v.rebalance_timeout_ms,
                    v.topology_epoch,
                    v.process_id,
                )
                m.user_endpoint = (
                    None if v.user_endpoint is None else (v.user_endpoint.host, v.user_endpoint.port)
                )
                m.client_tags = tuple((kv.key, kv.value) for kv in v.client_tags)
            else:
                m.member_epoch, m.previous_member_epoch = v.member_epoch, v.previous_member_epoch
                m.state = MemberState(v.state) if v.state in (1, 2, 3) else MemberState.STABLE
                m.assigned = tasks_from_wire(v.active_tasks) or {}
                m.pending_revocation = tasks_from_wire(v.active_tasks_pending_revocation) or {}

    def loaded(self, group: StreamsGroup, now_ms: int) -> None:
        """Members of a loaded group get a fresh session; the topology is configured again."""
        group.configured = None
        timeout = self.session_timeout_ms(group.group_id)
        for m in group.members.values():
            self.reg.arm(m.session, now_ms + timeout, TimerKind.STREAMS_SESSION, group.group_id, m.member_id)
            if m.state is MemberState.UNREVOKED_TASKS and m.rebalance_timeout_ms > 0:
                self.reg.arm(
                    m.revocation,
                    now_ms + m.rebalance_timeout_ms,
                    TimerKind.STREAMS_REVOCATION,
                    group.group_id,
                    m.member_id,
                )

    def _member_record(self, group: StreamsGroup, m: StreamsMember) -> CoordinatorRecord:
        return self._record(
            group,
            STREAMS_GROUP_MEMBER_METADATA,
            m.member_id,
            {
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rebalance_timeout_ms": m.rebalance_timeout_ms,
                "topology_epoch": m.topology_epoch,
                "process_id": m.process_id,
                "user_endpoint": None
                if m.user_endpoint is None
                else {"host": m.user_endpoint[0], "port": m.user_endpoint[1]},
                "client_tags": [{"key": k, "value": v} for k, v in m.client_tags],
            },
        )

    def _record(self, group: StreamsGroup, rt: int, member_id: str | None, value: dict) -> CoordinatorRecord:
        return CoordinatorRecord(
            group.partition, encode_key(rt, group.group_id, member_id), encode_value(rt, value)
        )


def endpoint_partitions(
    group: StreamsGroup, member: StreamsMember, topics: TopicsView
) -> list[dict[str, Any]]:
    """Each user endpoint with the partitions its member's active tasks read (the others first,
    then `member`), for interactive queries: task p of a subtopology reads partition p of each of
    its source and repartition topics that has it."""
    subtopologies = {s.subtopology_id: s for s in group.topology.subtopologies} if group.topology else {}
    out = []
    for m in [*(m for m in group.members.values() if m is not member), member]:
        if m.user_endpoint is None:
            continue
        by_topic: dict[str, set[int]] = {}
        for sid, ps in m.assigned.items():
            s = subtopologies.get(sid)
            if s is None:
                continue
            for t in (*s.source_topics, *(r.name for r in s.repartition_source_topics)):
                count = topics[t][1] if t in topics else 0
                by_topic.setdefault(t, set()).update(p for p in ps if p < count)
        out.append(
            {
                "user_endpoint": {"host": m.user_endpoint[0], "port": m.user_endpoint[1]},
                "active_partitions": [
                    {"topic": t, "partitions": sorted(ps)} for t, ps in sorted(by_topic.items()) if ps
                ],
                "standby_partitions": [],
            }
        )
    return out


def _invalid_tasks(tasks: Tasks | None, counts: Mapping[str, int]) -> str | None:
    for s, ps in (tasks or {}).items():
        if s not in counts:
            return f"Subtopology {s} does not exist in the topology."
        for p in sorted(ps):
            if p < 0 or p >= counts[s]:
                return (
                    f"Task {p} for subtopology {s} is invalid. "
                    f"Number of tasks for this subtopology: {counts[s]}"
                )
    return None


def _status(code: Status, detail: str) -> dict[str, Any]:
    return {"status_code": int(code), "status_detail": detail}


def _ok(member_id: str, epoch: int, interval: int, status: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "member_id": member_id,
        "member_epoch": epoch,
        "heartbeat_interval_ms": interval,
        "acceptable_recovery_lag": 0,
        "task_offset_interval_ms": 0,
        "status": status,
        "active_tasks": None,
        "standby_tasks": None,
        "warmup_tasks": None,
        "endpoint_information_epoch": 0,
        "partitions_by_user_endpoint": None,
    }
