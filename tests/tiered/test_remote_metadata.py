"""The remote tier's metadata: RemoteLogSegmentRecord's lifecycle in the image (the committed
view readers use), snapshots, topic deletion, and the controller's fencing of proposals."""

from __future__ import annotations

import random
import uuid

import pytest
from pylog.protocol import api
from pylog.protocol.api import PylogApiKey
from pylog.protocol.errors import ErrorCode
from pylog.storage.remote_layout import RemoteLogMetadata

from pylog.cluster.controller import NewTopic, QuorumController
from pylog.cluster.image import MetadataApplyError, MetadataImage
from pylog.cluster.records import (
    BrokerEndpoint,
    PartitionChangeRecord,
    RemoteLogSegmentRecord,
    RemoteLogSegmentState,
    RemoteLogStartOffsetRecord,
    RemoveTopicRecord,
    decode_records,
    encode_records,
)
from pylog.cluster.remote_log_control import RemoteLogProposal

S = RemoteLogSegmentState


def controller() -> tuple[QuorumController, uuid.UUID]:
    c = QuorumController(rng=random.Random(1))
    for b in (1, 2):
        c.register_broker(b, uuid.UUID(int=b), [BrokerEndpoint("PLAINTEXT", "localhost", 9090 + b)])
        c.broker_heartbeat(b, b, 10**9, want_fence=False, want_shutdown=False, now_ms=0)
    res = c.create_topics([NewTopic("t", assignments={0: [1, 2]})])
    tid = res.response[0].topic_id
    assert tid is not None
    return c, tid


def started(tid: uuid.UUID, sid: str, base: int, end: int, epoch: int = 0) -> RemoteLogSegmentRecord:
    size = 10 * (end - base + 1)
    return RemoteLogSegmentRecord(tid, 0, sid, S.COPY_SEGMENT_STARTED, base, end, 1000 + end, size,
                                  epoch, ((epoch, base),), 1)


def propose(c: QuorumController, *proposals: RemoteLogProposal, broker: int = 1) -> list[int]:
    res = c.remote_log_segments(broker, broker, proposals)
    error, results = res.response
    assert error == ErrorCode.NONE
    return [r.error_code for r in results]


def test_records_round_trip() -> None:
    tid = uuid.uuid4()
    records = [started(tid, "a", 0, 9), RemoteLogSegmentRecord(tid, 0, "a", S.COPY_SEGMENT_FINISHED),
               RemoteLogStartOffsetRecord(tid, 0, 5, 7)]
    assert decode_records(encode_records(records)) == records


def test_lifecycle_in_the_image_and_the_committed_view() -> None:
    c, tid = controller()
    image = c.image
    view: RemoteLogMetadata = image  # the image is the brokers' RemoteLogMetadata
    image.apply_batch([started(tid, "a", 0, 9)], 100)
    assert view.remote_segments("t", tid, 0) == () and view.remote_log_start_offset("t", tid, 0) is None
    assert image.remote.version(tid, 0) == 100
    image.apply_batch([RemoteLogSegmentRecord(tid, 0, "a", S.COPY_SEGMENT_FINISHED)], 101)
    b_done = RemoteLogSegmentRecord(tid, 0, "b", S.COPY_SEGMENT_FINISHED)
    image.apply_batch([started(tid, "b", 10, 19), b_done], 102)
    assert [s.segment_id for s in view.remote_segments("t", tid, 0)] == ["a", "b"]
    assert view.remote_log_start_offset("t", tid, 0) == 0 and image.remote.version(tid, 0) == 102
    image.apply_batch([RemoteLogStartOffsetRecord(tid, 0, 4)], 103)
    assert view.remote_log_start_offset("t", tid, 0) == 4
    image.apply_batch([RemoteLogSegmentRecord(tid, 0, "a", S.DELETE_SEGMENT_STARTED)], 104)
    assert [s.segment_id for s in view.remote_segments("t", tid, 0)] == ["b"]
    assert view.remote_log_start_offset("t", tid, 0) == 10
    with pytest.raises(MetadataApplyError):
        image.apply(RemoteLogSegmentRecord(tid, 0, "b", S.DELETE_SEGMENT_FINISHED))
    with pytest.raises(MetadataApplyError):
        image.apply(started(tid, "b", 20, 29))
    with pytest.raises(MetadataApplyError):
        image.apply(started(uuid.uuid4(), "z", 0, 1))
    image.apply_batch([RemoteLogSegmentRecord(tid, 0, "a", S.DELETE_SEGMENT_FINISHED)], 105)
    assert [e.segment.segment_id for e in image.remote_segment_entries(tid, 0)] == ["b"]

    # a snapshot keeps segments, states and the manifest version
    again = MetadataImage.from_records(image.to_records(), offset=image.offset, next_producer_id=0,
                                       last_broker_epoch=image.last_broker_epoch)
    assert again == image and again.remote.version(tid, 0) == 105
    assert image.copy() == image

    image.apply_batch([RemoveTopicRecord(tid)], 106)
    assert image.remote.partitions() == [] and image.remote_segments("t", tid, 0) == ()


