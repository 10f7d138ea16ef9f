"""format("pylog") over a data directory written through pylog.storage: batch and streaming reads in
a real local SparkSession."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sdk_helpers import LogWriter, write_topic_dir

import pylog


def _rows(df) -> list[tuple]:  # type: ignore[no-untyped-def]
    return sorted((r.partition, r.offset, r.key, r.value) for r in df.collect())


def test_batch_read_matches_read_topic(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    write_topic_dir(tmp_path, "clicks", [120, 80, 0], batch=30, headers=True)
    df = (spark.read.format("pylog").option("dataDir", str(tmp_path)).option("subscribe", "clicks")
          .option("includeHeaders", "true").option("maxRecordsPerPartition", "50").load())
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
                          "headers"]
    assert dict(df.dtypes)["timestamp"] == "timestamp"
    assert df.rdd.getNumPartitions() == 5  # 120 -> 3 splits, 80 -> 2, the empty partition none
    table = pylog.read_topic("clicks", data_dir=tmp_path, include_headers=True)
    expected = sorted(zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(),
                          table.column("key").to_pylist(), table.column("value").to_pylist()))
    assert _rows(df) == expected
    first = df.where("partition = 0 and offset = 1").collect()[0]
    assert [(h.key, bytes(h.value)) for h in first.headers] == [("h", b"x1")]
    assert first.timestamp.timestamp() * 1000 == table.column("timestamp").cast("int64")[1].as_py()

    ranged = (spark.read.format("pylog").option("dataDir", str(tmp_path)).option("subscribe", "clicks")
              .option("startingOffsets", json.dumps({"clicks": {"0": 100, "1": -2}}))
              .option("endingOffsets", json.dumps({"clicks": {"0": -1, "1": 5}})).load())
    assert [(r.partition, r.offset) for r in ranged.orderBy("partition", "offset").collect()] == [
        *[(0, o) for o in range(100, 120)], *[(1, o) for o in range(5)]]


def test_misuse_is_reported(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    write_topic_dir(tmp_path, "t", [3])
    with pytest.raises(Exception, match="exactly one of the options dataDir"):
        spark.read.format("pylog").option("subscribe", "t").load().collect()
    with pytest.raises(Exception, match="unknown topic 'nope'"):
        (spark.read.format("pylog").option("dataDir", str(tmp_path)).option("subscribe", "nope")
         .load().collect())


def test_streaming_reads_new_records(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    w = LogWriter(tmp_path, "stream", 0)
    w.append(10)
    stream = (spark.readStream.format("pylog").option("dataDir", str(tmp_path)).option("subscribe", "stream")
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "4").load())
    query = (stream.writeStream.format("memory").queryName("stream_out")
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        query.processAllAvailable()
        offsets = [r.offset for r in spark.sql("select offset from stream_out").collect()]
        assert sorted(offsets) == list(range(10))
        assert all(p["numInputRows"] <= 4 for p in query.recentProgress)
        w.append(5)
        query.processAllAvailable()
        rows = spark.sql("select offset, value from stream_out").collect()
        assert sorted(r.offset for r in rows) == list(range(15))
        assert {bytes(r.value) for r in rows} == {f"v{i}".encode() for i in range(15)}
    finally:
        query.stop()
        w.close()


def test_timestamps_are_the_same_instants_as_read_topic(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Spark's TimestampType is an instant, as the SDK's timestamp[ms, tz=UTC]: the same epoch milliseconds
    whatever the session's time zone."""
    write_topic_dir(tmp_path, "instants", [3])
    table = pylog.read_topic("instants", data_dir=tmp_path)
    assert str(table.schema.field("timestamp").type) == "timestamp[ms, tz=UTC]"
    expected = table.column("timestamp").cast("int64").to_pylist()
    df = spark.read.format("pylog").option("dataDir", str(tmp_path)).option("subscribe", "instants").load()
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        got = [r[0] for r in df.orderBy("offset").selectExpr("unix_millis(timestamp)").collect()]
        pdf = df.orderBy("offset").select("timestamp").toPandas()
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert got == expected
    local = pdf["timestamp"].dt.tz_localize("America/Los_Angeles")  # toPandas: the session's wall clock
    assert [int(t.timestamp() * 1000) for t in local] == expected
