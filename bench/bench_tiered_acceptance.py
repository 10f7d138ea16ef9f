"""The remote tier's acceptance run: a 3-node cluster writes a large tiered topic, keeps only its
local retention on disk, and the whole history is read back by a consumer, read_topic and Spark.

A ``LocalCluster`` of three nodes with the remote tier on an S3-compatible store (moto's server,
``S3TestServer``; ``--store file`` for a local directory). One topic with ``remote.storage.enable``,
``--partitions`` partitions at RF=3 (``min.insync.replicas=2``), ``segment.bytes`` and
``local.retention.bytes`` as given. An acks=all idempotent confluent-kafka producer writes
``--gib`` GiB of ``--value-size`` records (record *i* goes to partition *i mod P* and carries *i* in
its first 12 bytes), stopping early at ``--produce-seconds`` or when the disk has less than 5 GiB
free. Once copies and local deletions
settle, the table gives:

- per broker and partition, the bytes on local disk (every file of the partition directory, the
  segments' ``.wire`` files included) against 3x ``local.retention.bytes``, and the store's bytes;
- a confluent-kafka consumer from offset 0 of every partition reading every acknowledged record,
  checked: the count, and per partition the sequence numbers in order without gap or repeat;
- with the brokers stopped: ``read_topic`` with ``remote_storage`` alone, Spark's ``pylog`` source
  with ``remoteStorage`` alone (``count(*)``, ``sum(length(value))``), and a plain pyarrow read of
  the same ``.arrow`` objects (the newest manifest of each partition, rows within each segment's
  offsets); the three must agree. The store holds the history up to the last copied segment; the
  records of each partition's active segment exist only on the brokers' disks.

Run: ``python bench/bench_tiered_acceptance.py [--gib 2] [--store s3|file] [--produce-seconds 600]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

MiB = 1 << 20
MIN_FREE_DISK = 5 << 30  # the producer stops early rather than fill the disk it shares


def produce(bootstrap: str, topic: str, partitions: int, total_bytes: int, value_size: int,
            deadline_s: float) -> tuple[int, int, float]:
    """Records produced and acknowledged (acks=all), and seconds taken; stops at the deadline."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 50, "batch.size": 1 << 20, "queue.buffering.max.kbytes": 32 << 10,
                  "message.timeout.ms": 600000})
    state = {"acked": 0, "failed": 0}
    errors: list[str] = []

    def done(err: Any, _msg: Any) -> None:
        state["acked" if err is None else "failed"] += 1
        if err is not None and len(errors) < 3:
            errors.append(str(err))

    pad = os.urandom(max(0, value_size - 12))  # incompressible, as real payloads mostly are
    n = total_bytes // value_size
    t0 = time.perf_counter()
    sent = 0
    for i in range(n):
        if i % 4096 == 0 and (time.perf_counter() - t0 > deadline_s
                              or shutil.disk_usage(tempfile.gettempdir()).free < MIN_FREE_DISK):
            break
        while True:
            try:
                p.produce(topic, value=b"%012d" % i + pad, partition=i % partitions, on_delivery=done)
                break
            except BufferError:
                p.poll(0.05)
        sent += 1
        if i % 2000 == 0:
            p.poll(0)
        if i % 200_000 == 0 and i:
            print(f"  {i} records sent, {state['acked']} acknowledged, {time.perf_counter() - t0:.0f} s",
                  flush=True)
    left = p.flush(300)
    dt = time.perf_counter() - t0
    if left or state["failed"]:
        raise SystemExit(f"{left} records undelivered, {state['failed']} failed ({errors}): "
                         "the check needs every one")
    return sent, state["acked"], dt


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file()) if path.exists() else 0


def store_bytes(store: Any, prefix: str) -> int:
    return sum(o.size for o in store.list(prefix))


def consume_all(bootstrap: str, topic: str, partitions: int, count: int) -> tuple[float, int]:
    """Seconds to read ``count`` records from offset 0 of every partition, and their value bytes;
    fails unless each partition's sequence numbers come in order, each exactly once."""
    import numpy as np
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"accept-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.max.bytes": 64 << 20,
                  "max.partition.fetch.bytes": 16 << 20, "queued.max.messages.kbytes": 1 << 18})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    expect = list(range(partitions))  # the next sequence number each partition must deliver
    got = size = 0
    t0 = time.perf_counter()
    idle = time.monotonic()
    while got < count:
        msgs = c.consume(20000, timeout=1.0)
        if not msgs:
            if time.monotonic() - idle > 120:
                raise SystemExit(f"consumer stalled at {got} of {count} records")
            continue
        idle = time.monotonic()
        by_part: dict[int, list[bytes]] = {}
        for m in msgs:
            if m.error() is not None:
                raise SystemExit(f"consumer error: {m.error()}")
            v = m.value()
            by_part.setdefault(m.partition(), []).append(v[:12])
            size += len(v)
        for p, heads in by_part.items():
            seqs = np.array([int(h) for h in heads], np.int64)
            want = expect[p] + partitions * np.arange(len(seqs), dtype=np.int64)
            if not np.array_equal(seqs, want):
                bad = int(np.flatnonzero(seqs != want)[0])
                raise SystemExit(f"partition {p}: record {int(seqs[bad])} where {int(want[bad])} was due")
            expect[p] = int(want[-1]) + partitions
            got += len(seqs)
    dt = time.perf_counter() - t0
    c.close()
    if got != count:
        raise SystemExit(f"consumer read {got} records, {count} were acknowledged")
    return dt, size


