"""Configuration and the plain result types the group coordinator hands to the broker shell.

Results mirror the Kafka response fields (snake_case) so handler modules copy them into
response bodies without translation.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from pylog.protocol.errors import ErrorCode

Handle = Hashable
"""Opaque token the shell passes with a JoinGroup / SyncGroup request; never None."""

TopicPartition = tuple[str, int]


def int_settings(config: type, props: Mapping[str, str], prefix: str) -> dict[str, int]:
    """The int fields of the dataclass `config` that broker `props` set, each under its Kafka name:
    field `session_timeout_ms` of prefix `group.share.` is `group.share.session.timeout.ms`."""
    names = {prefix + f.name.replace("_", "."): f.name for f in fields(config) if f.type == "int"}
    return {names[k]: int(v) for k, v in props.items() if k in names}


@dataclass(frozen=True)
class GroupConfig:
    """Broker settings of the group coordinator, Kafka names in the field docs.

    `group_initial_rebalance_delay_ms` (`group.initial.rebalance.delay.ms`): Kafka's default of
    3000 ms lets a fleet of consumers that start together land in one generation, at the price of
    every first consumer waiting 3 s. pylog is notebook-first: a lone consumer should start at once,
    yet a burst (a process pool, a test starting four consumers) should not cost several rebalances,
    each of which can take a heartbeat interval to propagate. 100 ms does both: imperceptible for one
    consumer, and the window is extended by another 100 ms (up to the rebalance timeout) as long as
    new members keep arriving, so a burst still collapses into one generation.
    """

    group_initial_rebalance_delay_ms: int = 100  # group.initial.rebalance.delay.ms
    group_min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    group_max_session_timeout_ms: int = 1800000  # group.max.session.timeout.ms
    group_max_size: int = 2**31 - 1  # group.max.size
    # Kafka's fixed 5 min bound on a new member whose JoinGroup is parked.
    group_new_member_join_timeout_ms: int = 300000
    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions
    offsets_retention_minutes: int = 10080  # offsets.retention.minutes (7 days)
    offsets_retention_check_interval_ms: int = 600000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes

    _KAFKA_NAMES = {
        "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
        "group.min.session.timeout.ms": "group_min_session_timeout_ms",
        "group.max.session.timeout.ms": "group_max_session_timeout_ms",
        "group.max.size": "group_max_size",
        "offsets.topic.num.partitions": "offsets_topic_num_partitions",
        "offsets.retention.minutes": "offsets_retention_minutes",
        "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
        "offset.metadata.max.bytes": "offset_metadata_max_bytes",
    }

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @classmethod
    def from_kafka(cls, props: Mapping[str, str]) -> GroupConfig:
        """Build from broker properties; unrelated keys are ignored."""
        kwargs = {cls._KAFKA_NAMES[k]: int(v) for k, v in props.items() if k in cls._KAFKA_NAMES}
        return cls(**kwargs)

    def accepts_session_timeout(self, session_timeout_ms: int) -> bool:
        """A classic member's session timeout lies within the broker's bounds."""
        return self.group_min_session_timeout_ms <= session_timeout_ms <= self.group_max_session_timeout_ms


@dataclass(frozen=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinRequest:
    """A JoinGroup as the coordinator reads it: who joins, with which timeouts and protocols.

    `rebalance_timeout_ms` < 0 (v0) means the session timeout. `reason` (v8+) is informational.
    """

    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    api_version: int
    reason: str | None = None

    def normalised(self) -> JoinRequest:
        """The v0 rebalance timeout resolved and repeated protocol names dropped (the first wins)."""
        uniq: dict[str, bytes] = {}
        for name, metadata in self.protocols:
            uniq.setdefault(name, bytes(metadata))
        rebalance = self.session_timeout_ms if self.rebalance_timeout_ms < 0 else self.rebalance_timeout_ms
        return replace(self, rebalance_timeout_ms=rebalance, protocols=tuple(uniq.items()))


@dataclass(frozen=True)
class SyncRequest:
    """A SyncGroup as the coordinator reads it. `assignments` (member id to assignment) matter only
    from the leader; `protocol_type` and `protocol_name` (v5+) are None when not sent."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: Mapping[str, bytes] | Iterable[tuple[str, bytes]] = ()


@dataclass(frozen=True)
class JoinGroupResult:
    """A JoinGroup response body. `members` is filled for the leader only."""

    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinGroupMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True)
class SyncGroupResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True)
class LeaveGroupResult:
    """v0-2 carry one member: the handler answers with the member's error if `error` is NONE."""

    error: ErrorCode
    members: tuple[LeaveMemberResult, ...] = ()


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@dataclass(frozen=True)
class DescribedGroup:
    error: ErrorCode
    group_id: str
    group_state: str
    protocol_type: str
    protocol_data: str
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str = "classic"


@dataclass(frozen=True)
class OffsetCommitPartition:
    """One partition of an OffsetCommit request; `commit_timestamp` only in v1 (-1 = now)."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp: int = -1


@dataclass(frozen=True)
class PartitionError:
    topic: str
    partition: int
    error: ErrorCode


@dataclass(frozen=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True)
class OffsetFetchResult:
    """One group of an OffsetFetch response (v8+ per group; older versions: top-level error)."""

    group_id: str
    error: ErrorCode
    partitions: tuple[FetchedOffset, ...] = ()


@dataclass(frozen=True)
class OffsetDeleteResult:
    error: ErrorCode
    partitions: tuple[PartitionError, ...] = ()


@dataclass(frozen=True)
class CoordinatorRecord:
    """A record for a coordinator's compacted topic; `value=None` is a tombstone.

    `producer_id` >= 0 marks a TxnOffsetCommit record: it is appended in a transactional batch of
    that producer (and epoch) and counts only once the transaction's COMMIT marker follows.
    """

    partition: int
    key: bytes
    value: bytes | None
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True)
class TxnOffsetRecord:
    """Replay input: a record of a transactional batch in `__consumer_offsets` (`offset`: its log
    offset, -1 if unknown)."""

    producer_id: int
    key: bytes
    value: bytes | None
    offset: int = -1


@dataclass(frozen=True)
class TxnMarkerRecord:
    """Replay input: a COMMIT / ABORT control record in `__consumer_offsets`."""

    producer_id: int
    commit: bool


@dataclass
class Output:
    """What one call produced.

    The shell appends `records` (in order) to `__consumer_offsets` first, reports where each
    batch landed (`GroupCoordinator.records_appended`, before its next call into the
    coordinator), and only after the append succeeded sends `response` (the answer to this call,
    for APIs that never wait) and resolves each `(handle, result)` of `completions` (JoinGroup /
    SyncGroup answers, this call's own or earlier parked ones).
    """

    response: Any = None
    completions: list[tuple[Handle, JoinGroupResult | SyncGroupResult]] = field(default_factory=list)
    records: list[CoordinatorRecord] = field(default_factory=list)

    def complete(self, handle: Handle, result: JoinGroupResult | SyncGroupResult) -> None:
        self.completions.append((handle, result))