def test_controller_fences_stale_leaders_and_overlaps() -> None:
    c, tid = controller()
    assert propose(c, RemoteLogProposal(0, started(tid, "a", 0, 9))) == [ErrorCode.NONE]
    not_leader = [ErrorCode.NOT_LEADER_OR_FOLLOWER]
    assert propose(c, RemoteLogProposal(0, started(tid, "x", 0, 9)), broker=2) == not_leader
    assert propose(c, RemoteLogProposal(1, started(tid, "x", 0, 9))) == [ErrorCode.FENCED_LEADER_EPOCH]
    finished = RemoteLogSegmentRecord(tid, 0, "a", S.COPY_SEGMENT_FINISHED)
    assert propose(c, RemoteLogProposal(0, finished)) == [ErrorCode.NONE]
    assert propose(c, RemoteLogProposal(0, finished)) == [ErrorCode.INVALID_REQUEST]
    # nothing at or below a committed end may be copied again
    assert propose(c, RemoteLogProposal(0, started(tid, "c", 5, 12))) == [ErrorCode.INVALID_REQUEST]
    # a new leader: the old leader's epoch is fenced
    res = c._run(lambda: c._collect([PartitionChangeRecord(tid, 0, leader=2)]))
    assert res.records
    late = RemoteLogProposal(0, started(tid, "d", 10, 19))
    assert propose(c, late) == [ErrorCode.NOT_LEADER_OR_FOLLOWER]
    assert propose(c, RemoteLogProposal(1, started(tid, "d", 10, 19)), broker=2) == [ErrorCode.NONE]
    assert propose(c, RemoteLogProposal(1, start=RemoteLogStartOffsetRecord(tid, 0, 3)), broker=2) == [0]
    assert c.image.remote_log_start_offset("t", tid, 0) == 3
    assert c.remote_log_segments(7, 7, []).response[0] == ErrorCode.STALE_BROKER_EPOCH


def test_the_request_is_pylog_internal_and_round_trips() -> None:
    assert PylogApiKey.REMOTE_LOG_SEGMENT >= 32000
    tid = uuid.uuid4()
    body = {"broker_id": 1, "broker_epoch": 5, "changes": [
        {"topic_id": tid, "partition_index": 0, "leader_epoch": 3, "segment_id": "s", "state": 0,
         "base_offset": 0, "end_offset": 9, "max_timestamp": 1, "size_bytes": 10, "segment_leader_epoch": 3,
         "epochs": [{"epoch": 3, "start_offset": 0}], "log_start_offset": -1}]}
    frame = api.encode_request(PylogApiKey.REMOTE_LOG_SEGMENT, 0, 1, "t", body)
    req = api.decode_request(memoryview(frame)[4:]).body
    assert req.changes[0].topic_id == tid and req.changes[0].epochs[0].start_offset == 0
