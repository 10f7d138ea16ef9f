"""The C accelerator's lz4 frame path (``decompress_records``) against its pure-Python twin (the lz4
package's frame API behind ``decompress``): the same bytes for every frame, the same error class
for every corrupt one, and whole record batches decoded alike through both."""

from __future__ import annotations

import os
import random

import lz4.frame
import pyarrow as pa
from pylog.protocol import records as rec
from pylog.protocol.errors import CorruptRecordBatch, RecordBatchTooLarge
from pylog.protocol.records import compression as C

LIMIT = 1 << 26


def test_the_accelerator_has_the_lz4_entry_point() -> None:
    if os.environ.get("PYLOG_PURE_PYTHON") == "1":
        assert C._c_lz4_frame is None, "PYLOG_PURE_PYTHON=1 leaves every frame to the pure-Python twin"
        return
    assert C._c_lz4_frame is not None, "rebuild the C accelerator: pip install --no-deps -e ."


def outcome(fn: object, *args: object) -> tuple[str, bytes | None]:
    try:
        return "ok", bytes(fn(*args))  # type: ignore[operator]
    except (CorruptRecordBatch, RecordBatchTooLarge) as exc:
        return type(exc).__name__, None


def both(frame: bytes, limit: int = LIMIT) -> tuple[tuple[str, bytes | None], tuple[str, bytes | None]]:
    fast = outcome(C.decompress_records, C.LZ4, memoryview(frame), limit)
    twin = outcome(lambda *a: C.decompress_records(*a, accelerated=False), C.LZ4, frame, limit)
    return fast, twin


def data(rng: random.Random) -> bytes:
    kind = rng.randrange(4)
    size = rng.choice([0, 1, 100, 70_000, 300_000])
    if kind == 0:
        return rng.randbytes(size)
    if kind == 1:
        return bytes([rng.randrange(3)]) * size
    unit = rng.randbytes(rng.choice([3, 17, 32, 700]))
    return (unit * (size // len(unit) + 1))[:size]


def frames(rng: random.Random, payload: bytes) -> bytes:
    return lz4.frame.compress(
        payload,
        compression_level=rng.choice([0, 3, 9]),
        block_size=rng.choice(
            [lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX256KB, lz4.frame.BLOCKSIZE_MAX1MB]
        ),
        block_linked=rng.random() < 0.2,
        content_checksum=rng.random() < 0.2,
        block_checksum=rng.random() < 0.1,
        store_size=rng.random() < 0.5,
    )


def test_well_formed_frames_decode_alike() -> None:
    seed = 20261126
    print(f"seed {seed}")
    rng = random.Random(seed)
    for _ in range(300):
        payload = data(rng)
        fast, twin = both(frames(rng, payload))
        assert fast == twin == ("ok", payload)


def test_corrupt_truncated_and_oversized_frames_fail_alike() -> None:
    seed = 4242
    print(f"seed {seed}")
    rng = random.Random(seed)
    for _ in range(600):
        payload = data(rng) or b"x"
        frame = bytearray(frames(rng, payload))
        what = rng.randrange(5)
        if what == 0:  # flip bytes anywhere (header, block sizes, block contents)
            for _ in range(rng.randint(1, 4)):
                frame[rng.randrange(len(frame))] ^= 1 << rng.randrange(8)
        elif what == 1:
            del frame[rng.randrange(len(frame)) :]
        elif what == 2:
            frame += rng.randbytes(rng.randint(1, 9))
        elif what == 3:  # a limit the content may or may not exceed
            fast, twin = both(bytes(frame), rng.randint(0, len(payload) + 10))
            assert fast[0] == twin[0] and fast[1] == twin[1]
            continue
        else:
            frame += frames(rng, payload)  # two frames back to back
        fast, twin = both(bytes(frame))
        assert fast[0] == twin[0], (what, fast[0], twin[0])
        assert fast[1] == twin[1]


def test_record_batches_decode_alike_through_both_paths() -> None:
    rng = random.Random(7)
    n = 500
    values = [(b"record %06d " % i) * rng.randint(1, 80) for i in range(n)]
    keys = [None if i % 3 else b"k%d" % i for i in range(n)]
    table = pa.record_batch(
        {
            "offset": pa.array(range(n), pa.int64()),
            "timestamp": pa.array([1_700_000_000_000 + i for i in range(n)], pa.timestamp("ms")),
            "key": pa.array(keys, pa.binary()),
            "value": pa.array(values, pa.binary()),
        }
    )
    wire = rec.encode_batch(table, base_offset=0, compression="lz4")
    fast = rec.decode_batch(wire).records
    twin = rec.decode_batch(wire, impl=rec.PYTHON_IMPL).records
    assert fast.equals(twin)
    assert fast.column("value").to_pylist() == values and fast.column("key").to_pylist() == keys
