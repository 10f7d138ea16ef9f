"""format("pylog") over a topic whose history is in the remote tier: one input partition per remote
segment read by the executors straight from an S3-compatible store (no data directory, no broker),
the store plus the data directory's tail, and a stream moving from the store to the tail without a gap."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pylog.storage import LogConfig, PartitionLog
from pylog.storage.remote_store import open_remote_store

import pylog
from pylog.testing_s3 import S3TestServer

sys.path.insert(0, str(Path(__file__).parents[2]))
from tests.tiered.tiered_helpers import TS0, batch, drop_local, upload, write_partition

TOPIC = "history"
TID = uuid.UUID(int=0x7E57)
BATCHES, PER_BATCH = 60, 50
TOTAL = BATCHES * PER_BATCH


@pytest.fixture(scope="module")
def s3() -> Iterator[S3TestServer]:
    with S3TestServer() as server:
        yield server


def _tiered(tmp_path: Path, s3: S3TestServer) -> tuple[Path, str, dict[int, object]]:
    uri = s3.uri(f"spark-{uuid.uuid4().hex[:8]}")
    store = open_remote_store(uri, s3.options)
    data = tmp_path / "data"
    manifests = {}
    for p in (0, 1):
        log = write_partition(data / f"{TOPIC}-{p}", batches=BATCHES, per_batch=PER_BATCH,
                              segment_bytes=32 << 10)
        manifests[p] = upload(log.dir, store, TOPIC, TID, p, count=5, version=3)
        log.close()
        drop_local(data / f"{TOPIC}-{p}", manifests[p].end_offset)  # type: ignore[attr-defined]
    return data, uri, manifests


def _reader(spark, uri: str, s3: S3TestServer):  # type: ignore[no-untyped-def]
    return (spark.read.format("pylog").option("remoteStorage", uri)
            .option("storageOptions", json.dumps(s3.options)).option("subscribe", TOPIC))


def test_store_only_batch_read(spark, tmp_path: Path, s3: S3TestServer) -> None:  # type: ignore[no-untyped-def]
    _data, uri, manifests = _tiered(tmp_path, s3)
    segments = sum(len(m.segments) for m in manifests.values())  # type: ignore[attr-defined]
    # small segments are packed into tasks (maxBytesPerPartition, 128 MiB): one per topic partition
    assert _reader(spark, uri, s3).load().rdd.getNumPartitions() == len(manifests)
    # a segment is never split: at one byte per task, one task per segment
    df = _reader(spark, uri, s3).option("maxBytesPerPartition", "1").load()
    assert df.rdd.getNumPartitions() == segments
    counts = {r.partition: (r.n, r.top) for r in df.groupBy("partition").agg(
        {"offset": "count", "timestamp": "max"}).selectExpr("partition", "`count(offset)` as n",
                                                            "`max(timestamp)` as top").collect()}
    for p, m in manifests.items():
        assert counts[p][0] == m.end_offset  # type: ignore[attr-defined]
        assert counts[p][1].timestamp() * 1000 == m.segments[-1].max_timestamp  # type: ignore[attr-defined]
    expected = pylog.read_topic(TOPIC, remote_storage=uri, storage_options=s3.options)
    got = sorted((r.partition, r.offset, bytes(r.value))
                 for r in df.select("partition", "offset", "value").collect())
    assert got == sorted(zip(expected["partition"].to_pylist(), expected["offset"].to_pylist(),
                             expected["value"].to_pylist()))
    by_time = _reader(spark, uri, s3).option("startingTimestamp", str(TS0 + 30_000)).load()
    assert by_time.selectExpr("min(offset)").collect()[0][0] == 30 * PER_BATCH


def test_store_and_data_dir(spark, tmp_path: Path, s3: S3TestServer) -> None:  # type: ignore[no-untyped-def]
    data, uri, _ = _tiered(tmp_path, s3)
    df = _reader(spark, uri, s3).option("dataDir", str(data)).load()
    rows = df.select("partition", "offset").collect()
    for p in (0, 1):
        assert sorted(r.offset for r in rows if r.partition == p) == list(range(TOTAL))


def test_stream_moves_from_the_store_to_the_tail(spark, tmp_path: Path, s3: S3TestServer) -> None:  # type: ignore[no-untyped-def]
    data, uri, _ = _tiered(tmp_path, s3)
    stream = (spark.readStream.format("pylog").option("remoteStorage", uri)
              .option("storageOptions", json.dumps(s3.options)).option("dataDir", str(data))
              .option("subscribe", TOPIC).option("startingOffsets", "earliest").load())
    query = (stream.writeStream.format("memory").queryName("tiered_out")
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        query.processAllAvailable()
        rows = spark.sql("select partition, offset from tiered_out").collect()
        offsets = [(r.partition, r.offset) for r in rows]
        assert sorted(offsets) == [(p, o) for p in (0, 1) for o in range(TOTAL)]
        log = PartitionLog.open(data / f"{TOPIC}-0", LogConfig(segment_bytes=32 << 10), now_ms=TS0 + 10**7)
        rb, meta = batch(TOTAL, 25, ts=TS0 + 10**7)
        log.append(rb, meta, now_ms=TS0 + 10**7)
        log.flush()
        log.close()
        query.processAllAvailable()
        rows = spark.sql("select offset, value from tiered_out where partition = 0").collect()
        assert sorted(r.offset for r in rows) == list(range(TOTAL + 25))
        assert len(rows) == TOTAL + 25
    finally:
        query.stop()


def test_with_a_broker_then_without(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """With the broker running: the store the broker names serves the history (one input partition
    per remote segment) and a stream moves on to the broker's tail without a gap; with the broker
    stopped, the store alone still answers the same count."""
    import time

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from sdk_helpers import Broker

    from pylog.sdk.admin import EARLIEST_LOCAL, Admin

    remote = tmp_path / "remote"
    b = Broker(tmp_path / "data", tmp_path / "broker.log", config={
        "remote.log.storage.system.enable": "true", "remote.log.storage.uri": f"file://{remote}",
        "remote.log.manager.task.interval.ms": "200"})
    n = 3000
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([NewTopic("live", num_partitions=1, replication_factor=1, config={
                "remote.storage.enable": "true", "segment.bytes": "65536",
                "local.retention.bytes": "60000"})]).values():
            f.result(timeout=30)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "batch.num.messages": 40})
        for i in range(n):
            p.produce("live", value=b"%06d" % i + b"y" * 150, key=b"k%d" % (i % 3))
            p.poll(0)
        assert p.flush(30) == 0
        deadline = time.monotonic() + 40
        with Admin(b.bootstrap) as sdk:
            parts = sdk.run(lambda a: a.cluster(["live"])).topics["live"]
            while sdk.run(lambda a: a.list_offsets("live", parts, EARLIEST_LOCAL))[0] < n * 0.75:
                assert time.monotonic() < deadline, "the broker did not tier the topic"
                time.sleep(0.3)
        df = (spark.read.format("pylog").option("kafka.bootstrap.servers", b.bootstrap)
              .option("subscribe", "live").option("maxBytesPerPartition", "1").load())
        assert df.rdd.getNumPartitions() >= 5  # remote segments planned one per input partition
        by_key = {r.key: r["count"] for r in df.groupBy("key").count().collect()}
        assert by_key == {b"k0": 1000, b"k1": 1000, b"k2": 1000}

        stream = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", b.bootstrap)
                  .option("subscribe", "live").option("startingOffsets", "earliest").load())
        query = (stream.writeStream.format("memory").queryName("live_out")
                 .option("checkpointLocation", str(tmp_path / "ckpt")).start())
        try:
            query.processAllAvailable()
            for i in range(n, n + 50):
                p.produce("live", value=b"%06d" % i + b"y" * 150)
            assert p.flush(30) == 0
            query.processAllAvailable()
            offsets = sorted(r.offset for r in spark.sql("select offset from live_out").collect())
            assert offsets == list(range(n + 50))
        finally:
            query.stop()
    finally:
        b.stop()
    alone = (spark.read.format("pylog").option("remoteStorage", f"file://{remote}")
             .option("subscribe", "live").load())
    tiered = alone.count()
    assert n * 0.75 <= tiered <= n + 50
    assert sorted(r.offset for r in alone.select("offset").collect()) == list(range(tiered))


def test_tasks_read_as_stored_only_where_nothing_is_skipped(tmp_path: Path, s3: S3TestServer) -> None:
    """A remote input partition carries its segments, and its task reads their data objects with
    neither manifest nor side files, only where the driver's batch metadata shows no transaction,
    control or LogAppendTime batch; every task reads what read_topic reads (aborted records
    dropped, the broker's timestamps set)."""
    import pickle

    import pyarrow as pa
    from sdk_helpers import LogWriter

    from pylog.spark.source import PylogDataSource

    uri = s3.uri(f"spark-{uuid.uuid4().hex[:8]}")
    w = LogWriter(tmp_path / "data", TOPIC, 0, segment_bytes=3_000)
    for _ in range(8):
        w.append(5)
    special_first, _ = w.append(3, producer_id=7, transactional=True)
    w.marker(7, commit=False)
    _, special_end = w.append(2, attributes=0x08)  # LogAppendTime
    for _ in range(8):
        w.append(5)
    w.log.roll()
    w.log.seal_pending()
    w.log.flush()
    manifest = upload(w.log.dir, open_remote_store(uri, s3.options), TOPIC, TID, 0)
    w.close()
    ds = PylogDataSource({"remoteStorage": uri, "storageOptions": json.dumps(s3.options),
                          "subscribe": TOPIC, "maxBytesPerPartition": "1"})
    reader = ds.reader(ds.schema())
    parts = [pickle.loads(pickle.dumps(p)) for p in reader.partitions()]  # as Spark ships them
    assert len(parts) == len(manifest.segments) > 3
    for p in parts:
        special = p.start < special_end and special_first < p.end
        assert (p.stored is None) == special, (p.start, p.end)
    got = pa.Table.from_batches([b for p in parts for b in reader.read(p)])
    expected = pylog.read_topic(TOPIC, remote_storage=uri, storage_options=s3.options)
    for column in ("offset", "timestamp", "timestampType", "key", "value"):
        assert got.column(column).to_pylist() == expected.column(column).to_pylist(), column
    assert 1 in got.column("timestampType").to_pylist()
    assert special_first not in got.column("offset").to_pylist()
