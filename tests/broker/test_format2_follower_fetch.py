"""A format 2 follower appends a fetch as runs walked together (`rows_from_fetch`): plain, lz4 and
zstd batches, a LogAppendTime batch, a control batch and a gzip batch (stored plain) come back
byte for byte and as the same rows as when each batch is appended on its own; a corrupt batch in
the middle leaves the batches before it appended."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pylog.protocol.errors import CorruptRecordBatch
from pylog.protocol.records import encode_batch, encode_control_batch
from pylog.protocol.records.header import compute_crc

from pylog.broker.datapath.partition import Partition
from pylog.model import RECORD_SCHEMA
from pylog.onecopy_kafka import rows_from_fetch, rows_from_kafka

HEADERS = RECORD_SCHEMA.field("headers").type
EPOCH = 3


def rows(n: int, first: int, seed: int) -> pa.RecordBatch:
    """Null, short and long keys and values, headers with null values."""
    rng = np.random.default_rng(seed)
    keys = [None if i % 4 == 0 else b"k%d" % i * (i % 9) for i in range(n)]
    values = [None if i % 6 == 5 else rng.bytes(int(rng.integers(0, 60))) for i in range(n)]
    headers = [[{"key": f"h{j}" * (1 + i % 8), "value": None if j else rng.bytes(15)} for j in range(i % 3)]
               for i in range(n)]
    return pa.RecordBatch.from_arrays(
        [pa.array(range(first, first + n), pa.int64()),
         pa.array([1_700_000_000_000 + 7 * i for i in range(n)], pa.timestamp("ms")),
         pa.array(keys, pa.binary()), pa.array(values, pa.binary()), pa.array(headers, HEADERS)],
        schema=RECORD_SCHEMA)


def leader_batches() -> list[bytes]:
    """The leader's batches as a fetch returns them: consecutive offsets, its epoch."""
    out: list[bytes] = []
    offset = 0
    for i, (codec, n) in enumerate([("none", 5), ("lz4", 30), ("lz4", 1), ("zstd", 12), ("none", 3),
                                    ("lz4", 7), ("gzip", 4), ("control", 1), ("none", 9), ("append", 6)]):
        if codec == "control":
            b = encode_control_batch(base_offset=offset, producer_id=9, producer_epoch=0, commit=False,
                                     coordinator_epoch=1, timestamp_ms=1_700_000_000_500,
                                     partition_leader_epoch=EPOCH)
        else:
            b = encode_batch(rows(n, offset, i), base_offset=offset, partition_leader_epoch=EPOCH,
                             compression="lz4" if codec == "append" else codec,
                             timestamp_type=1 if codec == "append" else 0,
                             max_timestamp=1_700_000_009_999 if codec == "append" else None)
        out.append(bytes(b))
        offset += n
    return out


def follower(path: Path) -> Partition:
    return Partition("t", 0, None, path, {"pylog.segment.format": "2"}, now_ms=1,
                     wire_cache_bytes=1 << 20, max_uncompressed_bytes=1 << 26)


def stored(p: Partition) -> tuple[list[bytes], pa.Table]:
    wire = [bytes(b) for b in p.log.read_wire(0, 1 << 30)]
    return wire, p.log.read_table()


def test_a_fetch_appended_as_runs_is_what_batch_by_batch_appends_store(tmp_path: Path) -> None:
    batches = leader_batches()
    fetch = b"".join(batches)
    runs, error = rows_from_fetch(memoryview(fetch), log_end_offset=0)
    assert error is None
    assert sum(len(r.batches) for r in runs) == len(batches)
    assert len(runs) < len(batches)  # consecutive batches are walked together

    together = follower(tmp_path / "together")
    assert together.append_as_follower(fetch, now_ms=5) == len(batches)
    one_by_one = follower(tmp_path / "one")
    for b in batches:
        part = rows_from_kafka(b, base_offset=struct.unpack_from(">q", b)[0])
        one_by_one.log.append_replicated_rows([part], now_ms=5)

    wire, table = stored(together)
    assert stored(one_by_one) == (wire, table)
    plain = [b for b in batches if (struct.unpack_from(">h", b, 21)[0] & 7) != 1]  # gzip is stored plain
    assert [w for w in wire if w in plain] == plain
    assert table.num_rows == sum(struct.unpack_from(">i", b, 57)[0] for b in batches)
    appended = table.filter(pc.greater_equal(table["offset"], 72)).column("timestamp")
    assert appended.cast(pa.int64()).to_pylist() == [1_700_000_009_999] * 6  # LogAppendTime
    assert together.log.log_end_offset == 78

    again = follower(tmp_path / "again")  # a refetch from inside the log skips what it holds
    again.append_as_follower(b"".join(batches[:4]), now_ms=5)
    assert again.append_as_follower(fetch, now_ms=6) == len(batches) - 4
    assert stored(again) == (wire, table)


@pytest.mark.parametrize("damage", ["crc", "records"])
def test_a_corrupt_batch_leaves_the_batches_before_it(tmp_path: Path, damage: str) -> None:
    batches = leader_batches()
    bad = bytearray(batches[4])  # plain, inside a run of lz4 / zstd / plain batches
    if damage == "crc":
        bad[-1] ^= 0xFF
    else:  # the first record's length past the end of the batch, the CRC signed again
        bad[61] = 0x7E
        struct.pack_into(">I", bad, 17, compute_crc(bytes(bad)))
    p = follower(tmp_path / "p")
    with pytest.raises(CorruptRecordBatch):
        p.append_as_follower(b"".join([*batches[:4], bytes(bad), *batches[5:]]), now_ms=5)
    assert p.log.log_end_offset == 48
    assert [bytes(b) for b in p.log.read_wire(0, 1 << 30)] == batches[:4]
