"""The remote tier's read side: consumer catch-up from the store against from local disk, and Spark
reading a tiered topic from the store against a plain pyarrow read of the same objects.

One pylog broker with the remote tier on (``file://`` under a temp dir, or moto's S3 server with
``--store s3``). Two topics get the same records: ``tiered`` (remote.storage.enable, small local
retention, so most of it leaves local disk once copied) and ``plain`` (local only). Rows:

- **consume from the store**: a confluent-kafka consumer reads ``tiered`` from offset 0 up to its
  local log start (every fetch below it is served from the store through the broker's read-ahead
  cache, cold);
- **consume from local disk**: the same number of records of ``plain`` from offset 0;
- **Spark (store only)**: ``format("pylog")`` with ``remoteStorage`` alone, ``count(*)`` and
  ``sum(length(value))`` (one input partition per remote segment), the broker untouched;
- **pyarrow (same objects)**: each remote segment's ``.arrow`` object read whole with
  ``pyarrow.ipc.open_file`` and the same two aggregates.

Run: ``python bench/bench_tiered.py [--records 200000] [--value-size 200] [--store file|s3]``;
``--no-segment-wire`` uploads segments without their ``.wire`` objects (remote fetches re-encode
from Arrow), the baseline for the store's ``.wire`` slices.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from common import BenchBroker

READ_SPARK = """count(*) as n""", """sum(length(value)) as b"""


def produce(bootstrap: str, topic: str, n: int, size: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 262144,
                  "queue.buffering.max.kbytes": 262144})
    body = b"x" * max(0, size - 12)
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=b"%012d" % i + body)
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def consume(bootstrap: str, topic: str, count: int) -> tuple[float, int]:
    """Seconds to read ``count`` records from offset 0, and their value bytes."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"b-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.queue.backoff.ms": 5})
    c.assign([TopicPartition(topic, 0, 0)])
    got = size = 0
    t0 = time.perf_counter()
    while got < count:
        for m in c.consume(10000, timeout=1.0):
            if m.error() is None and m.offset() < count:
                got += 1
                size += len(m.value())
    dt = time.perf_counter() - t0
    c.close()
    return dt, size


def local_start(bootstrap: str, topic: str) -> int:
    from pylog.sdk.admin import EARLIEST_LOCAL, Admin

    with Admin(bootstrap) as a:
        parts = a.run(lambda x: x.cluster([topic])).topics[topic]
        return int(a.run(lambda x: x.list_offsets(topic, parts, EARLIEST_LOCAL))[0])


def spark_read(uri: str, options: dict[str, str], topic: str) -> tuple[float, tuple[int, int]]:
    from pyspark.sql import SparkSession

    import pylog.spark

    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    pylog.spark.register(spark)
    times = []
    row = None
    for _ in range(2):  # the first run also starts the Python workers
        t0 = time.perf_counter()
        df = (spark.read.format("pylog").option("remoteStorage", uri)
              .option("storageOptions", json.dumps(options)).option("subscribe", topic).load())
        row = df.selectExpr(*READ_SPARK).collect()[0]
        times.append(time.perf_counter() - t0)
    spark.stop()
    assert row is not None
    return min(times), (int(row.n), int(row.b))