def pyarrow_read(store: Any, topic: str) -> tuple[float, int, int, int]:
    """A plain pyarrow read of every partition's committed segments (the newest manifest's):
    seconds, rows, value bytes, segments."""
    import pyarrow.compute as pc
    import pyarrow.ipc as ipc
    from pylog.storage.remote_layout import partition_prefix, read_manifest, segment_key, topic_dirs

    t0 = time.perf_counter()
    rows = vbytes = segs = 0
    for tid, parts in topic_dirs(store, topic).items():
        for p in parts:
            m = read_manifest(store, partition_prefix(topic, tid, p))
            if m is None:
                continue
            for seg in m.segments:
                with store.open(segment_key(m.prefix, seg, ".arrow")) as f:
                    table = ipc.open_file(f).read_all()
                off = table.column("offset")
                keep = pc.and_(pc.greater_equal(off, max(seg.base_offset, m.log_start_offset)),
                               pc.less_equal(off, seg.end_offset))
                table = table.filter(keep)
                rows += table.num_rows
                vbytes += pc.sum(pc.binary_length(table.column("value"))).as_py() or 0
                segs += 1
    return time.perf_counter() - t0, rows, vbytes, segs


def read_topic_store(uri: str, options: dict[str, str], topic: str) -> tuple[float, int, int]:
    import pyarrow.compute as pc

    import pylog

    t0 = time.perf_counter()
    table = pylog.read_topic(topic, remote_storage=uri, storage_options=options, columns=["offset", "value"])
    dt = time.perf_counter() - t0
    return dt, table.num_rows, pc.sum(pc.binary_length(table.column("value"))).as_py() or 0


