"""encode_message: messages cut from a thread's long-lived stream chunk are standalone IPC messages."""

from __future__ import annotations

import random
import threading

import pyarrow as pa
from pylog.storage import ipc
from pylog.storage.schema import BATCH_DTYPE

from pylog.model import RECORD_SCHEMA

HEADERS = RECORD_SCHEMA.field("headers").type


def batch(rng: random.Random, n: int, value_size: int) -> pa.RecordBatch:
    rb = pa.RecordBatch.from_pydict(
        {
            "offset": list(range(n)),
            "timestamp": pa.array(list(range(n)), pa.timestamp("ms")),
            "key": pa.array([None if rng.random() < 0.5 else b"k"] * n, pa.binary()),
            "value": [rng.randbytes(value_size)] * n,
            "headers": pa.array([[{"key": "a", "value": b"b"}]] * n, HEADERS),
        },
        schema=RECORD_SCHEMA,
    )
    return rb.slice(rng.randint(0, n - 1)) if rng.random() < 0.3 else rb


def check(seed: int, rounds: int) -> None:
    rng = random.Random(seed)
    for _ in range(rounds):
        n = rng.choice([1, 5, 100, 3000])
        rb = batch(rng, n, rng.choice([0, 10, 1000, 300_000 if n < 5 else 10]))
        entries = rng.randbytes(BATCH_DTYPE.itemsize * rng.choice([1, 3]))
        message = ipc.encode_message(rb, entries)
        info = ipc.parse_message(memoryview(message), 0)
        assert info is not None and info.length == message.size and info.batches == entries
        assert ipc.read_batch(message, 0, message.size).equals(rb)


def test_messages_across_chunk_boundaries_and_oversized_batches() -> None:
    check(0, 400)


def test_threads_encode_independently() -> None:
    errors: list[BaseException] = []

    def run(seed: int) -> None:
        try:
            check(seed, 100)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_a_message_outlives_its_chunk() -> None:
    rng = random.Random(9)
    rb = batch(rng, 10, 100)
    first = ipc.encode_message(rb, bytes(BATCH_DTYPE.itemsize))
    for _ in range(2000):  # fill and drop several chunks
        ipc.encode_message(batch(rng, 10, 1000), bytes(BATCH_DTYPE.itemsize))
    assert ipc.read_batch(first, 0, first.size).equals(rb)


def test_compressed_messages_whose_ratio_changes() -> None:
    """A compressing writer sizes a message from the last one's ratio: well-compressed batches
    followed by incompressible ones (the guess falls short) still come out whole and readable."""
    seed = 7
    print(f"seed {seed}")
    rng = random.Random(seed)
    for codec in ("lz4", "zstd"):
        for _ in range(60):
            size = rng.choice([10, 1000, 20_000])
            n = rng.choice([5, 100, 400])
            if rng.random() < 0.5:
                values = [bytes([rng.randrange(4)]) * size] * n  # compresses very well
            else:
                values = [rng.randbytes(size) for _ in range(n)]  # does not compress at all
            rb = pa.RecordBatch.from_pydict(
                {
                    "offset": list(range(n)),
                    "timestamp": pa.array(list(range(n)), pa.timestamp("ms")),
                    "key": pa.nulls(n, pa.binary()),
                    "value": values,
                    "headers": pa.array([[]] * n, HEADERS),
                },
                schema=RECORD_SCHEMA,
            )
            entries = rng.randbytes(BATCH_DTYPE.itemsize)
            message = ipc.encode_message(rb, entries, codec)
            info = ipc.parse_message(memoryview(message), 0)
            assert info is not None and info.length == message.size and info.batches == entries
            assert ipc.read_batch(message, 0, message.size).equals(rb)
