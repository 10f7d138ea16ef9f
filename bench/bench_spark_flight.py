"""Spark's batch read of a topic through a broker: ``format("pylog")`` over Arrow Flight against the
same read over the Kafka protocol, side by side on the same data.

    python bench/bench_spark_flight.py                     # 1M records of 100 B (lz4), 4 partitions
    python bench/bench_spark_flight.py --records 2000000 --format 1

A ``pylog broker`` process with ``pylog.flight.listeners`` is started on a fresh data directory, a
topic of 4 partitions is created (``pylog.segment.format`` as ``--format``, by default the broker's
default, and ``pylog.segment.compression`` as ``--segment-compression``) and the records are
produced with ``pylog.write_topic`` (lz4). One local Spark session (``local[2]``) then reads the
topic with ``spark.read.format("pylog")`` and ``kafka.bootstrap.servers``, ``transport`` set to
``kafka`` or ``flight``, and computes ``count(*)`` and ``sum(length(value))``:

- **kafka**: the driver plans offset ranges with ListOffsets; each task fetches its range with
  Fetch from the partition's leader and decodes the Kafka batches on the executor;
- **flight**: the driver plans from GetFlightInfo (one endpoint per partition, at its leader's Flight
  server); each task reads its range with one DoGet at that endpoint, Arrow batches as stored.

Each row is the best of ``--repeat`` after one warm-up read of each transport (which also starts
Spark's Python workers): wall seconds, records/s, and the broker's CPU seconds (``/proc/<pid>/stat``)
per million records. The executors run in this machine's Python workers, so the wall time includes
Spark's per-batch Arrow hand-over to the JVM on both rows.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_flight_read import PARTITIONS, TOPIC, VALUE_BYTES, produce
from common import BenchBroker, create_topic
from pylog.storage.config import DEFAULT_SEGMENT_FORMAT, SEGMENT_COMPRESSION, SEGMENT_FORMATS

from pylog.local import free_port

AGGREGATES = ("count(*) as n", "sum(length(value)) as b")
TRANSPORTS = ("kafka", "flight")


def spark_session(conf: dict[str, str]) -> object:
    from pyspark.sql import SparkSession

    import pylog.spark

    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = (SparkSession.builder.master("local[2]").appName("bench-spark-flight")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC"))
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    pylog.spark.register(spark)
    return spark


def read(spark: object, broker: BenchBroker, transport: str) -> tuple[int, int]:
    """(count, total value bytes) of the topic read through `transport`."""
    options = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": TOPIC, "transport": transport}
    df = spark.read.format("pylog").options(**options).load()  # type: ignore[attr-defined]
    row = df.selectExpr(*AGGREGATES).collect()[0]
    return int(row.n), int(row.b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--format", type=int, choices=SEGMENT_FORMATS, default=DEFAULT_SEGMENT_FORMAT,
                        help="the topic's pylog.segment.format (1: Arrow columns and .wire; 2: one copy, "
                             "the producer's batches kept)")
    parser.add_argument("--segment-compression", choices=SEGMENT_COMPRESSION, default="producer",
                        help="the topic's pylog.segment.compression (none: stored decompressed)")
    parser.add_argument("--conf", action="append", default=[], help="extra Spark conf key=value")
    args = parser.parse_args()
    n = args.records
    flight_url = f"grpc://127.0.0.1:{free_port('127.0.0.1')}"
    broker = BenchBroker("pylog", config={"pylog.flight.listeners": flight_url}).start()
    spark = None
    rows: dict[str, tuple[float, float]] = {}
    try:
        stored = {"pylog.segment.format": str(args.format),
                  "pylog.segment.compression": args.segment_compression}
        create_topic(broker.bootstrap, TOPIC, PARTITIONS, stored)
        t0 = time.perf_counter()
        produce(broker.bootstrap, n)
        print(f"{n:,} records of {VALUE_BYTES} B (lz4) in {PARTITIONS} partitions, segment format "
              f"{args.format} ({args.segment_compression}), produced in {time.perf_counter() - t0:.1f}s; "
              f"Flight at {flight_url}; "
              f"Spark local[2], best of {args.repeat}")
        spark = spark_session(dict(c.split("=", 1) for c in args.conf))
        expected = (n, n * VALUE_BYTES)
        for transport in TRANSPORTS:  # warm-up: Python workers, imports, page cache
            got = read(spark, broker, transport)
            if got != expected:
                raise SystemExit(f"{transport}: read {got}, expected {expected}")
        for transport in TRANSPORTS:
            best = (float("inf"), 0.0)
            for _ in range(args.repeat):
                cpu0, t0 = broker.stats().cpu_s, time.perf_counter()
                read(spark, broker, transport)
                best = min(best, (time.perf_counter() - t0, broker.stats().cpu_s - cpu0))
            rows[transport] = best
    finally:
        if spark is not None:
            spark.stop()  # type: ignore[attr-defined]
        broker.stop()
    print(f"{'Spark format(pylog) over':<26}{'seconds':>9}{'records/s':>13}{'broker CPU s':>14}"
          f"{'broker CPU s/M rec':>20}")
    for transport, (seconds, cpu) in rows.items():
        print(f"{transport:<26}{seconds:>9.3f}{n / seconds:>13,.0f}{cpu:>14.3f}{cpu / n * 1e6:>20.3f}")
    (ks, kcpu), (fs, fcpu) = rows["kafka"], rows["flight"]
    print(f"Flight / Kafka: {ks / fs:.2f}x the records/s, "
          f"{fcpu / kcpu if kcpu else float('nan'):.2f}x the broker CPU per record")


if __name__ == "__main__":
    main()