def pyarrow_read(uri: str, options: dict[str, str], topic: str) -> tuple[float, tuple[int, int], int]:
    import pyarrow.compute as pc
    import pyarrow.ipc as ipc
    from pylog.storage.remote_layout import partition_prefix, read_manifest, segment_key, topic_dirs
    from pylog.storage.remote_store import open_remote_store

    store = open_remote_store(uri, options)
    tid = next(iter(topic_dirs(store, topic)))
    m = read_manifest(store, partition_prefix(topic, tid, 0))
    assert m is not None
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        n = b = 0
        for seg in m.segments:
            with store.open(segment_key(m.prefix, seg, ".arrow")) as f:
                table = ipc.open_file(f).read_all()
            n += table.num_rows
            b += pc.sum(pc.binary_length(table.column("value"))).as_py() or 0
        times.append(time.perf_counter() - t0)
    return min(times), (n, b), len(m.segments)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--value-size", type=int, default=200)
    ap.add_argument("--store", choices=("file", "s3"), default="file")
    ap.add_argument("--segment-bytes", type=int, default=4 << 20)
    ap.add_argument("--no-spark", action="store_true", help="the consumer rows only")
    ap.add_argument("--no-wire-cache", action="store_true",
                    help="pylog.wire.cache.bytes=0: local reads re-encode from segments, as remote ones do")
    ap.add_argument("--no-segment-wire", action="store_true",
                    help="pylog.segment.wire=false on the tiered topic: no .wire objects, remote fetches "
                         "re-encode from Arrow")
    args = ap.parse_args()
    server = None
    options: dict[str, str] = {}
    if args.store == "s3":
        from pylog.testing_s3 import S3TestServer

        server = S3TestServer().start()
        uri, options = server.uri("bench"), dict(server.options)
        os.environ.update(server.env)
        broker_store = {"remote.log.storage.uri": uri,
                        "remote.log.storage.s3.endpoint": options["endpoint_url"]}
    else:
        uri = f"file://{tempfile.mkdtemp(prefix='bench-remote-')}"
        broker_store = {"remote.log.storage.uri": uri}
    broker = BenchBroker("pylog", config={"remote.log.storage.system.enable": "true",
                                          "remote.log.manager.task.interval.ms": "500",
                                          "pylog.remote.log.storage.upload.wire":
                                              "false" if args.no_segment_wire else "true",
                                          **({"pylog.wire.cache.bytes": "0"} if args.no_wire_cache else {}),
                                          **broker_store}).start()
    try:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        seg = str(args.segment_bytes)
        topics = [NewTopic("tiered", 1, 1, config={"remote.storage.enable": "true", "segment.bytes": seg,
                                                    "local.retention.bytes": str(2 * args.segment_bytes),
                                                    **({"pylog.segment.wire": "false"}
                                                       if args.no_segment_wire else {})}),
                  NewTopic("plain", 1, 1, config={"segment.bytes": seg})]
        for f in admin.create_topics(topics).values():
            f.result(30)
        for t in ("tiered", "plain"):
            produce(broker.bootstrap, t, args.records, args.value_size)
        # local retention keeps about two segments and the active one: wait until that is all
        local_bytes = 3 * args.segment_bytes
        expected = args.records - local_bytes // (args.value_size + 20)
        deadline = time.monotonic() + 180
        while (start := local_start(broker.bootstrap, "tiered")) < expected:
            if time.monotonic() > deadline:
                raise SystemExit(f"the broker tiered only up to {start} of {args.records}")
            time.sleep(1)
        rows = []
        for name, topic in (("consume from the store", "tiered"), ("consume from local disk", "plain")):
            dt, size = consume(broker.bootstrap, topic, start)
            rows.append((name, start, dt, start / dt, size / dt / 1e6))
        pdt, (pn, pb), segments = pyarrow_read(uri, options, "tiered")
        if not args.no_spark:
            sdt, (sn, sb) = spark_read(uri, options, "tiered")
            assert (sn, sb) == (pn, pb), f"Spark read {(sn, sb)}, pyarrow {(pn, pb)}"
            rows.append(("Spark (store only)", sn, sdt, sn / sdt, sb / sdt / 1e6))
        rows.append(("pyarrow (same objects)", pn, pdt, pn / pdt, pb / pdt / 1e6))
    finally:
        broker.stop()
        if server is not None:
            server.stop()
    print(f"store: {args.store}, {args.records} records of {args.value_size} B, {segments} remote segments"
          + (", wire cache off" if args.no_wire_cache else "")
          + (", no .wire objects" if args.no_segment_wire else ""))
    print(f"{'row':<26}{'records':>10}{'seconds':>10}{'records/s':>12}{'MB/s':>8}")
    for name, n, dt, rps, mbs in rows:
        print(f"{name:<26}{n:>10}{dt:>10.2f}{rps:>12,.0f}{mbs:>8.1f}")
    if not args.no_spark:
        print(f"Spark's speed: {pdt / sdt:.2f}x pyarrow's")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
