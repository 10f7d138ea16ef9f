"""Kafka RecordBatch v2 <-> Arrow throughput, C accelerator vs pure-Python twin, with aiokafka as the peer.

decode: wire batch bytes -> pa.RecordBatch (aiokafka peer: iterate its Cython reader, records as
Python objects). encode: pa.RecordBatch -> wire batch bytes (peer: its Cython builder from Python
values). Single thread. MB/s counts key + value payload bytes.

    python bench/bench_records.py [--seconds 1.0] [--quick]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

import pyarrow as pa
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from pylog.protocol import records as R

CODECS = {"none": 0, "lz4": 3, "zstd": 4}


def make_rows(n: int, value_size: int, seed: int) -> pa.RecordBatch:
    rnd = random.Random(seed)
    words = [bytes(rnd.choice(b"abcdefghijklmnop") for _ in range(rnd.randint(2, 9))) for _ in range(500)]
    values = []
    for _ in range(n):
        v = b" ".join(rnd.choice(words) for _ in range(value_size // 4))
        values.append((v * 2)[:value_size])
    keys = [b"key-%012d" % rnd.randrange(10**12) for _ in range(n)]
    return pa.RecordBatch.from_arrays(
        [
            pa.array(range(n), pa.int64()),
            pa.array([1_700_000_000_000 + i for i in range(n)], pa.timestamp("ms")),
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array([[]] * n, R.RECORD_SCHEMA.field("headers").type),
        ],
        schema=R.RECORD_SCHEMA,
    )


def rate(fn: Callable[[], int], seconds: float) -> float:
    """Records per second of fn (which returns the records it handled), best of repeated rounds."""
    fn()
    best = 0.0
    deadline = time.perf_counter() + seconds
    while True:
        t0 = time.perf_counter()
        n = fn()
        dt = time.perf_counter() - t0
        best = max(best, n / dt)
        if time.perf_counter() > deadline:
            return best


def line(direction: str, size: int, per: int, codec: str, label: str, rate_: float, payload: float) -> None:
    mbps = rate_ * payload / 1e6
    print(f"{direction:9} {size:>4}B {per:>6} {codec:5} {label:15} {rate_:>12,.0f} {mbps:>8.1f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--quick", action="store_true", help="fewer cases")
    args = ap.parse_args()
    impls = {"C": R.C_IMPL, "pure Python": R.PYTHON_IMPL}
    if impls["C"] is None:
        raise SystemExit("the C accelerator is not built: pip install --no-deps -e .")
    cases = [(100, 1000), (1000, 500), (100, 10)]
    head = f"{'direction':9} {'size':>5} {'batch':>6} {'codec':5} {'implementation':15} "
    head += f"{'records/s':>12} {'MB/s':>8}"
    print(head)
    print("-" * len(head))
    for value_size, per_batch in cases:
        rows = [make_rows(per_batch, value_size, seed) for seed in range(4 if per_batch > 100 else 200)]
        payload = (
            sum(len(r) for rb in rows[:1] for r in rb.column("key").to_pylist()) / per_batch + value_size
        )
        for codec_name, codec in CODECS.items():
            if args.quick and codec_name == "zstd":
                continue
            wire = [R.encode_batch(rb, base_offset=0, compression=codec) for rb in rows]
            py_rows = [
                list(zip(rb.column("key").to_pylist(), rb.column("value").to_pylist(), strict=True))
                for rb in rows
            ]
            for label, mod in impls.items():

                def decode(mod=mod, wire=wire) -> int:
                    return sum(R.decode_batch(w, impl=mod).records.num_rows for w in wire)

                def encode(mod=mod, rows=rows, codec=codec) -> int:
                    for rb in rows:
                        R.encode_batch(rb, base_offset=0, compression=codec, impl=mod)
                    return sum(rb.num_rows for rb in rows)

                secs = args.seconds if mod is R.C_IMPL else args.seconds / 2
                for direction, fn in (("decode", decode), ("encode", encode)):
                    r = rate(fn, secs)
                    line(direction, value_size, per_batch, codec_name, label, r, payload)

            def aio_decode(wire=wire) -> int:
                n = 0
                for w in wire:
                    for rec in AioBatch(w):
                        rec.key, rec.value, rec.headers  # noqa: B018
                        n += 1
                return n

            def aio_encode(codec=codec, py_rows=py_rows) -> int:
                n = 0
                for recs in py_rows:
                    b = AioBuilder(2, codec, 0, -1, -1, -1, 1 << 26)
                    for i, (k, v) in enumerate(recs):
                        b.append(i, 1_700_000_000_000 + i, k, v, [])
                    b.build()
                    n += len(recs)
                return n

            for direction, fn in (("decode", aio_decode), ("encode", aio_encode)):
                r = rate(fn, args.seconds)
                line(direction, value_size, per_batch, codec_name, "aiokafka (peer)", r, payload)
        print("-" * len(head))


if __name__ == "__main__":
    main()
