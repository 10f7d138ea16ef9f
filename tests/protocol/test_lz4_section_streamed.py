"""``decode_section`` of an lz4 records section: the C accelerator's streamed walk (the frame
decoded a block at a time, records walked as they complete) against decompressing first and
walking after, with the same C walker, and against the pure-Python twin: the same rows for every
section, and for every broken one the same error (frame errors before record errors, then the
count, then the first bad record)."""

from __future__ import annotations

import os
import random
from collections.abc import Callable

import lz4.frame
import pyarrow as pa
from pylog.protocol import records as rec
from pylog.protocol.errors import CorruptRecordBatch, RecordBatchTooLarge
from pylog.protocol.records import batch as B
from pylog.protocol.records import compression as C

LIMIT = 1 << 26
RECORDS = rec.RECORD_SCHEMA
HEADERS = RECORDS.field("headers").type
Outcome = tuple[str, str | pa.RecordBatch]


def test_the_accelerator_has_the_streamed_entry_point() -> None:
    if os.environ.get("PYLOG_PURE_PYTHON") == "1":
        assert B._c_lz4_arrow is None, "PYLOG_PURE_PYTHON=1 leaves every frame to the pure-Python twin"
        return
    assert B._c_lz4_arrow is not None, "rebuild the C accelerator: pip install --no-deps -e ."