def spark_read(uri: str, options: dict[str, str], topic: str) -> tuple[float, float, int, int]:
    """The first query of a fresh session (its Python workers start and import pylog and pyarrow,
    the planner's too) and the same query again in the warm session, as a notebook runs it."""
    from pyspark.sql import SparkSession

    import pylog.spark

    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "2g").config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    pylog.spark.register(spark)
    try:
        spark.sparkContext.parallelize(range(4), 2).map(lambda x: x).count()  # start the Python workers
        times = []
        for _ in range(2):
            t0 = time.perf_counter()
            df = (spark.read.format("pylog").option("remoteStorage", uri)
                  .option("storageOptions", json.dumps(options)).option("subscribe", topic).load())
            row = df.selectExpr("count(*) as n", "sum(length(value)) as b").collect()[0]
            times.append(time.perf_counter() - t0)
        return times[0], times[1], int(row.n), int(row.b or 0)
    finally:
        spark.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gib", type=float, default=2.0, help="bytes of record values to write, in GiB")
    ap.add_argument("--value-size", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--segment-bytes", type=int, default=16 * MiB)
    ap.add_argument("--local-retention-bytes", type=int, default=64 * MiB)
    ap.add_argument("--store", choices=("s3", "file"), default="s3")
    ap.add_argument("--produce-seconds", type=float, default=600, help="stop producing after this long")
    ap.add_argument("--settle-seconds", type=float, default=300)
    ap.add_argument("--no-spark", action="store_true")
    args = ap.parse_args()

    from confluent_kafka.admin import AdminClient, NewTopic
    from pylog.storage.remote_layout import partition_prefix, topic_dirs
    from pylog.storage.remote_store import open_remote_store

    from pylog.local_cluster import LocalCluster

    t_start = time.perf_counter()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout still stops the cluster
    server = None
    options: dict[str, str] = {}
    config = {"remote.log.storage.system.enable": "true", "remote.log.manager.task.interval.ms": "1000",
              "remote.log.reader.grace.ms": "5000"}
    if args.store == "s3":
        from pylog.testing_s3 import S3TestServer

        server = S3TestServer().start()
        uri, options = server.uri("accept"), dict(server.options)
        os.environ.update(server.env)  # brokers and readers find the credentials by the AWS names
        config |= {"remote.log.storage.uri": uri, "remote.log.storage.s3.endpoint": server.endpoint_url,
                   "remote.log.storage.s3.region": "us-east-1"}
    else:
        uri = f"file://{tempfile.mkdtemp(prefix='accept-remote-')}"
        config["remote.log.storage.uri"] = uri
    store = open_remote_store(uri, options)
    topic = "history"
    P = args.partitions
    bound = 3 * args.local_retention_bytes
    cluster = LocalCluster(3, config=config)
    try:
        cluster.start()
        bootstrap = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        new = NewTopic(topic, P, 3, config={
            "remote.storage.enable": "true", "segment.bytes": str(args.segment_bytes),
            "local.retention.bytes": str(args.local_retention_bytes), "min.insync.replicas": "2"})
        for f in admin.create_topics([new], operation_timeout=30).values():
            f.result(30)
        _sent, acked, pdt = produce(bootstrap, topic, P, int(args.gib * (1 << 30)), args.value_size,
                                   args.produce_seconds)
        written = acked * args.value_size
        print(f"produced {acked} records ({written / (1 << 30):.2f} GiB of values) acks=all in {pdt:.0f} s "
              f"({written / pdt / 1e6:.1f} MB/s)", flush=True)

        def local(n: int, p: int) -> int:
            return dir_bytes(cluster.node(n).data_dir / f"{topic}-{p}")

        t0 = time.monotonic()
        at_ack = max(local(n, p) for n in (1, 2, 3) for p in range(P))
        while True:  # copies and local deletions catch up with the producer
            worst = max(local(n, p) for n in (1, 2, 3) for p in range(P))
            if worst <= bound or time.monotonic() - t0 > args.settle_seconds:
                break
            time.sleep(2)
        settle = time.monotonic() - t0
        time.sleep(3)
        tid = next(iter(topic_dirs(store, topic)))
        disk = {(n, p): local(n, p) for n in (1, 2, 3) for p in range(P)}
        remote = {p: store_bytes(store, partition_prefix(topic, tid, p)) for p in range(P)}
        cdt, cbytes = consume_all(bootstrap, topic, P, acked)
        cluster.stop()  # from here on the store alone
        rdt, rrows, rbytes = read_topic_store(uri, options, topic)
        adt, arows, abytes, segments = pyarrow_read(store, topic)
        cold = sdt = 0.0
        srows = sbytes = 0
        if not args.no_spark:
            cold, sdt, srows, sbytes = spark_read(uri, options, topic)
    finally:
        cluster.close()
        if server is not None:
            server.stop()

    print(f"\nstore: {'moto S3 server (S3TestServer)' if args.store == 's3' else 'file://'}; 3 nodes, "
          f"{P} partitions RF=3, segment.bytes {args.segment_bytes // MiB} MiB, local.retention.bytes "
          f"{args.local_retention_bytes // MiB} MiB; {acked} records x {args.value_size} B = "
          f"{written / (1 << 30):.2f} GiB; largest partition directory at the last ack "
          f"{at_ack / MiB:.0f} MiB, settled {settle:.0f} s later; "
          f"{segments} remote segments")
    print(f"\n{'broker':>6} {'partition':>9} {'local disk MiB':>15} {'3x local retention MiB':>23} {'ok':>3}")
    for (n, p), b in sorted(disk.items()):
        print(f"{n:>6} {p:>9} {b / MiB:>15.1f} {bound / MiB:>23.0f} {'yes' if b <= bound else 'NO':>3}")
    print(f"\n{'partition':>9} {'store MiB':>10}")
    for p, b in remote.items():
        print(f"{p:>9} {b / MiB:>10.1f}")
    print(f"{'total':>9} {sum(remote.values()) / MiB:>10.1f}")
    print(f"\n{'reader':<44}{'rows':>11}{'seconds':>9}{'records/s':>12}{'MB/s':>8}  check")
    rows = [("confluent-kafka consumer from offset 0", acked, cdt, cbytes,
             "count and per-partition order OK"),
            ("read_topic, store only (brokers stopped)", rrows, rdt, rbytes,
             "= pyarrow" if (rrows, rbytes) == (arows, abytes) else "DIFFERS from pyarrow"),
            ]
    if not args.no_spark:
        same = "= pyarrow" if (srows, sbytes) == (arows, abytes) else "DIFFERS from pyarrow"
        rows.append(("Spark, store only, first query of a session", srows, cold, sbytes, same))
        rows.append(("Spark, store only, warm session", srows, sdt, sbytes, same))
    rows.append(("pyarrow, the same .arrow objects", arows, adt, abytes,
                 f"{arows / acked:.1%} of acked rows"))
    for name, n, dt, b, check in rows:
        print(f"{name:<44}{n:>11}{dt:>9.1f}{n / dt:>12,.0f}{b / dt / 1e6:>8.1f}  {check}")
    if not args.no_spark:
        print(f"Spark's speed: {adt / sdt:.2f}x pyarrow's warm ({adt / cold:.2f}x for a session's first "
              f"query); read_topic's: {adt / rdt:.2f}x")
    print(f"total run: {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
