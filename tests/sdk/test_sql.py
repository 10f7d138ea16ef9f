"""`pylog.sql`: DuckDB over topics. Filters become read bounds (pyarrow's guarantee simplification,
checked directly), a query over the last hour of a year of data maps only the data files of the
last hour's segments (storage's own counters), joins of two topics match DuckDB over `read_topic`,
and registry records are queried as struct fields."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pylog.storage.segment import Stats
from sdk_helpers import LogWriter, running_broker

import pylog
from pylog.sdk import UnknownTopicError
from pylog.sdk.sql import TIMESTAMP, Bounds

SCHEMA = pa.schema([("offset", pa.int64()), ("partition", pa.int32()), ("timestamp", TIMESTAMP),
                    ("value", pa.binary())])
HOUR = 3_600_000


def ts(ms: int) -> pa.Scalar:
    return pa.scalar(ms, pa.int64()).cast(TIMESTAMP)


@pytest.mark.parametrize(("expr", "partitions", "start", "end", "since"), [
    (None, [0, 1, 2], None, None, None),
    (pc.field("offset") >= 10, [0, 1, 2], 10, None, None),
    ((pc.field("offset") > 10) & (pc.field("offset") <= 20), [0, 1, 2], 10, 21, None),  # bounds may be loose
    (pc.field("offset").isin([5, 9]), [0, 1, 2], 5, 10, None),
    ((pc.field("offset") > 3) | (pc.field("offset") < 1), [0, 1, 2], None, None, None),
    (pc.field("partition") == 1, [1], None, None, None),
    (pc.field("timestamp") > ts(1_700_000_000_000), [0, 1, 2], None, None, 1_700_000_000_000),
    (pc.field("timestamp") >= pa.scalar(1_700_000_000_000_000, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
     [0, 1, 2], None, None, 1_700_000_000_000),
    (pc.field("timestamp") < ts(1_700_000_000_000), [0, 1, 2], None, None, None),  # no upper time bound
    ((pc.field("value") == b"x") & (pc.field("partition") != 0), [1, 2], None, None, None),
])
def test_bounds_from_filters(expr, partitions, start, end, since) -> None:  # type: ignore[no-untyped-def]
    b = Bounds(expr, SCHEMA, [0, 1, 2])
    assert (b.partitions, b.offset_start, b.offset_end, b.timestamp_start) == (partitions, start, end, since)


def test_the_last_hour_of_a_year_reads_no_old_segment(tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    hours = [24 * 365, 24 * 200, 24 * 30, 24 * 7, 48, 5, 1.5, 0.5, 0.25]  # ages of the batches
    for p in range(2):
        w = LogWriter(tmp_path, "events", p, segment_bytes=14)  # every batch its own segment
        for age in hours:
            w.append(100, ts=now - int(age * HOUR))
        w.log.seal_pending()  # as the broker's maintenance does: sealed segments are Arrow IPC files
        w.close()
    query = "select count(*), min(timestamp) from events where timestamp > now() - interval 1 hour"
    maps = Stats.data_maps
    count, first = pylog.sql(query, data_dir=tmp_path).fetchall()[0]
    # per partition: the time index lookup maps the first segment holding the hour, the read maps the
    # two segments of the hour; the seven older segments are never mapped
    assert Stats.data_maps - maps <= 2 * 3
    assert count == 2 * 2 * 100 and first >= dt.datetime.fromtimestamp((now - HOUR) / 1000, dt.timezone.utc)
    maps = Stats.data_maps
    assert pylog.sql("select count(*) from events", data_dir=tmp_path).fetchall()[0] == (2 * 900,)
    assert Stats.data_maps - maps == 2 * 9  # without a filter every segment is read
    maps = Stats.data_maps
    assert pylog.sql("select count(*) from events where \"offset\" between 300 and 399 and partition = 1",
                     data_dir=tmp_path).fetchall()[0] == (100,)
    assert Stats.data_maps - maps == 1


@pytest.fixture(scope="module")
def broker() -> Iterator[pylog.LocalBroker]:
    yield from running_broker({"num.partitions": 3})


def test_two_topics_joined_like_duckdb_over_read_topic(broker: pylog.LocalBroker) -> None:
    from confluent_kafka import Producer
    from kafka import KafkaProducer

    bs = broker.bootstrap_servers
    orders, payments = f"orders_{uuid.uuid4().hex[:6]}", f"payments_{uuid.uuid4().hex[:6]}"
    now = int(time.time() * 1000)
    cp = Producer({"bootstrap.servers": bs})
    for i in range(300):
        cp.produce(orders, key=f"o{i}".encode(), value=f"{i % 7}".encode(),
                   timestamp=now - (300 - i) * 60_000 - 30_000)
    assert cp.flush(30) == 0
    kp = KafkaProducer(bootstrap_servers=bs)
    for i in range(0, 300, 3):
        kp.send(payments, key=f"o{i}".encode(), value=b"paid", timestamp_ms=now - 1000)
    kp.flush()
    kp.close()
    query = (f"select cast(o.value as varchar) as shop, count(*) as paid from {orders} o join {payments} p "
             f"on o.key = p.key where o.timestamp > now() - interval 2 hour group by 1 order by 1")
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for name in (orders, payments):
        t = pylog.read_topic(name, bootstrap_servers=bs)
        con.register(name, t.set_column(t.schema.get_field_index("timestamp"), "timestamp",
                                        t["timestamp"].cast(TIMESTAMP)))
    want = con.sql(query).fetchall()
    assert sum(n for _, n in want) == len([i for i in range(181, 300) if i % 3 == 0])
    assert pylog.sql(query, bootstrap_servers=bs).fetchall() == want
    assert pylog.sql(query, data_dir=broker.data_dir).fetchall() == want
    rel = pylog.sql(f"select * from {orders} where partition = 0 limit 3", bootstrap_servers=bs)
    assert rel.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
                           "headers"]
    assert rel.pl().height == 3


def test_registry_fields_are_struct_fields(broker: pylog.LocalBroker) -> None:
    bs, registry = broker.bootstrap_servers, broker.schema_registry_url
    assert registry is not None, "the test needs the registry extra"
    topic = f"pay_{uuid.uuid4().hex[:6]}"
    payments = pa.table({"id": [1, 2, 3, 4], "customer": ["ada", "bob", "ada", "cy"],
                         "amount": [9.5, 12.25, 1.0, 3.0]})
    pylog.write_topic(payments, topic, bootstrap_servers=bs, value_schema="registry",
                      schema_registry_url=registry, progress=False)
    rel = pylog.sql(f"select value.customer as customer, sum(value.amount) as total from {topic} "
                    "where value.amount > 2 group by 1 order by 1", bootstrap_servers=bs,
                    decode={topic: "registry"})
    assert rel.fetchall() == [("ada", 9.5), ("bob", 12.25), ("cy", 3.0)]
    assert pylog.sql(f"select count(*) from {topic}", data_dir=broker.data_dir, decode="registry",
                     schema_registry_url=registry).fetchall()[0] == (4,)


def test_plain_errors_and_own_tables_first(broker: pylog.LocalBroker, tmp_path: Path) -> None:
    w = LogWriter(tmp_path, "clicks", 0)
    w.append(5)
    w.close()
    with pytest.raises(UnknownTopicError, match="none of the topics"):
        pylog.sql("select 1 from nothing_here", data_dir=tmp_path)
    with pytest.raises(ValueError, match="exactly one"):
        pylog.sql("select 1 from clicks")
    with pytest.raises(ValueError, match="decode names"):
        pylog.sql("select 1 from clicks", data_dir=tmp_path, decode={"other": "utf8"})
    con = duckdb.connect()
    con.execute("create table clicks as select 42 as answer")
    assert pylog.sql("select * from clicks", data_dir=tmp_path, connection=con).fetchall() == [(42,)]
    con2 = duckdb.connect()
    rel = pylog.sql("select count(*) from clicks", data_dir=tmp_path, connection=con2, decode="utf8")
    assert rel.fetchall()[0] == (5,)
