"""The controller's topic commands: CreateTopics (names, replica placement or manual
assignments, initial configs), DeleteTopics and CreatePartitions (the topic half of Kafka's
ReplicationControlManager). Sans-IO; kept apart from ``controller`` so the topic rules live in
one place, as the partition, config and remote-tier commands do.

Each command validates against the working image and hands the records of each accepted item to
``collect``, which applies them at once: a later item of the same request sees them (two
CreateTopics for one name cannot both pass).
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pylog.cluster.config_control import ConfigValidationError, validate_new_topic_configs, validate_topic_set
from pylog.cluster.image import MetadataImage
from pylog.cluster.placement import place_replicas
from pylog.cluster.records import (
    ConfigRecord,
    ConfigResourceType,
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from pylog.protocol.errors import ErrorCode

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
METADATA_TOPIC = "__cluster_metadata"


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = -1  # -1: num.partitions
    replication_factor: int = -1  # -1: default.replication.factor
    assignments: Mapping[int, Sequence[int]] | None = None  # partition -> replicas
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class CreateTopicResult:
    name: str
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DeleteTopicResult:
    name: str | None
    topic_id: uuid.UUID | None
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


@dataclass(frozen=True)
class NewPartitions:
    name: str
    count: int  # the new total
    assignments: Sequence[Sequence[int]] | None = None  # replicas of each new partition


@dataclass(frozen=True)
class CreatePartitionsResult:
    name: str
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


class _Invalid(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate_topic_name(name: str) -> tuple[int, str | None]:
    """Kafka's topic name rules: [a-zA-Z0-9._-], 1..249 chars, not "." or ".."."""
    if not name:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return ErrorCode.INVALID_TOPIC_EXCEPTION, 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return (
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, "
            f"topic name: {name}",
        )
    if not set(name) <= _LEGAL_CHARS:
        return (
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'",
        )
    return ErrorCode.NONE, None


