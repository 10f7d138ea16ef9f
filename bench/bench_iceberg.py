"""Iceberg tables kept by the broker: how fresh they stay and how fast a backlog is materialised.

    python bench/bench_iceberg.py                      # defaults below
    python bench/bench_iceberg.py --backlog 200000 --rate 1000 --seconds 10

One ``pylog broker`` (fresh data directory, its embedded SQLite catalog). Rows:

- **freshness**, for each ``pylog.iceberg.commit.interval.ms`` in ``--intervals``: once the table
  holds a first record (the materialiser is running), confluent-kafka produces ``--rate`` records a
  second for ``--seconds`` to a 3-partition topic;
  afterwards every data file of the table is matched with the snapshot that added it (pyiceberg's
  ``inspect.entries``) and each record's freshness is that snapshot's commit time minus the record's
  timestamp (CreateTime: when the producer made it). p50 / p99 / max in seconds.
- **materialisation**: ``--backlog`` records are produced first, then the table is turned on
  (IncrementalAlterConfigs); timed from there until the table's last snapshot counts them all
  (``total-records``): the broker noticing the config (within a second), the materialiser's start,
  reading, writing Parquet and committing. Kafka layout (100-byte values), and registry layout (flat Avro
  records written with ``write_topic(value_schema="registry")``, decoded into columns).
- **baseline**: the same backlog the way a notebook would do it by hand, ``read_topic`` then one
  ``table.append`` through pyiceberg into a fresh table of the same layout, in this process.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BenchBroker, create_topic, free_port

import pylog
from pylog.iceberg import layout as L
from pylog.iceberg import open_catalog


def alter(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)


def total_records(data_dir: Path, table: str) -> int:
    try:
        snap = open_catalog(data_dir).load_table(table).current_snapshot()
    except Exception:
        return 0
    return 0 if snap is None else int(snap.summary.additional_properties.get("total-records", 0))


def wait_total(data_dir: Path, table: str, n: int, timeout_s: float) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if total_records(data_dir, table) >= n:
            return time.monotonic()
        time.sleep(0.05)
    raise TimeoutError(f"{table} did not reach {n} records in {timeout_s}s")


def freshness(broker: BenchBroker, interval_ms: int, rate: int, seconds: float) -> dict[str, float]:
    from confluent_kafka import Producer

    topic = f"fresh-{interval_ms}"
    create_topic(broker.bootstrap, topic, 3)
    alter(broker.bootstrap, topic, {"pylog.iceberg.enable": "true",
                                    "pylog.iceberg.commit.interval.ms": str(interval_ms)})
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    data_dir = broker.tmp / "data"
    p.produce(topic, key=b"warm-up", value=b"warm-up")  # the materialiser and its table are up first
    p.flush(30)
    wait_total(data_dir, f"pylog.{topic}", 1, interval_ms / 1000 + 60)
    warm = {s.snapshot_id for s in open_catalog(data_dir).load_table(f"pylog.{topic}").metadata.snapshots}
    value = b"x" * 100
    n = int(rate * seconds)
    start = time.monotonic()
    for i in range(n):
        p.produce(topic, key=str(i).encode(), value=value)
        ahead = start + (i + 1) / rate - time.monotonic()
        if ahead > 0:
            p.poll(0)
            time.sleep(ahead)
    p.flush(60)
    wait_total(data_dir, f"pylog.{topic}", n + 1, interval_ms / 1000 + 60)
    table = open_catalog(data_dir).load_table(f"pylog.{topic}")
    committed_at = {s.snapshot_id: s.timestamp_ms for s in table.metadata.snapshots}
    entries = table.inspect.entries()
    lags = []
    for snap_id, df in zip(entries["snapshot_id"].to_pylist(), entries["data_file"].to_pylist()):
        if snap_id in warm:
            continue
        ts = pq.read_table(df["file_path"].removeprefix("file://"), columns=["timestamp"])["timestamp"]
        lags.append(committed_at[snap_id] - ts.cast(pa.int64()).to_numpy() // 1000)
    lag = np.concatenate(lags) / 1000
    return {"records": float(len(lag)), "p50": float(np.percentile(lag, 50)),
            "p99": float(np.percentile(lag, 99)), "max": float(lag.max()),
            "commits": float(len(committed_at) - len(warm))}


def backlog_row(broker: BenchBroker, topic: str, n: int, *, registry_url: str | None) -> dict[str, float]:
    from confluent_kafka import Producer

    if registry_url is None:
        create_topic(broker.bootstrap, topic, 3)
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.num.messages": 10000})
        value = b"v" * 100
        for i in range(n):
            p.produce(topic, key=str(i % 1000).encode(), value=value)
            if i % 10000 == 0:
                p.poll(0)
        p.flush(120)
    else:
        create_topic(broker.bootstrap, topic, 3)
        rows = pa.table({"id": np.arange(n), "customer": pa.array([f"c{i % 977}" for i in range(n)]),
                         "amount": np.arange(n) * 0.5, "ok": np.arange(n) % 2 == 0})
        pylog.write_topic(rows, topic, bootstrap_servers=broker.bootstrap, value_schema="registry",
                          schema_registry_url=registry_url, progress=False)
    data_dir = broker.tmp / "data"
    t0 = time.monotonic()
    alter(broker.bootstrap, topic, {"pylog.iceberg.enable": "true",
                                    "pylog.iceberg.commit.interval.ms": "1000"})
    done = wait_total(data_dir, f"pylog.{topic}", n, 600)
    return {"seconds": done - t0, "rate": n / (done - t0)}


def baseline_row(broker: BenchBroker, topic: str, n: int) -> dict[str, float]:
    """read_topic then one pyiceberg append into a fresh table in another catalog (this process)."""
    import tempfile

    t0 = time.monotonic()
    records = pylog.read_topic(topic, bootstrap_servers=broker.bootstrap, include_headers=True,
                               progress=False)
    columns = ["offset", "timestamp", "key", "value", "headers", "partition"]
    rows = L.kafka_rows(records.select(columns), topic)
    catalog = open_catalog(tempfile.mkdtemp(prefix="bench-iceberg-"))
    catalog.create_namespace_if_not_exists("pylog")
    table = catalog.create_table("pylog.baseline", schema=rows.schema)
    table.append(rows)
    done = time.monotonic()
    assert int(table.current_snapshot().summary.additional_properties["total-records"]) == n
    return {"seconds": done - t0, "rate": n / (done - t0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--intervals", default="1000,5000", help="commit intervals (ms) of the freshness rows")
    ap.add_argument("--rate", type=int, default=2000, help="records a second in the freshness rows")
    ap.add_argument("--seconds", type=float, default=20.0, help="how long the freshness rows produce")
    ap.add_argument("--backlog", type=int, default=1_000_000, help="records of the materialisation rows")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()
    registry = f"http://127.0.0.1:{free_port()}"
    broker = BenchBroker("pylog", config={"schema.registry.listeners": registry}).start()
    results: dict[str, dict[str, float]] = {}
    try:
        for interval in (int(x) for x in args.intervals.split(",")):
            row = freshness(broker, interval, args.rate, args.seconds)
            results[f"freshness, interval {interval} ms"] = row
        results["materialise backlog, kafka layout"] = backlog_row(broker, "backlog", args.backlog,
                                                                   registry_url=None)
        results["baseline: read_topic + append"] = baseline_row(broker, "backlog", args.backlog)
        results["materialise backlog, registry layout"] = backlog_row(broker, "avro", args.backlog,
                                                                      registry_url=registry)
    finally:
        broker.stop()
    print(f"\nfreshness: {args.rate} records/s for {args.seconds:.0f} s (seconds from record timestamp to "
          "the commit holding it)")
    print(f"{'row':<36} {'records':>9} {'commits':>8} {'p50 s':>7} {'p99 s':>7} {'max s':>7}")
    for name, r in results.items():
        if name.startswith("freshness"):
            print(f"{name:<36} {int(r['records']):>9,} {int(r['commits']):>8} {r['p50']:>7.2f} "
                  f"{r['p99']:>7.2f} {r['max']:>7.2f}")
    print(f"\nmaterialisation of a backlog of {args.backlog:,} records (100-byte values / flat Avro records)")
    print(f"{'row':<40} {'seconds':>8} {'records/s':>11}")
    for name, r in results.items():
        if not name.startswith("freshness"):
            print(f"{name:<40} {r['seconds']:>8.1f} {r['rate']:>11,.0f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
