"""The remote tier's part of the metadata image: every partition's remote log segments by state.

Theory of operation
-------------------
A segment enters with COPY_SEGMENT_STARTED (before its objects are uploaded), becomes readable
with COPY_SEGMENT_FINISHED, leaves the readable set with DELETE_SEGMENT_STARTED (before its
objects are deleted) and is forgotten with DELETE_SEGMENT_FINISHED (KIP-405's lifecycle). Any
other transition is a MetadataApplyError: the controller never emits one. Each partition also
has the metadata offset of its last remote change, the version of the manifest the leader
writes for it, so every broker derives the same manifest from the same image. Sans-IO.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from pylog.cluster.records import (
    MetadataRecord,
    RemoteLogSegmentRecord,
    RemoteLogSegmentState,
    RemoteLogStartOffsetRecord,
)
from pylog.storage.remote_layout import RemoteLogSegment

S = RemoteLogSegmentState
PartitionKey = tuple[uuid.UUID, int]

# state -> the states it may follow (None: a new segment id)
_FROM: dict[int, tuple[int | None, ...]] = {
    S.COPY_SEGMENT_STARTED: (None,),
    S.COPY_SEGMENT_FINISHED: (S.COPY_SEGMENT_STARTED,),
    S.DELETE_SEGMENT_STARTED: (S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED),
    S.DELETE_SEGMENT_FINISHED: (S.DELETE_SEGMENT_STARTED,),
}


class RemoteTransitionError(ValueError):
    """A state change KIP-405's lifecycle does not allow."""


@dataclass(frozen=True, slots=True)
class RemoteSegmentEntry:
    segment: RemoteLogSegment
    state: int
    broker_id: int

    @property
    def committed(self) -> bool:
        return self.state == S.COPY_SEGMENT_FINISHED


def check_transition(current: RemoteSegmentEntry | None, state: int) -> str | None:
    """Why ``state`` may not follow ``current`` (None: it may)."""
    if state not in _FROM:
        return f"unknown remote log segment state {state}"
    now = None if current is None else current.state
    if now not in _FROM[state]:
        was = "no segment" if now is None else S(now).name
        return f"{S(state).name} cannot follow {was}"
    return None


class RemoteLogImage:
    def __init__(self) -> None:
        self._segments: dict[PartitionKey, dict[str, RemoteSegmentEntry]] = {}
        self._start: dict[PartitionKey, int] = {}
        self._version: dict[PartitionKey, int] = {}
        self._dirty: set[PartitionKey] = set()

    # -- apply -------------------------------------------------------------------------------

    def apply_segment(self, r: RemoteLogSegmentRecord) -> None:
        key = (r.topic_id, r.partition_id)
        segs = self._segments.get(key, {})
        current = segs.get(r.segment_id)
        why = check_transition(current, r.state)
        if why is not None:
            where = f"{r.topic_id}-{r.partition_id}"
            raise RemoteTransitionError(f"remote segment {r.segment_id} of {where}: {why}")
        self._segments[key] = segs
        if r.state == S.DELETE_SEGMENT_FINISHED:
            del segs[r.segment_id]
            if not segs:
                del self._segments[key]
        elif current is None:
            seg = RemoteLogSegment(r.segment_id, r.base_offset, r.end_offset, r.max_timestamp, r.size_bytes,
                                   r.leader_epoch, tuple(r.epochs))
            segs[r.segment_id] = RemoteSegmentEntry(seg, r.state, r.broker_id)
        else:
            segs[r.segment_id] = RemoteSegmentEntry(current.segment, r.state, current.broker_id)
        self._dirty.add(key)

    def apply_start(self, r: RemoteLogStartOffsetRecord) -> None:
        key = (r.topic_id, r.partition_id)
        self._start[key] = max(self._start.get(key, 0), r.log_start_offset)
        if r.version >= 0:
            self._version[key] = r.version
            self._dirty.discard(key)
        else:
            self._dirty.add(key)

    def stamp(self, offset: int) -> None:
        """The batch just applied ends at metadata offset ``offset``: it versions what it changed."""
        for key in self._dirty:
            self._version[key] = offset
        self._dirty.clear()

    def remove_topic(self, topic_id: uuid.UUID) -> None:
        for d in (self._segments, self._start, self._version):
            for key in [k for k in d if k[0] == topic_id]:
                del d[key]
        self._dirty = {k for k in self._dirty if k[0] != topic_id}

    # -- queries -----------------------------------------------------------------------------

    def entries(self, topic_id: uuid.UUID, partition: int) -> list[RemoteSegmentEntry]:
        """Every known segment of a partition in any state, by base offset."""
        segs = self._segments.get((topic_id, partition), {})
        return sorted(segs.values(), key=lambda e: (e.segment.base_offset, e.segment.segment_id))

    def committed(self, topic_id: uuid.UUID, partition: int) -> tuple[RemoteLogSegment, ...]:
        return tuple(e.segment for e in self.entries(topic_id, partition) if e.committed)

    def log_start_offset(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """The earliest offset the remote tier serves; None if nothing is committed there."""
        segs = self.committed(topic_id, partition)
        if not segs:
            return None
        return max(segs[0].base_offset, self._start.get((topic_id, partition), 0))

    def recorded_start(self, topic_id: uuid.UUID, partition: int) -> int:
        return self._start.get((topic_id, partition), 0)

    def version(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """Metadata offset of the partition's last remote change (its manifest's version)."""
        return self._version.get((topic_id, partition))

    def partitions(self) -> list[PartitionKey]:
        return sorted(set(self._segments) | set(self._start), key=lambda k: (str(k[0]), k[1]))

    # -- whole image -------------------------------------------------------------------------

    def copy(self) -> RemoteLogImage:
        other = RemoteLogImage()
        other._segments = {k: dict(v) for k, v in self._segments.items()}
        other._start = dict(self._start)
        other._version = dict(self._version)
        other._dirty = set(self._dirty)
        return other

    def to_records(self, topic_id: uuid.UUID) -> Iterator[MetadataRecord]:
        """The records rebuilding a topic's remote state (after its TopicRecord in a snapshot)."""
        for key in [k for k in self.partitions() if k[0] == topic_id]:
            for e in self.entries(*key):
                s = e.segment
                yield RemoteLogSegmentRecord(
                    key[0], key[1], s.segment_id, S.COPY_SEGMENT_STARTED, s.base_offset, s.end_offset,
                    s.max_timestamp, s.size_bytes, s.leader_epoch, s.epochs, e.broker_id)
                if e.state != S.COPY_SEGMENT_STARTED:
                    yield RemoteLogSegmentRecord(key[0], key[1], s.segment_id, S.COPY_SEGMENT_FINISHED)
                if e.state == S.DELETE_SEGMENT_STARTED:
                    yield RemoteLogSegmentRecord(key[0], key[1], s.segment_id, S.DELETE_SEGMENT_STARTED)
            start, version = self._start.get(key, 0), self._version.get(key, 0)
            yield RemoteLogStartOffsetRecord(key[0], key[1], start, version)

    def to_dict(self) -> dict[str, object]:
        return {f"{k[0]}-{k[1]}": {"start": self._start.get(k, 0), "version": self._version.get(k),
                                   "segments": [(e.segment, e.state, e.broker_id) for e in self.entries(*k)]}
                for k in self.partitions()}
