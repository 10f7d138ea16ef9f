"""The controller's remote-tier command: a partition leader proposes remote log segment state
changes (KIP-405's lifecycle) and remote log start offsets. Sans-IO.

Only the partition's current leader may propose, and only from the leader epoch the image holds
(FENCED_LEADER_EPOCH otherwise), so a deposed leader's late upload is never committed. A copy
may not start at or below the end of a committed (or committing) segment, so two leaders never
commit the same offsets twice; any transition outside the lifecycle is refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pylog.cluster.image import MetadataImage
from pylog.cluster.records import (
    MetadataRecord,
    RemoteLogSegmentRecord,
    RemoteLogSegmentState,
    RemoteLogStartOffsetRecord,
)
from pylog.cluster.remote_log_image import check_transition
from pylog.protocol.errors import ErrorCode

S = RemoteLogSegmentState


@dataclass(frozen=True)
class RemoteLogProposal:
    """One change: a segment record, or (``segment`` None) a new remote log start offset."""

    leader_epoch: int
    segment: RemoteLogSegmentRecord | None = None
    start: RemoteLogStartOffsetRecord | None = None

    @property
    def key(self) -> tuple[uuid.UUID, int]:
        r = self.segment or self.start
        assert r is not None
        return r.topic_id, r.partition_id


@dataclass(frozen=True)
class RemoteLogProposalResult:
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


class RemoteLogControl:
    def __init__(
        self, image: Callable[[], MetadataImage], emit: Callable[[list[MetadataRecord]], None]
    ) -> None:
        self._image = image
        self._emit = emit

    def propose(
        self, broker_id: int, broker_epoch: int, proposals: Sequence[RemoteLogProposal]
    ) -> tuple[int, list[RemoteLogProposalResult]]:
        """(top-level error, one result per proposal, in order)."""
        image = self._image()
        b = image.brokers.get(broker_id)
        if b is None or (broker_epoch != -1 and b.broker_epoch != broker_epoch):
            return ErrorCode.STALE_BROKER_EPOCH, []
        out = []
        for p in proposals:
            code, message = self._check(self._image(), broker_id, p)
            if code == ErrorCode.NONE:
                self._emit([p.segment if p.segment is not None else p.start])  # type: ignore[list-item]
            out.append(RemoteLogProposalResult(code, message))
        return ErrorCode.NONE, out

    @staticmethod
    def _check(image: MetadataImage, broker_id: int, p: RemoteLogProposal) -> tuple[int, str | None]:
        topic_id, partition = p.key
        if image.topic(topic_id) is None:
            return ErrorCode.UNKNOWN_TOPIC_ID, None
        part = image.partition(topic_id, partition)
        if part is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        if part.leader != broker_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        if p.leader_epoch != part.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, None
        if p.start is not None:
            return ErrorCode.NONE, None
        r = p.segment
        assert r is not None
        entries = image.remote_segment_entries(topic_id, partition)
        current = next((e for e in entries if e.segment.segment_id == r.segment_id), None)
        why = check_transition(current, r.state)
        if why is not None:
            return ErrorCode.INVALID_REQUEST, why
        if r.state == S.COPY_SEGMENT_STARTED:
            if r.base_offset < 0 or r.end_offset < r.base_offset:
                return ErrorCode.INVALID_REQUEST, f"bad offsets [{r.base_offset}, {r.end_offset}]"
            live = [e.segment for e in entries if e.state == S.COPY_SEGMENT_FINISHED]
            if live and r.base_offset <= max(s.end_offset for s in live):
                end = max(s.end_offset for s in live)
                return ErrorCode.INVALID_REQUEST, f"offsets up to {end} are already remote"
        return ErrorCode.NONE, None
