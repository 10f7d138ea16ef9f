"""Flight SQL next to the data against pulling the topic to the client, on N records of 100-byte
values over 4 partitions (lz4), all written in the last hour.

    python bench/bench_flight_sql.py                    # 2M records (about 20 s on 2 shared cores)
    python bench/bench_flight_sql.py --records 200000   # smaller

A real ``pylog broker`` with ``pylog.flight.listeners`` is started on a fresh data directory and
the records are produced with ``pylog.write_topic``. Then, each the best of three runs:

- Flight SQL through ADBC's driver: ``select count(*) from bench where timestamp > now() -
  interval 1 hour`` (DuckDB on the broker, only the count crosses the network);
- the SDK pulling the topic (every column) through the Kafka protocol
  (``read_topic(bootstrap_servers=..., transport="kafka")``) and counting the same rows in the client
  with pyarrow.

Printed: seconds, rows/s and the broker's CPU seconds per million rows of each.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import proc_stats

import pylog

TOPIC = "bench"
PARTITIONS = 4
VALUE_BYTES = 100
QUERY = f"select count(*) as n from {TOPIC} where timestamp > now() - interval 1 hour"


def best_of(fn: Callable[[], Any], pid: int, repeat: int = 3) -> tuple[float, float, Any]:
    """(best wall seconds, the broker's CPU seconds in that run, result)."""
    best = (float("inf"), 0.0, None)
    for _ in range(repeat):
        cpu0, t0 = proc_stats(pid).cpu_s, time.perf_counter()
        out = fn()
        took, cpu = time.perf_counter() - t0, proc_stats(pid).cpu_s - cpu0
        if took < best[0]:
            best = (took, cpu, out)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=2_000_000)
    args = parser.parse_args()
    import adbc_driver_flightsql.dbapi as flight_sql
    from confluent_kafka.admin import AdminClient, NewTopic

    config = {"pylog.flight.listeners": "grpc://127.0.0.1:0"}
    with tempfile.TemporaryDirectory(prefix="bench-flight-sql-") as tmp, \
            pylog.LocalBroker(Path(tmp) / "data", config=config) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        n = args.records
        rng = np.random.default_rng(7)
        offsets = pa.py_buffer((np.arange(n + 1, dtype=np.int32) * VALUE_BYTES).tobytes())
        data = pa.py_buffer(rng.bytes(VALUE_BYTES * n))
        values = pa.Array.from_buffers(pa.binary(), n, [None, offsets, data])
        t0 = time.perf_counter()
        rows = pa.table({"value": values, "partition": pa.array(np.arange(n) % PARTITIONS, pa.int32())})
        pylog.write_topic(rows, TOPIC, bootstrap_servers=b.bootstrap_servers, partition="partition",
                          compression="lz4")
        print(f"produced {n:,} records of {VALUE_BYTES} B over {PARTITIONS} partitions in "
              f"{time.perf_counter() - t0:.1f} s")
        pid = b.pid
        assert pid is not None and b.flight_url is not None

        with flight_sql.connect(b.flight_url, autocommit=True) as conn:
            def sql_count() -> int:
                with conn.cursor() as cur:
                    cur.execute(QUERY)
                    return int(cur.fetch_arrow_table()["n"][0].as_py())

            sql = best_of(sql_count, pid)

        kafka_only = {"transport": "kafka"} if "transport" in inspect.signature(pylog.read_topic).parameters \
            else {}

        def pull_count() -> int:
            table = pylog.read_topic(TOPIC, bootstrap_servers=b.bootstrap_servers, **kafka_only)
            utc = pa.timestamp("us", tz="UTC")
            since = pa.scalar(int((time.time() - 3600) * 1e6), utc)
            return int(pc.sum(pc.greater(table["timestamp"].cast(utc), since)).as_py())

        pull = best_of(pull_count, pid)
        assert sql[2] == pull[2] == n, (sql[2], pull[2], n)

    print(f"\ncount(*) where timestamp > now() - 1h over {n:,} records (best of 3)")
    print(f"{'path':<44}{'seconds':>9}{'rows/s':>14}{'broker CPU s/M rows':>22}")
    for name, (took, cpu, _) in [("Flight SQL (ADBC, DuckDB on the broker)", sql),
                                 ("read_topic over Kafka + count in client", pull)]:
        print(f"{name:<44}{took:>9.3f}{n / took:>14,.0f}{cpu / n * 1e6:>22.3f}")
    print(f"Flight SQL / pull: {pull[0] / sql[0]:.1f}x faster")


if __name__ == "__main__":
    main()
