"""Records produced by kafka-python and confluent-kafka to a real ``pylog broker`` come back identical
through read_topic (Kafka protocol and data directory) and every adapter; write_topic's records are
read back by those clients, in the partitions the Java client's partitioner picks."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sdk_helpers import Broker, create_topic

import pylog
from pylog.sdk import OffsetOutOfRangeError, UnknownTopicError
from pylog.sdk.murmur2 import partition_for_key


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    root = tmp_path_factory.mktemp("sdk-broker")
    b = Broker(root / "data", root / "broker.log")
    yield b
    b.stop()


def _topic(broker: Broker, partitions: int) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, name, partitions)
    return name


def _produce_with_clients(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer
    from kafka import KafkaProducer

    kp = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", linger_ms=5)
    for i in range(300):
        kp.send(topic, key=None if i % 7 == 0 else f"kp-{i}".encode(),
                value=None if i % 50 == 3 and i % 7 else f"value {i}".encode() * (1 + i % 3),
                headers=[("src", b"kafka-python"), ("i", str(i).encode())] if i % 2 else [],
                timestamp_ms=1_700_000_000_000 + i)
    kp.flush()
    kp.close()
    cp = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 5})
    for i in range(300):
        cp.produce(topic, key=f"ck-{i}".encode(), value=f"confluent {i}".encode(),
                   headers=[("src", b"confluent")] if i % 3 else None, timestamp=1_700_000_100_000 + i)
    assert cp.flush(30) == 0


def _consume_all(bootstrap: str, topic: str, n: int) -> list[tuple]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10_000, group_id=None)
    out = []
    for m in consumer:
        out.append((m.partition, m.offset, m.key, m.value, m.timestamp,
                    [(k, v) for k, v in m.headers]))
        if len(out) >= n:
            break
    consumer.close()
    return sorted(out)


def _ms(column: pa.ChunkedArray) -> list[int]:
    return column.cast(pa.int64()).to_pylist()


def _as_tuples(table: pa.Table) -> list[tuple]:
    d = table.to_pydict()
    d["timestamp"] = _ms(table.column("timestamp"))
    return sorted(
        (p, o, k, v, ts, [(h["key"], h["value"]) for h in hs])
        for p, o, k, v, ts, hs in zip(d["partition"], d["offset"], d["key"], d["value"], d["timestamp"],
                                      d["headers"]))


def test_client_records_identical_through_both_sources(broker: Broker) -> None:
    topic = _topic(broker, 3)
    _produce_with_clients(broker.bootstrap, topic)
    expected = _consume_all(broker.bootstrap, topic, 600)
    assert len(expected) == 600
    over_kafka = pylog.read_topic(topic, bootstrap_servers=broker.bootstrap, include_headers=True)
    from_dir = pylog.read_topic(topic, data_dir=broker.data_dir, include_headers=True)
    assert _as_tuples(over_kafka) == expected
    assert _as_tuples(from_dir) == expected
    assert over_kafka.schema == from_dir.schema
    assert set(over_kafka.column("topic").unique().to_pylist()) == {topic}
    assert over_kafka.column("timestampType").unique().to_pylist() == [0]

    # the adapters hold the same records
    scan = pylog.scan_topic(topic, bootstrap_servers=broker.bootstrap, include_headers=True)
    pdf = scan.to_pandas()
    assert sorted(zip(pdf["partition"], pdf["offset"], pdf["key"], pdf["value"])) == [e[:4] for e in expected]
    pl_df = pylog.scan_topic(topic, data_dir=broker.data_dir, include_headers=True).to_polars()
    assert sorted(zip(*(pl_df[c].to_list() for c in ("partition", "offset", "key", "value")))) == [
        e[:4] for e in expected]
    con = scan.to_duckdb("records")
    query = 'select "partition", "offset", "key", "value", epoch_ms("timestamp") from records'
    got = con.sql(query).fetchall()
    assert sorted(tuple(bytes(x) if isinstance(x, (bytes, bytearray, memoryview)) else x for x in row)
                  for row in got) == [e[:5] for e in expected]


def test_adapters_over_kafka(broker: Broker) -> None:
    topic = _topic(broker, 2)
    result = pylog.write_topic(pa.table({"key": [f"k{i}" for i in range(1000)],
                                         "value": [f"{{\"n\": {i}}}" for i in range(1000)]}),
                               topic, bootstrap_servers=broker.bootstrap)
    assert result.records == 1000
    scan = pylog.scan_topic(topic, bootstrap_servers=broker.bootstrap, decode="json",
                            columns=["partition", "offset", "value"])
    table = scan.to_arrow()
    assert sorted(pc.struct_field(table.column("value"), "n").to_pylist()) == list(range(1000))
    assert sorted(scan.to_polars().unnest("value")["n"].to_list()) == list(range(1000))
    assert sorted(scan.to_pandas()["value"].map(lambda v: v["n"]).tolist()) == list(range(1000))
    con = pylog.scan_topic(topic, bootstrap_servers=broker.bootstrap).to_duckdb("t")
    assert con.sql('select count(*), count(distinct "key") from t').fetchall() == [(1000, 1000)]
    batches = list(pylog.scan_topic(topic, bootstrap_servers=broker.bootstrap).to_batches())
    assert sum(b.num_rows for b in batches) == 1000


def test_write_topic_is_read_by_clients_in_java_partitions(broker: Broker) -> None:
    topic = _topic(broker, 5)
    keys = [f"user-{i}".encode() for i in range(400)] + [None] * 100
    table = pa.table({"key": pa.array(keys, pa.binary()), "value": [f"v{i}".encode() for i in range(500)],
                      "headers": [[{"key": "i", "value": str(i).encode()}] for i in range(500)]})
    result = pylog.write_topic(table, topic, bootstrap_servers=broker.bootstrap, compression="zstd")
    assert result.records == 500 and sum(hi - lo + 1 for lo, hi in result.offsets.values()) == 500
    consumed = _consume_all(broker.bootstrap, topic, 500)
    assert sorted(c[3] for c in consumed) == sorted(f"v{i}".encode() for i in range(500))
    for partition, _offset, key, value, _ts, headers in consumed:
        i = int(value[1:])
        assert headers == [("i", str(i).encode())]
        if key is not None:
            assert partition == partition_for_key(key, 5)
    # the same keys through confluent-kafka's Java-compatible partitioner land in the same partitions
    from confluent_kafka import Producer

    twin = _topic(broker, 5)
    cp = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    for k in keys[:400]:
        cp.produce(twin, key=k, value=k)
    assert cp.flush(30) == 0
    theirs = pylog.read_topic(twin, bootstrap_servers=broker.bootstrap, columns=["key", "partition"])
    ours = pylog.read_topic(topic, data_dir=broker.data_dir, columns=["key", "partition"])
    ours = ours.filter(pc.is_valid(ours.column("key")))
    assert sorted(zip(*theirs.to_pydict().values())) == sorted(zip(*ours.to_pydict().values()))


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_write_topic_frames_and_roles(broker: Broker, compression: str) -> None:
    import pandas as pd
    import polars as pl

    topic = _topic(broker, 3)
    frame = pl.DataFrame({"user": ["a", "b", None], "n": [1, 2, 3],
                          "at": [1_700_000_000_000 + i for i in range(3)]})
    r1 = pylog.write_topic(frame, topic, bootstrap_servers=broker.bootstrap, key="user", timestamp="at",
                           value=["n"], compression=compression)
    r2 = pylog.write_topic(pd.DataFrame({"value": ["x", "y"]}), topic, bootstrap_servers=broker.bootstrap,
                           partition=2, compression=compression)
    assert r1.records == 3 and r2.records == 2 and set(r2.offsets) == {2}
    t = pylog.read_topic(topic, bootstrap_servers=broker.bootstrap)
    rows = sorted(zip(t.column("value").to_pylist(), t.column("key").to_pylist(), _ms(t.column("timestamp"))),
                  key=lambda r: (not r[0].startswith(b"{"), r[0]))  # the JSON rows first
    assert [v for v, _k, _t in rows] == [b'{"n":1}', b'{"n":2}', b'{"n":3}', b"x", b"y"]
    assert [k for _v, k, _t in rows][:3] == [b"a", b"b", None]
    assert [ts for _v, _k, ts in rows][:3] == [1_700_000_000_000 + i for i in range(3)]
    r3 = pylog.read_topic(topic, bootstrap_servers=broker.bootstrap, starting_offsets=r2.starting_offsets(),
                          ending_offsets=r2.ending_offsets())
    assert r3.column("value").to_pylist() == [b"x", b"y"]


def test_read_while_producing(broker: Broker) -> None:
    from kafka import KafkaProducer

    topic = _topic(broker, 2)
    stop = threading.Event()

    def produce() -> None:
        kp = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=1)
        i = 0
        while not stop.is_set():
            kp.send(topic, key=str(i).encode(), value=str(i).encode(), partition=i % 2)
            i += 1
            if i % 100 == 0:
                kp.flush()
        kp.flush()
        kp.close()

    t = threading.Thread(target=produce)
    t.start()
    try:
        seen, reads = 0, 0
        deadline = time.monotonic() + 120
        while (seen < 2000 or reads < 5) and time.monotonic() < deadline:
            reads += 1
            table = pylog.read_topic(topic, data_dir=broker.data_dir,
                                     columns=["partition", "offset", "value"])
            for p in (0, 1):
                part = table.filter(pc.equal(table.column("partition"), p))
                offsets = part.column("offset").to_pylist()
                assert offsets == list(range(len(offsets)))  # a prefix, no holes, no torn batch
                assert [int(v) % 2 for v in part.column("value").to_pylist()] == [p] * len(offsets)
            assert table.num_rows >= seen
            seen = table.num_rows
    finally:
        stop.set()
        t.join()
    assert seen >= 2000


def test_errors_over_kafka(broker: Broker, tmp_path: Path) -> None:
    topic = _topic(broker, 1)
    pylog.write_topic(pa.table({"value": [b"a", b"b"]}), topic, bootstrap_servers=broker.bootstrap)
    with pytest.raises(UnknownTopicError, match="unknown topic 'absent'"):
        pylog.read_topic("absent", bootstrap_servers=broker.bootstrap)
    with pytest.raises(OffsetOutOfRangeError, match="out of range"):
        pylog.read_topic(topic, bootstrap_servers=broker.bootstrap, starting_offsets={"0": 5})
    with pytest.raises(ConnectionError, match="no Kafka broker reachable"):
        pylog.read_topic(topic, bootstrap_servers="127.0.0.1:1")
    with pytest.raises(ValueError, match="partition 7 does not exist"):
        pylog.write_topic(pa.table({"value": [b"a"]}), topic, bootstrap_servers=broker.bootstrap, partition=7)
    with pytest.raises(ValueError, match="compression"):
        pylog.write_topic(pa.table({"value": [b"a"]}), topic, bootstrap_servers=broker.bootstrap,
                          compression="brotli")
    with pytest.raises(ValueError, match="key='nope': no such column"):
        pylog.write_topic(pa.table({"value": [b"a"]}), topic, bootstrap_servers=broker.bootstrap, key="nope")


def test_reader_closed_early_leaves_nothing_running(broker: Broker) -> None:
    import asyncio

    from pylog.sdk import aio

    topic = _topic(broker, 2)
    pylog.write_topic(pa.table({"value": [b"x" * 1000] * 20_000}), topic, bootstrap_servers=broker.bootstrap,
                      batch_size=100_000)
    reader = pylog.scan_topic(topic, bootstrap_servers=broker.bootstrap).to_arrow_batch_reader()
    assert reader.read_next_batch().num_rows > 0
    reader.close()
    del reader

    async def running() -> list[str]:
        return [repr(t) for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    assert aio.run(running()) == []
