"""The controller's partition commands: ISR changes asked by leaders (AlterPartition), leader
elections asked by admins (ElectLeaders) or by the leader rebalancer, and partition reassignments
(AlterPartitionReassignments, ListPartitionReassignments; the rules are in `reassignment`). Sans-IO.

A leader may change its partition's ISR only from the state it last saw: the request names the
leader epoch and partition epoch it holds, and a stale one is refused (FENCED_LEADER_EPOCH,
INVALID_UPDATE_VERSION), so a deposed leader can never overwrite a newer ISR.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pylog.cluster.image import MetadataImage, PartitionImage
from pylog.cluster.partition_change import check_new_isr, preferred_election, unclean_election
from pylog.cluster.reassignment import cancel, isr_changed, reassign
from pylog.cluster.records import LEADER_NO_CHANGE, MetadataRecord
from pylog.protocol.errors import ErrorCode

PREFERRED, UNCLEAN = 0, 1


@dataclass(frozen=True)
class IsrChange:
    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int


@dataclass(frozen=True)
class IsrChangeResult:
    topic_id: uuid.UUID
    partition: int
    error_code: int = ErrorCode.NONE
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


@dataclass(frozen=True)
class ReassignmentRequest:
    topic: str
    partition: int
    replicas: tuple[int, ...] | None  # None: cancel the reassignment in flight


@dataclass(frozen=True)
class ReassignmentResult:
    topic: str
    partition: int
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


@dataclass(frozen=True)
class OngoingReassignment:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@dataclass(frozen=True)
class ElectionResult:
    topic: str
    partition: int
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


class ReplicaControl:
    def __init__(
        self, image: Callable[[], MetadataImage], emit: Callable[[list[MetadataRecord]], None]
    ) -> None:
        self._image = image
        self._emit = emit

    def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[IsrChange]
    ) -> tuple[int, list[IsrChangeResult]]:
        """(top-level error, one result per change)."""
        image = self._image()
        b = image.brokers.get(broker_id)
        if b is None or (broker_epoch != -1 and b.broker_epoch != broker_epoch):
            return ErrorCode.STALE_BROKER_EPOCH, []
        usable = set(image.live_brokers())
        out = []
        for c in changes:
            p = image.partition(c.topic_id, c.partition)
            if image.topic(c.topic_id) is None:
                out.append(IsrChangeResult(c.topic_id, c.partition, ErrorCode.UNKNOWN_TOPIC_ID))
                continue
            if p is None:
                out.append(IsrChangeResult(c.topic_id, c.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            error = self._check(p, broker_id, c, usable)
            if error:
                out.append(_result(p, error))
                continue
            record = isr_changed(p, c.new_isr, usable)
            if record is not None:
                self._emit([record])
            out.append(_result(self._image().partition(c.topic_id, c.partition) or p, ErrorCode.NONE))
        return ErrorCode.NONE, out

    @staticmethod
    def _check(p: PartitionImage, broker_id: int, c: IsrChange, usable: set[int]) -> int:
        if p.leader != broker_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if c.leader_epoch != p.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if c.partition_epoch != p.partition_epoch:
            return ErrorCode.INVALID_UPDATE_VERSION
        if check_new_isr(p, broker_id, c.new_isr, usable) is not None:
            return ErrorCode.INELIGIBLE_REPLICA
        return ErrorCode.NONE

    def elect_leaders(
        self, election_type: int, partitions: Sequence[tuple[str, int]] | None
    ) -> list[ElectionResult]:
        """ElectLeaders; ``partitions`` None means every partition."""
        image = self._image()
        if partitions is None:
            partitions = _every_partition(image)
        out = []
        for name, index in partitions:
            p = image.partition(name, index)
            if p is None:
                out.append(
                    ElectionResult(
                        name, index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
                    )
                )
                continue
            usable = set(self._image().live_brokers())
            if election_type == PREFERRED:
                if p.replicas and p.leader == p.replicas[0]:
                    out.append(ElectionResult(name, index, ErrorCode.ELECTION_NOT_NEEDED, None))
                    continue
                record = preferred_election(p, usable)
                if record is None:
                    out.append(
                        ElectionResult(
                            name,
                            index,
                            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                            "The preferred leader is not available or not in sync.",
                        )
                    )
                    continue
            elif election_type == UNCLEAN:
                if p.leader != -1:
                    out.append(ElectionResult(name, index, ErrorCode.ELECTION_NOT_NEEDED, None))
                    continue
                record = unclean_election(p, usable)
                if record is None or record.leader == LEADER_NO_CHANGE:
                    out.append(
                        ElectionResult(
                            name,
                            index,
                            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                            "No replica of the partition is available.",
                        )
                    )
                    continue
            else:
                out.append(ElectionResult(name, index, ErrorCode.INVALID_REQUEST, "Unknown election type"))
                continue
            self._emit([record])
            out.append(ElectionResult(name, index))
        return out

    def alter_reassignments(
        self, requests: Sequence[ReassignmentRequest], allow_replication_factor_change: bool = True
    ) -> list[ReassignmentResult]:
        """AlterPartitionReassignments: each partition moves to its target, or its move is
        cancelled; a refused item changes nothing."""
        out = []
        for req in requests:
            image = self._image()
            usable = set(image.live_brokers())
            p = image.partition(req.topic, req.partition)
            error = self._check_reassignment(image, req, p, allow_replication_factor_change)
            if error is not None:
                out.append(ReassignmentResult(req.topic, req.partition, *error))
                continue
            assert p is not None
            record = cancel(p, usable) if req.replicas is None else reassign(p, req.replicas, usable)
            if record is not None:
                self._emit([record])
            out.append(ReassignmentResult(req.topic, req.partition))
        return out

    @staticmethod
    def _check_reassignment(
        image: MetadataImage, req: ReassignmentRequest, p: PartitionImage | None, allow_rf_change: bool
    ) -> tuple[int, str] | None:
        if image.topic(req.topic) is None or p is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition " + (
                f"{req.topic}-{req.partition}."
            )
        if req.replicas is None:
            if not p.reassigning:
                return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, (
                    f"No ongoing reassignment for partition {req.topic}-{req.partition}."
                )
            return None
        target = req.replicas
        if not target:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                "The manual partition assignment includes an empty replica list."
            )
        seen: set[int] = set()
        for b in target:
            if b not in image.brokers:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                    f"The manual partition assignment includes broker {b}, but no such broker is registered."
                )
            if b in seen:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                    f"The manual partition assignment includes the broker {b} more than once."
                )
            seen.add(b)
        current = len(p.replicas) - len(p.adding_replicas)  # the replication factor before the move
        if not allow_rf_change and len(target) != current:
            return ErrorCode.INVALID_REPLICATION_FACTOR, (
                f"The replication factor is changed from {current} to {len(target)} but option "
                "allowReplicationFactorChange is disabled."
            )
        return None

    def list_reassignments(self, partitions: Sequence[tuple[str, int]] | None) -> list[OngoingReassignment]:
        """ListPartitionReassignments: the moves in flight among ``partitions`` (None: all);
        partitions that do not exist or are not moving are left out, as Kafka does."""
        image = self._image()
        if partitions is None:
            partitions = _every_partition(image)
        out = []
        for name, index in partitions:
            p = image.partition(name, index)
            if p is not None and p.reassigning:
                out.append(
                    OngoingReassignment(name, index, p.replicas, p.adding_replicas, p.removing_replicas)
                )
        return out

    def rebalance(self) -> int:
        """auto.leader.rebalance.enable: preferred elections wherever possible; returns how many."""
        image = self._image()
        usable = set(image.live_brokers())
        records: list[MetadataRecord] = []
        for t in image.topics.values():
            for p in image.partitions(t.topic_id).values():
                r = preferred_election(p, usable)
                if r is not None:
                    records.append(r)
        self._emit(records)
        return len(records)


def _result(p: PartitionImage, error: int) -> IsrChangeResult:
    return IsrChangeResult(
        p.topic_id, p.partition_id, error, p.leader, p.leader_epoch, p.isr, p.partition_epoch
    )


def _every_partition(image: MetadataImage) -> list[tuple[str, int]]:
    """Every partition of `image`, by topic name and index: what a request naming none means."""
    topics = sorted(image.topics.items())
    return [(name, i) for name, t in topics for i in sorted(image.partitions(t.topic_id))]