def rows(rng: random.Random, n: int) -> pa.RecordBatch:
    """Records whose sizes cross block boundaries: mostly small, some larger than a 64 KiB block."""

    def value() -> bytes | None:
        roll = rng.random()
        if roll < 0.05:
            return None
        size = rng.choice([0, 10, 900, 5_000]) if roll < 0.9 else rng.choice([70_000, 200_000])
        unit = rng.randbytes(rng.choice([1, 32, 500]))
        return (unit * (size // len(unit) + 1))[:size]

    return pa.RecordBatch.from_pydict(
        {
            "offset": list(range(n)),
            "timestamp": pa.array([1_700_000_000_000 + 7 * i for i in range(n)], pa.timestamp("ms")),
            "key": pa.array([None if rng.random() < 0.5 else rng.randbytes(8) for _ in range(n)],
                            pa.binary()),
            "value": pa.array([value() for _ in range(n)], pa.binary()),
            "headers": pa.array(
                [[{"key": f"h{j}", "value": rng.randbytes(3)} for j in range(rng.randrange(3))]
                 for _ in range(n)],
                HEADERS,
            ),
        },
        schema=rec.RECORD_SCHEMA,
    )


def plain_section(table: pa.RecordBatch) -> bytes:
    return rec.encode_batch(table, base_offset=0)[rec.HEADER_SIZE :]


def kafka_frame(rng: random.Random, section: bytes) -> bytes:
    """An lz4 frame as Kafka's clients write it: independent blocks, no checksums."""
    return lz4.frame.compress(
        section,
        compression_level=rng.choice([0, 9]),
        block_size=rng.choice(
            [lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX256KB, lz4.frame.BLOCKSIZE_MAX4MB]
        ),
        block_linked=False,
        content_checksum=False,
        store_size=rng.random() < 0.5,
    )


def outcome(fn: Callable[[], pa.RecordBatch]) -> Outcome:
    try:
        return "ok", fn()
    except (CorruptRecordBatch, RecordBatchTooLarge) as exc:
        return type(exc).__name__, str(exc)


def three_ways(frame: bytes, count: int, limit: int = LIMIT) -> tuple[Outcome, Outcome, Outcome]:
    """(streamed, decompressed first then the C walk, the pure-Python twin)."""
    streamed = outcome(lambda: rec.decode_section(C.LZ4, memoryview(frame), count, 5, 9, limit))
    two_step = outcome(
        lambda: rec.decode_records(C.decompress_records(C.LZ4, frame, limit), count, 5, 9, impl=rec.C_IMPL)
    )
    twin = outcome(lambda: rec.decode_section(C.LZ4, frame, count, 5, 9, limit, impl=rec.PYTHON_IMPL))
    return streamed, two_step, twin


def same(a: Outcome, b: Outcome) -> bool:
    if a[0] != b[0]:
        return False
    return a[1].equals(b[1]) if a[0] == "ok" else a[1] == b[1]  # type: ignore[union-attr]


def test_well_formed_sections_decode_alike_and_take_the_streamed_path() -> None:
    seed = 20261126
    print(f"seed {seed}")
    rng = random.Random(seed)
    for _ in range(60):
        n = rng.choice([1, 2, 40, 300])
        table = rows(rng, n)
        frame = kafka_frame(rng, plain_section(table))
        if B._c_lz4_arrow is not None:
            importer = pa.RecordBatch._import_from_c
            got = B._c_lz4_arrow(frame, n, 0, 1_700_000_000_000, LIMIT, importer, RECORDS)
            assert got is not None, "a Kafka-style frame is walked by the accelerator"
            got.validate(full=True)
            assert got.equals(table)
        streamed, two_step, twin = three_ways(frame, n)
        assert streamed[0] == "ok" and same(streamed, two_step) and same(streamed, twin)


def test_broken_records_inside_a_sound_frame_fail_alike() -> None:
    seed = 77
    print(f"seed {seed}")
    rng = random.Random(seed)
    for _ in range(300):
        n = rng.choice([1, 3, 30])
        section = bytearray(plain_section(rows(rng, n)))
        count = n
        what = rng.randrange(4)
        if what == 0:
            for _ in range(rng.randint(1, 3)):
                section[rng.randrange(len(section))] ^= 1 << rng.randrange(8)
        elif what == 1:
            del section[rng.randrange(len(section)) :]
        elif what == 2:
            section += rng.randbytes(rng.randint(1, 9))
        else:
            count = rng.choice([0, n - 1, n + 1, 10**9])
        streamed, two_step, twin = three_ways(kafka_frame(rng, bytes(section)), count)
        assert same(streamed, two_step), (what, streamed, two_step)
        assert streamed[0] == twin[0], (what, streamed, twin)


def test_corrupt_frames_fail_before_their_records_and_the_bound_holds() -> None:
    seed = 4243
    print(f"seed {seed}")
    rng = random.Random(seed)
    for _ in range(300):
        n = rng.choice([3, 30])
        section = bytearray(plain_section(rows(rng, n)))
        if rng.random() < 0.5:  # bad records too: the frame's error still wins
            section[rng.randrange(len(section))] ^= 0xFF
        frame = bytearray(kafka_frame(rng, bytes(section)))
        what = rng.randrange(3)
        limit = LIMIT
        if what == 0:
            for _ in range(rng.randint(1, 4)):
                frame[rng.randrange(len(frame))] ^= 1 << rng.randrange(8)
        elif what == 1:
            del frame[rng.randrange(len(frame)) :]
        else:
            limit = rng.randint(0, len(section) + 10)
        streamed, two_step, twin = three_ways(bytes(frame), n, limit)
        assert same(streamed, two_step), (what, streamed, two_step)
        assert streamed[0] == twin[0], (what, streamed, twin)


def test_a_frame_the_accelerator_leaves_alone_goes_the_two_step_way() -> None:
    table = rows(random.Random(5), 20)
    checked = lz4.frame.compress(plain_section(table), content_checksum=True)
    if B._c_lz4_arrow is not None:
        assert B._c_lz4_arrow(checked, 20, 0, 0, LIMIT, pa.RecordBatch._import_from_c, RECORDS) is None
    assert rec.decode_section(C.LZ4, checked, 20, 0, 1_700_000_000_000).equals(table)


def test_batches_decode_alike_through_decode_batch() -> None:
    rng = random.Random(11)
    table = rows(rng, 200)
    wire = rec.encode_batch(table, base_offset=0, compression="lz4")
    assert rec.decode_batch(wire).records.equals(rec.decode_batch(wire, impl=rec.PYTHON_IMPL).records)
