"""A leader's fetch of history its wire cache no longer holds: sealed segments answer with slices
of their `.wire` file, byte for byte what encoding the stored batch gives (and what the producer
sent, base offset and leader epoch aside); other batches are still encoded from Arrow."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
from pylog.protocol import records as rec

from pylog.broker.datapath.batch_bytes import encode_stored
from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.config import BrokerConfig


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


def test_history_is_served_from_wire_files(tmp_path: Path) -> None:
    config = BrokerConfig({"pylog.wire.cache.bytes": "1", "pylog.wire.cache.total.bytes": "1"})
    replicas = ReplicaManager(config, tmp_path, lambda: 0)
    try:
        # `.wire` files belong to format 1 (format 2 serves its sections from the data file)
        configs = {"pylog.segment.format": "1", "segment.bytes": "8000"}
        part = replicas.ensure_partition("a", 0, uuid.uuid4(), configs)
        part.become_leader(1, 3, 0, (1,), (1,), 0)
        sent = [_batch(i, "lz4" if i % 2 else "none") for i in range(30)]
        for b in sent:
            assert part.append_as_leader(b, 0).error == 0
        assert part.seal_rolled_segments() >= 2
        hw = part.high_watermark
        assert hw == 600
        got = part.read_wire(0, 1 << 30, hw)
        stored = part.log.read(0, 1 << 30)
        assert [bytes(b) for b in got] == [encode_stored(s.meta, s.records) for s in stored]
        sealed = sum(1 for b in got if type(b) is memoryview)
        active = part.log.segment_base_offsets()[-1]
        assert sealed == len(part.log.batch_metadata(0, active)) > 0
        for mine, theirs in zip(got, sent):  # the producer's bytes but for offset, epoch and CRC
            assert bytes(mine)[21:] == theirs[21:] or rec.parse_header(mine).compression
        # a fetch from the middle, bounded: whole batches from the one holding the offset
        first = part.read_wire(45, len(got[2]) + 1, hw)
        assert [bytes(b) for b in first] == [bytes(got[2])]
    finally:
        replicas.close()
