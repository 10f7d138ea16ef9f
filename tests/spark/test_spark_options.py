"""Spark Kafka-source options of format("pylog") and the planning they drive (no SparkSession)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from sdk_helpers import write_topic_dir

from pylog.sdk.offsets import PartitionRange
from pylog.spark.options import ReadOptions, split_ranges
from pylog.spark.source import PylogDataSource, PylogStreamReader, _rate_limit, kafka_schema


def test_parse_defaults_and_errors(tmp_path: Path) -> None:
    batch = ReadOptions.parse({"dataDir": str(tmp_path), "subscribe": "a, b"}, streaming=False)
    assert batch.topics == ("a", "b")
    assert (batch.starting_offsets, batch.ending_offsets) == ("earliest", "latest")
    assert ReadOptions.parse({"dataDir": "d", "subscribe": "a"}, streaming=True).starting_offsets == "latest"
    assigned = ReadOptions.parse({"kafka.bootstrap.servers": "h:1", "assign": '{"a": [1, 0]}'},
                                 streaming=False)
    assert assigned.assigned == {"a": (1, 0)}
    bad = [
        ({"subscribe": "a"}, "exactly one of the options dataDir"),
        ({"dataDir": "d", "kafka.bootstrap.servers": "h:1", "subscribe": "a"}, "both were given"),
        ({"dataDir": "d"}, "exactly one of the options subscribe"),
        ({"dataDir": "d", "subscribePattern": "a.*"}, "not subscribePattern"),
        ({"dataDir": "d", "subscribe": "a", "startingOffsets": "{nope"}, "not valid JSON"),
        ({"dataDir": "d", "subscribe": "a", "endingOffsets": '{"b": {"0": 1}}'}, "not read"),
        ({"dataDir": "d", "subscribe": "a", "maxOffsetsPerTrigger": "-3"}, "must be positive"),
        ({"dataDir": "d", "subscribe": "a", "includeHeaders": "maybe"}, "true or false"),
        ({"dataDir": "d", "subscribe": "a", "startingTimestamp": "x"}, "epoch milliseconds"),
    ]
    for options, message in bad:
        with pytest.raises(ValueError, match=message):
            ReadOptions.parse(options, streaming=False)


def test_multi_topic_ranges_and_timestamps(tmp_path: Path) -> None:
    write_topic_dir(tmp_path, "a", [10, 20])
    write_topic_dir(tmp_path, "b", [5])
    opts = ReadOptions.parse({"dataDir": str(tmp_path), "subscribe": "a,b",
                              "startingOffsets": json.dumps({"a": {"1": 15}}),
                              "endingOffsetsByTimestamp": json.dumps({"b": {"0": 1_700_000_000_003}})},
                             streaming=False)
    source = opts.open()
    try:
        got = [(r.topic, r.partition, r.start, r.end) for r in opts.ranges(source)]
    finally:
        source.close()
    assert got == [("a", 0, 0, 10), ("a", 1, 15, 20), ("b", 0, 0, 3)]


def test_split_ranges() -> None:
    ranges = [PartitionRange("t", 0, 0, 100), PartitionRange("t", 1, 0, 10), PartitionRange("t", 2, 5, 5)]
    cut = split_ranges(ranges, max_records=30, min_partitions=None)
    assert [(r.partition, r.start, r.end) for r in cut] == [
        (0, 0, 25), (0, 25, 50), (0, 50, 75), (0, 75, 100), (1, 0, 10)]
    cut = split_ranges(ranges, max_records=1000, min_partitions=11)
    assert sum(1 for r in cut if r.partition == 0) == 10 and sum(1 for r in cut if r.partition == 1) == 1
    assert sum(r.count for r in cut) == 110


def test_rate_limit_shares_by_backlog() -> None:
    begin = {"t": {"0": 0, "1": 100, "2": 7}}
    end = {"t": {"0": 1000, "1": 200, "2": 7}}
    assert _rate_limit(begin, end, 10_000) == end
    limited = _rate_limit(begin, end, 110)
    assert limited == {"t": {"0": 100, "1": 110, "2": 7}}


def test_stream_reader_offsets(tmp_path: Path) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    write_topic_dir(tmp_path, "s", [30, 10])
    opts = ReadOptions.parse({"dataDir": str(tmp_path), "subscribe": "s", "startingOffsets": "earliest",
                              "maxOffsetsPerTrigger": "8"}, streaming=True)
    reader = PylogStreamReader(opts, kafka_schema(False))
    start = reader.initialOffset()
    assert start == {"s": {"0": 0, "1": 0}}
    assert reader.getDefaultReadLimit() == ReadMaxRows(8)
    first = reader.latestOffset(start, ReadMaxRows(8))
    assert first == {"s": {"0": 6, "1": 2}}
    assert reader.latestOffset(start, ReadAllAvailable()) == {"s": {"0": 30, "1": 10}}
    parts = reader.partitions(start, first)
    assert [(p.partition, p.start, p.end) for p in parts] == [(0, 0, 6), (1, 0, 2)]
    batches = list(reader.read(parts[0]))
    assert sum(b.num_rows for b in batches) == 6
    assert batches[0].schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    reader.prepareForTriggerAvailableNow()
    write_topic_dir(tmp_path, "other", [1])  # unrelated writes do not move the target
    assert reader.latestOffset(first, ReadAllAvailable()) == {"s": {"0": 30, "1": 10}}


def test_data_source_schema() -> None:
    assert PylogDataSource.name() == "pylog"
    assert [f.name for f in PylogDataSource({"includeHeaders": "true"}).schema().fields][-1] == "headers"
    assert len(PylogDataSource({}).schema().fields) == 7
