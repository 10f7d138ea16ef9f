"""A partition's active segment keeps its batches' wire bytes as they are appended: a leader the
producer's bytes as patched for the wire cache (offset, epoch, LogAppendTime and CRC), a follower
the leader's bytes; sealing keeps the file and encodes nothing."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
from pylog.protocol import records as rec
from pylog.storage import Stats
from pylog.storage.wire import WIRE_EXT

from pylog.broker.datapath.batch_bytes import encode_stored, rewrite_for_wire_cache
from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.config import BrokerConfig

# the active `.wire` belongs to format 1 (format 2 keeps the producers' bytes in its data file)
FORMAT1 = {"pylog.segment.format": "1"}


def _batch(i: int, codec: str) -> bytes:
    rows = pa.table(
        {
            "offset": pa.array(range(20), pa.int64()),
            "timestamp": pa.array([1_000 + i] * 20, pa.timestamp("ms")),
            "key": pa.array([b"k%d" % j for j in range(20)], pa.binary()),
            "value": pa.array([b"v%d-%d " % (i, j) * 10 for j in range(20)], pa.binary()),
        }
    )
    return rec.encode_batch(rows, base_offset=0, compression=codec)


def _wire_file(part, base: int) -> bytes:  # type: ignore[no-untyped-def]
    return (part.log.dir / f"{base:020d}{WIRE_EXT}").read_bytes()


def _encoded(part, start: int, end: int) -> bytes:  # type: ignore[no-untyped-def]
    stored = part.log.read(start, 1 << 30, max_offset=end)
    return b"".join(encode_stored(s.meta, s.records) for s in stored)


def _replicas(tmp_path: Path) -> ReplicaManager:
    config = BrokerConfig({"pylog.wire.cache.bytes": "1", "pylog.wire.cache.total.bytes": "1"})
    return ReplicaManager(config, tmp_path, lambda: 0)


def test_leader_appends_patched_bytes_and_sealing_keeps_them(tmp_path: Path) -> None:
    for timestamp_type in ("CreateTime", "LogAppendTime"):
        replicas = _replicas(tmp_path / timestamp_type)
        try:
            part = replicas.ensure_partition(
                "a", 0, uuid.uuid4(),
                {**FORMAT1, "segment.bytes": "8000", "message.timestamp.type": timestamp_type}
            )
            part.become_leader(1, 3, 0, (1,), (1,), 0)
            produced = [_batch(i, "lz4" if i % 2 else "none") for i in range(30)]
            want = []
            for i, b in enumerate(produced):
                result = part.append_as_leader(b, 5_000 + i)
                assert result.error == 0
                patched = rewrite_for_wire_cache(memoryview(b), result.base_offset, 3, result.log_append_time)
                want.append(patched)
            bases = part.log.segment_base_offsets()
            assert len(bases) >= 3
            leo = part.log.log_end_offset
            # the producer's bytes as patched: byte-identical to encoding the stored batch under
            # CreateTime; under LogAppendTime the header's max timestamp is the append time (the
            # records keep their deltas, as Kafka's leader does)
            assert b"".join(_wire_file(part, b) for b in bases) == b"".join(want)
            for k, base in enumerate(bases):  # every segment, the active one too
                end = bases[k + 1] if k + 1 < len(bases) else leo
                if timestamp_type == "CreateTime":
                    assert _wire_file(part, base) == _encoded(part, base, end)
            for h, _ in rec.iter_batches(_wire_file(part, bases[0])):
                assert h.partition_leader_epoch == 3
                assert bool(h.attributes & 0x08) == (timestamp_type == "LogAppendTime")
            for b in rec.iter_batches(_wire_file(part, bases[-1])):
                rec.decode_batch(bytes(b[1]))  # CRC holds (re-signed under LogAppendTime)
            kept = Stats.wire_kept
            assert part.seal_rolled_segments() == len(bases) - 1
            assert Stats.wire_kept - kept == len(bases) - 1
            got = part.read_wire(0, 1 << 30, bases[-1])
            assert all(type(b) is memoryview for b in got)
            assert b"".join(bytes(b) for b in got) == b"".join(want)[: sum(len(b) for b in got)]
        finally:
            replicas.close()


def test_follower_keeps_the_leaders_bytes(tmp_path: Path) -> None:
    leader_rm, follower_rm = _replicas(tmp_path / "leader"), _replicas(tmp_path / "follower")
    try:
        topic_id = uuid.uuid4()
        leader = leader_rm.ensure_partition("a", 0, topic_id, {**FORMAT1, "segment.bytes": "8000"})
        leader.become_leader(1, 4, 0, (1, 2), (1, 2), 0)
        for i in range(30):
            assert leader.append_as_leader(_batch(i, "lz4" if i % 3 else "none"), 0).error == 0
        sent = leader.read_wire(0, 1 << 30, leader.log.log_end_offset)
        follower = follower_rm.ensure_partition("a", 0, topic_id, {**FORMAT1, "segment.bytes": "8000"})
        follower.become_follower(2, 1, 4, 0, (1, 2), (1, 2))
        for chunk in (sent[:7], sent[7:]):  # two fetch responses
            assert follower.append_as_follower(b"".join(bytes(b) for b in chunk), 0) == len(chunk)
        bases = follower.log.segment_base_offsets()
        assert len(bases) >= 3
        everything = b"".join(bytes(b) for b in sent)
        joined = b"".join(_wire_file(follower, b) for b in bases)
        assert joined == everything  # the leader's bytes, back to back
        kept = Stats.wire_kept
        assert follower.seal_rolled_segments() == len(bases) - 1
        assert Stats.wire_kept - kept == len(bases) - 1
        got = follower.read_wire(0, 1 << 30, bases[-1])
        assert all(type(b) is memoryview for b in got)
        assert b"".join(bytes(b) for b in got) == everything[: sum(len(b) for b in got)]
    finally:
        leader_rm.close()
        follower_rm.close()
