"""``read_topic`` over Arrow Flight against over the Kafka protocol, side by side on the same data.

    python bench/bench_flight_read.py                      # 2M records of 100 B (lz4), 4 partitions
    python bench/bench_flight_read.py --records 500000 --repeat 3
    python bench/bench_flight_read.py --format 1         # the topic's segments in format 1 (default: 2)
    python bench/bench_flight_read.py --segment-compression none   # segments stored decompressed

A ``pylog broker`` process with ``pylog.flight.listeners`` is started on a fresh data directory and
the records are produced with ``pylog.write_topic`` (lz4). Each row reads the whole topic with
``pylog.read_topic(bootstrap_servers=..., transport=...)`` (best of ``--repeat``, after one warm-up
read each) and reports records/s, the broker's CPU seconds (from ``/proc/<pid>/stat``) per million
records, and the client's. Goal (the Flight row against the Kafka row): at least 2x the records/s
and at most 0.3x the broker CPU per record.

What the broker's CPU buys on each path: over Kafka it sends the producers' stored batches as they
are (no decoding), so its CPU per record is a few /proc ticks for the whole read. Over Flight, DoGet
reads the segments' Arrow messages (lz4 or zstd bodies are decompressed by Arrow's reader; segments
stored plain with ``pylog.segment.compression=none`` are mapped as they are) and gRPC frames and
copies the decoded rows; pylog's own Python per batch (planning, constant columns,
slicing at the range bounds) is a few percent of it.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BenchBroker, create_topic
from pylog.storage.config import DEFAULT_SEGMENT_FORMAT, SEGMENT_COMPRESSION, SEGMENT_FORMATS

import pylog
from pylog.local import free_port

TOPIC = "bench-flight"
PARTITIONS = 4
VALUE_BYTES = 100


def produce(bootstrap: str, n: int) -> None:
    rng = np.random.default_rng(7)
    chunk = 500_000
    for lo in range(0, n, chunk):
        m = min(chunk, n - lo)
        raw = rng.integers(65, 91, size=m * VALUE_BYTES, dtype=np.uint8)
        offsets = np.arange(0, (m + 1) * VALUE_BYTES, VALUE_BYTES, dtype=np.int32)
        values = pa.Array.from_buffers(pa.binary(), m, [None, pa.py_buffer(offsets), pa.py_buffer(raw)])
        keys = pa.array([b"key-%d" % i for i in range(lo, lo + m)], pa.binary())
        pylog.write_topic(pa.table({"key": keys, "value": values}), TOPIC, bootstrap_servers=bootstrap,
                          compression="lz4", progress=False)


def client_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(broker: BenchBroker, transport: str, n: int, repeat: int) -> tuple[float, float, float]:
    """(best seconds, broker CPU s and client CPU s of that read) for one transport."""
    best = (float("inf"), 0.0, 0.0)
    for _ in range(repeat):
        cpu0, mine0, t0 = broker.stats().cpu_s, client_cpu(), time.perf_counter()
        table = pylog.read_topic(TOPIC, bootstrap_servers=broker.bootstrap, transport=transport,
                                 progress=False)
        elapsed = time.perf_counter() - t0
        row = (elapsed, broker.stats().cpu_s - cpu0, client_cpu() - mine0)
        if table.num_rows != n:
            raise SystemExit(f"{transport}: read {table.num_rows} records, expected {n}")
        del table
        best = min(best, row)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--format", type=int, choices=SEGMENT_FORMATS, default=DEFAULT_SEGMENT_FORMAT,
                        help="the topic's pylog.segment.format (1: Arrow columns and .wire; 2: one copy, "
                             "the producer's batches kept)")
    parser.add_argument("--segment-compression", choices=SEGMENT_COMPRESSION, default="producer",
                        help="the topic's pylog.segment.compression (none: stored decompressed)")
    args = parser.parse_args()
    n = args.records
    flight_url = f"grpc://127.0.0.1:{free_port('127.0.0.1')}"
    broker = BenchBroker("pylog", config={"pylog.flight.listeners": flight_url}).start()
    try:
        stored = {"pylog.segment.format": str(args.format),
                  "pylog.segment.compression": args.segment_compression}
        create_topic(broker.bootstrap, TOPIC, PARTITIONS, stored)
        t0 = time.perf_counter()
        produce(broker.bootstrap, n)
        print(f"{n:,} records of {VALUE_BYTES} B (lz4) in {PARTITIONS} partitions, segment format "
              f"{args.format} ({args.segment_compression}), produced in "
              f"{time.perf_counter() - t0:.1f}s; Flight at {flight_url}; best of {args.repeat}")
        for transport in ("kafka", "flight"):  # warm-up: connections, page cache, imports
            pylog.read_topic(TOPIC, bootstrap_servers=broker.bootstrap, transport=transport, progress=False,
                             ending_offsets={TOPIC: {str(p): 1000 for p in range(PARTITIONS)}})
        rows = {t: measure(broker, t, n, args.repeat) for t in ("kafka", "flight")}
    finally:
        broker.stop()
    print(f"{'read_topic over':<16}{'seconds':>9}{'records/s':>13}{'broker CPU s':>14}"
          f"{'broker CPU s/M rec':>20}{'client CPU s':>14}")
    for transport, (seconds, broker_cpu, mine) in rows.items():
        print(f"{transport:<16}{seconds:>9.3f}{n / seconds:>13,.0f}{broker_cpu:>14.3f}"
              f"{broker_cpu / n * 1e6:>20.3f}{mine:>14.3f}")
    (ks, kcpu, _), (fs, fcpu, _) = rows["kafka"], rows["flight"]
    print(f"Flight / Kafka: {ks / fs:.2f}x the records/s (goal >= 2x), "
          f"{fcpu / kcpu if kcpu else float('nan'):.2f}x the broker CPU per record (goal <= 0.3x)")


if __name__ == "__main__":
    main()