class TopicControl:
    def __init__(
        self,
        image: Callable[[], MetadataImage],
        collect: Callable[[list[MetadataRecord]], None],
        rng: random.Random,
        *,
        default_num_partitions: int,
        default_replication_factor: int,
        delete_topic_enable: bool,
        broker_settings: Callable[[str], str | None],
    ) -> None:
        self._image = image
        self._collect = collect
        self._rng = rng  # the controller's own: topic ids and placement draw from it in turn
        self.default_num_partitions = default_num_partitions
        self.default_replication_factor = default_replication_factor
        self.delete_topic_enable = delete_topic_enable
        self.broker_settings = broker_settings

    def _new_topic_id(self) -> uuid.UUID:
        while True:
            tid = uuid.UUID(int=self._rng.getrandbits(128), version=4)
            if tid not in self._image().topics_by_id:
                return tid

    def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> list[CreateTopicResult]:
        counts = Counter(t.name for t in topics)
        results = []
        for t in topics:
            if counts[t.name] > 1:
                results.append(
                    CreateTopicResult(t.name, ErrorCode.INVALID_REQUEST, f"Duplicate topic name {t.name}")
                )
                continue
            try:
                new, result = self._create_topic(t)
            except _Invalid as e:
                results.append(CreateTopicResult(t.name, e.code, e.message))
                continue
            except ConfigValidationError as e:
                results.append(CreateTopicResult(t.name, e.code, e.message))
                continue
            if not validate_only:
                self._collect(new)
            results.append(result)
        return results

    def _create_topic(self, t: NewTopic) -> tuple[list[MetadataRecord], CreateTopicResult]:
        code, message = validate_topic_name(t.name)
        if code:
            raise _Invalid(code, message or "")
        if t.name == METADATA_TOPIC:
            raise _Invalid(ErrorCode.INVALID_REQUEST, f"Creation of internal topic {t.name} is prohibited.")
        if self._image().topic(t.name) is not None:
            raise _Invalid(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
        normalized = t.name.replace(".", "_")
        for other in self._image().topics:
            if other.replace(".", "_") == normalized:
                raise _Invalid(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"Topic '{t.name}' collides with existing topic: {other}",
                )
        live = self._image().live_brokers()
        if t.assignments is not None:
            if t.num_partitions != -1 or t.replication_factor != -1:
                raise _Invalid(
                    ErrorCode.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            placement = self._manual_assignments(t.assignments, live)
        else:
            partitions = self.default_num_partitions if t.num_partitions == -1 else t.num_partitions
            rf = self.default_replication_factor if t.replication_factor == -1 else t.replication_factor
            if partitions <= 0:
                raise _Invalid(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
            if rf <= 0:
                raise _Invalid(
                    ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
                )
            placement = self._place(partitions, rf, live)
        validate_new_topic_configs(t.configs)
        validate_topic_set({k: v for k, v in t.configs.items() if v is not None}, self.broker_settings)
        tid = self._new_topic_id()
        configs = {k: v for k, v in t.configs.items() if v is not None}
        records: list[MetadataRecord] = [TopicRecord(t.name, tid)]
        records += [ConfigRecord(ConfigResourceType.TOPIC, t.name, k, v) for k, v in configs.items()]
        records += [PartitionRecord(tid, p, r, r, r[0], 0, 0) for p, r in enumerate(placement)]
        result = CreateTopicResult(
            t.name,
            topic_id=tid,
            num_partitions=len(placement),
            replication_factor=len(placement[0]),
            configs=configs,
        )
        return records, result

    def _place(self, partitions: int, rf: int, live: list[int], first: int = 0) -> list[tuple[int, ...]]:
        if rf > len(live):
            raise _Invalid(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} "
                f"cannot be reached because only {len(live)} broker(s) are registered.",
            )
        start, shift = self._rng.randrange(len(live)), self._rng.randrange(len(live))
        racks = {b: self._image().brokers[b].rack for b in live}
        return place_replicas(racks, partitions, rf, start, shift, first)

    def _manual_assignments(
        self, assignments: Mapping[int, Sequence[int]], live: list[int]
    ) -> list[tuple[int, ...]]:
        if not assignments:
            raise _Invalid(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "No replica assignments given.")
        if sorted(assignments) != list(range(len(assignments))):
            raise _Invalid(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "Partitions should be a consecutive 0-based integer sequence.",
            )
        out = [tuple(assignments[p]) for p in range(len(assignments))]
        self._check_replica_lists(out, live, len(out[0]))
        return out

    @staticmethod
    def _check_replica_lists(lists: Sequence[tuple[int, ...]], live: list[int], rf: int) -> None:
        known = set(live)
        for replicas in lists:
            if not replicas:
                raise _Invalid(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Replica list must not be empty.")
            if len(set(replicas)) != len(replicas):
                raise _Invalid(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Duplicate brokers in {list(replicas)}."
                )
            if len(replicas) != rf:
                raise _Invalid(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    "All partitions should have the same number of replicas.",
                )
            missing = [b for b in replicas if b not in known]
            if missing:
                raise _Invalid(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The brokers {missing} are not registered or are fenced.",
                )

    def delete_topics(
        self, names: Sequence[str] = (), topic_ids: Sequence[uuid.UUID] = ()
    ) -> list[DeleteTopicResult]:
        items: list[tuple[str | None, uuid.UUID | None]] = [(n, None) for n in names]
        items += [(None, i) for i in topic_ids]
        counts = Counter(items)
        results = []
        for name, tid in items:
            topic = self._image().topic(name if name is not None else tid)  # type: ignore[arg-type]
            if counts[(name, tid)] > 1:
                results.append(
                    DeleteTopicResult(name, tid, ErrorCode.INVALID_REQUEST, "Duplicate topic in request")
                )
            elif not self.delete_topic_enable:
                results.append(
                    DeleteTopicResult(
                        name, tid, ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled."
                    )
                )
            elif topic is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tid is None else ErrorCode.UNKNOWN_TOPIC_ID
                msg = (
                    "This server does not host this topic-partition." if tid is None else "Unknown topic id."
                )
                results.append(DeleteTopicResult(name, tid, code, msg))
            else:
                self._collect([RemoveTopicRecord(topic.topic_id)])
                results.append(DeleteTopicResult(topic.name, topic.topic_id))
        return results

    def create_partitions(
        self, topics: Sequence[NewPartitions], *, validate_only: bool = False
    ) -> list[CreatePartitionsResult]:
        counts = Counter(t.name for t in topics)
        results = []
        for t in topics:
            try:
                if counts[t.name] > 1:
                    raise _Invalid(ErrorCode.INVALID_REQUEST, f"Duplicate topic name {t.name}")
                new = self._create_partitions(t)
            except _Invalid as e:
                results.append(CreatePartitionsResult(t.name, e.code, e.message))
                continue
            if not validate_only:
                self._collect(new)
            results.append(CreatePartitionsResult(t.name))
        return results

    def _create_partitions(self, t: NewPartitions) -> list[MetadataRecord]:
        topic = self._image().topic(t.name)
        if topic is None:
            raise _Invalid(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{t.name}' does not exist.")
        existing = self._image().partitions(topic.topic_id)
        current = len(existing)
        if t.count < current:
            raise _Invalid(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {current} partitions, which is higher than the requested {t.count}.",
            )
        if t.count == current:
            raise _Invalid(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        rf = len(existing[0].replicas) if 0 in existing else 1
        live = self._image().live_brokers()
        added = t.count - current
        if t.assignments is not None:
            if len(t.assignments) != added:
                raise _Invalid(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Attempted to add {added} additional partition(s), but only "
                    f"{len(t.assignments)} assignment(s) were specified.",
                )
            placement = [tuple(a) for a in t.assignments]
            self._check_replica_lists(placement, live, rf)
        else:
            placement = self._place(added, rf, live, first=current)
        return [
            PartitionRecord(topic.topic_id, current + i, r, r, r[0], 0, 0) for i, r in enumerate(placement)
        ]
