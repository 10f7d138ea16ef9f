"""`pylog.scan_polars`: a topic as a Polars LazyFrame whose columns, partition / offset / timestamp
filters and row limits reach the read, against a real broker fed by confluent-kafka."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from collections.abc import Iterator

import polars as pl
import pytest
from sdk_helpers import create_topic, running_broker

import pylog
from pylog.local import LocalBroker
from pylog.sdk.polars_scan import pushed_ranges, read_bounds

TOPIC = "clicks"
PARTITIONS = 3
PER_PARTITION = 300
T0 = 1_700_000_000_000
UTC = dt.timezone.utc


def _ts(partition: int, i: int) -> int:
    return T0 + partition * 100_000 + i * 10


@pytest.fixture(scope="module")
def broker() -> Iterator[LocalBroker]:
    from confluent_kafka import Producer

    for b in running_broker({}):
        create_topic(b.bootstrap_servers, TOPIC, PARTITIONS)
        producer = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0})
        for p in range(PARTITIONS):
            for i in range(PER_PARTITION):
                producer.produce(TOPIC, partition=p, key=f"k{p}-{i}".encode(), value=f"v{p}-{i}".encode(),
                                 timestamp=_ts(p, i))
                if i % 50 == 49:  # several batches per partition
                    assert producer.flush(30) == 0
        assert producer.flush(30) == 0
        yield b


def _counted(broker: LocalBroker, **options: object) -> tuple[pl.LazyFrame, list[int]]:
    read: list[int] = []
    lf = pylog.scan_polars(TOPIC, bootstrap_servers=broker.bootstrap_servers,
                           on_batch=lambda b: read.append(b.num_rows), **options)
    return lf, read


def _expected(broker: LocalBroker, predicate: pl.Expr, *columns: str) -> pl.DataFrame:
    table = pylog.read_topic(TOPIC, bootstrap_servers=broker.bootstrap_servers)
    return pl.from_arrow(table).filter(predicate).select(columns).sort("partition" if "partition" in columns
                                                                       else "offset")


def test_filter_and_select_equal_read_topic_and_read_only_the_range(broker: LocalBroker) -> None:
    predicate = (pl.col("partition") == 1) & (pl.col("offset") >= 100)
    lf, read = _counted(broker)
    got = lf.filter(predicate).select("offset", "value").collect().sort("offset")
    assert got.equals(_expected(broker, predicate, "offset", "value"))
    assert got.height == PER_PARTITION - 100
    assert sum(read) == PER_PARTITION - 100  # partitions 0 and 2 and offsets < 100 never read


def test_pushed_ranges(broker: LocalBroker) -> None:
    scan = pylog.scan_topic(TOPIC, bootstrap_servers=broker.bootstrap_servers)
    ranges = pushed_ranges(scan, pl.col("partition").is_in([0, 2]) & (pl.col("offset") < 10)
                           & (pl.col("offset") > 3))
    assert [(r.partition, r.start, r.end) for r in ranges or []] == [(0, 4, 10), (2, 4, 10)]
    # timestamps: the first offset at or after the bound (an upper bound is a filter only)
    since = dt.datetime.fromtimestamp(_ts(2, 250) / 1000, UTC)
    ranges = pushed_ranges(scan, (pl.col("timestamp") >= since) & (pl.col("partition") == 2))
    assert [(r.partition, r.start, r.end) for r in ranges or []] == [(2, 250, PER_PARTITION)]
    assert pushed_ranges(scan, pl.col("value") == b"x") is None  # nothing to push


def test_timestamp_filter_is_exact(broker: LocalBroker) -> None:
    since = dt.datetime.fromtimestamp(_ts(1, 120) / 1000, UTC)
    until = dt.datetime.fromtimestamp(_ts(2, 30) / 1000, UTC)
    predicate = (pl.col("timestamp") > since) & (pl.col("timestamp") <= until)
    lf, read = _counted(broker)
    got = lf.filter(predicate).select("partition", "offset").collect().sort("partition", "offset")
    want = _expected(broker, predicate, "partition", "offset").sort("partition", "offset")
    assert got.equals(want)
    assert got.height == (PER_PARTITION - 121) + 31
    # partition 0 is all earlier than `since`; partition 1 starts at offset 121
    assert sum(read) == (PER_PARTITION - 121) + PER_PARTITION


def test_absent_partition_reads_nothing(broker: LocalBroker) -> None:
    lf, read = _counted(broker)
    got = lf.filter(pl.col("partition") == 7).collect()
    assert got.height == 0 and got.columns == ["key", "value", "topic", "partition", "offset",
                                               "timestamp", "timestampType"]
    empty = lf.filter((pl.col("offset") > 5) & (pl.col("offset") < 3)).collect()
    assert empty.height == 0
    assert read == []


def test_head_stops_early(broker: LocalBroker) -> None:
    lf, read = _counted(broker)
    got = lf.head(5).collect()
    assert got.height == 5
    assert 5 <= sum(read) < PARTITIONS * PER_PARTITION


def test_projection_reads_only_selected_columns(broker: LocalBroker) -> None:
    seen: list[list[str]] = []
    lf = pylog.scan_polars(TOPIC, bootstrap_servers=broker.bootstrap_servers,
                           on_batch=lambda b: seen.append(b.schema.names))
    got = lf.select("offset").collect()
    assert got.columns == ["offset"] and got.height == PARTITIONS * PER_PARTITION
    assert {tuple(names) for names in seen} == {("offset",)}


def test_unpushable_predicate_is_exact(broker: LocalBroker) -> None:
    predicate = pl.col("value").cast(pl.Utf8).str.ends_with("-7") | (pl.col("offset") == 299)
    lf, read = _counted(broker)
    got = lf.filter(predicate).select("partition", "offset").collect().sort("partition", "offset")
    assert got.equals(_expected(broker, predicate, "partition", "offset").sort("partition", "offset"))
    assert got.height == 2 * PARTITIONS
    assert sum(read) == PARTITIONS * PER_PARTITION


def test_streaming_engine_and_data_dir(broker: LocalBroker) -> None:
    lf = pylog.scan_polars(TOPIC, data_dir=broker.data_dir, decode={"value": "utf8"})
    got = (lf.filter((pl.col("partition") != 0) & (pl.col("offset") < 3)).select("partition", "value")
           .collect(engine="streaming").sort("partition", "value"))
    assert got.to_dict(as_series=False) == {
        "partition": [1, 1, 1, 2, 2, 2], "value": ["v1-0", "v1-1", "v1-2", "v2-0", "v2-1", "v2-2"]}


def test_read_bounds_of_polars_expressions() -> None:
    b = read_bounds((pl.col("offset") >= 10) & (pl.lit(20) > pl.col("offset")) & (pl.col("offset") <= 15.5))
    assert (b.lo, b.hi, b.min_timestamp) == (10, 16, None)
    b = read_bounds(pl.col("timestamp") > dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC))
    assert b.min_timestamp == T0 + 1
    assert read_bounds(pl.col("offset") > pl.col("partition")).bounds_nothing()
    assert read_bounds((pl.col("offset") > 3) | (pl.col("offset") < 1)).bounds_nothing()
    assert read_bounds(pl.col("offset") < pl.len()).bounds_nothing()  # not a literal
    # partition conditions that depend on other rows are not evaluated on partition numbers
    assert read_bounds(pl.col("partition") == pl.col("partition").max()).bounds_nothing()
    b = read_bounds(((pl.col("partition") == 0) | pl.col("partition").is_in([2, 5])) & (pl.col("offset") > 1))
    assert b.keeps([0, 1, 2, 3]) == {0, 2} and b.lo == 2


def test_pushed_bounds_meet_the_callers_bounds(broker: LocalBroker) -> None:
    lf, read = _counted(broker, ending_offsets={TOPIC: {"1": 150}}, partitions=[1, 2])
    since = dt.datetime.fromtimestamp(_ts(1, 100) / 1000, UTC)
    got = lf.filter((pl.col("timestamp") >= since) & (pl.col("offset") < 200)).select("partition", "offset") \
        .collect().sort("partition", "offset")
    assert got.to_dict(as_series=False) == {"partition": [1] * 50 + [2] * 200,
                                            "offset": list(range(100, 150)) + list(range(200))}
    assert sum(read) == 250
    empty, read = _counted(broker, ending_offsets={TOPIC: {"1": 150}}, partitions=[1])
    assert empty.filter(pl.col("timestamp") >= dt.datetime.fromtimestamp(_ts(1, 200) / 1000, UTC)) \
        .collect().height == 0
    assert read == []  # the timestamp starts after the caller's end: nothing to read


def test_misuse_raises_plain_messages(broker: LocalBroker) -> None:
    # read-time errors reach the caller through Polars (its ComputeError), with the SDK's message
    with pytest.raises(Exception, match="unknown topic 'nope'"):
        pylog.scan_polars("nope", bootstrap_servers=broker.bootstrap_servers).collect()
    with pytest.raises(TypeError, match="unexpected keyword"):
        pylog.scan_polars(TOPIC, bootstrap_servers=broker.bootstrap_servers, colour="red")
    with pytest.raises(ValueError, match="exactly one of data_dir"):
        pylog.scan_polars(TOPIC)
    with pytest.raises(ValueError, match="no columns="):
        pylog.scan_polars(TOPIC, bootstrap_servers=broker.bootstrap_servers, columns=["value"])



def test_import_is_lazy_and_a_missing_polars_is_named(broker: LocalBroker, monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    code = ("import sys, pylog, pylog.sdk.polars_scan\n"
            "pylog.scan_polars\n"
            "print('polars' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=True)
    assert out.stdout.strip() == "False"
    from pylog._extras import MissingExtraError

    monkeypatch.setitem(sys.modules, "polars", None)  # as if it were not installed
    with pytest.raises(MissingExtraError, match=r"scan_polars\(\) needs Polars, which is not installed: "
                                                r"pip install 'pylog\[notebook\]'"):
        pylog.scan_polars(TOPIC, bootstrap_servers=broker.bootstrap_servers)
