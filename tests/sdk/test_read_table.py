"""`pylog.read_table`: the latest value per key, checked against a per-record model (property test),
and against a real broker: keys across partitions, tombstones, committed transactions only, a
compacted topic read while the cleaner rewrites it, time travel by timestamp and by offsets."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sdk_helpers import running_broker

import pylog
from pylog.sdk.table import latest_per_key

T0 = 1_700_000_000_000

record = st.tuples(st.integers(0, 2), st.sampled_from([None, b"a", b"b", b"c", b"d"]),
                   st.sampled_from([None, b"x", b"y", b"z"]), st.integers(0, 50))


def model(records: list[tuple[int, bytes | None, bytes | None, int]]) -> dict[bytes, bytes]:
    """Per record, in log order: the last of each (key, partition); across partitions the latest
    timestamp, then the highest partition; tombstones and null keys out."""
    last: dict[tuple[bytes, int], tuple[int, int, bytes | None]] = {}
    offsets = [0, 0, 0]
    for p, k, v, ts in records:
        if k is not None:
            last[(k, p)] = (ts, p, v)
        offsets[p] += 1
    best: dict[bytes, tuple[int, int, bytes | None]] = {}
    for (k, _p), cand in last.items():
        if k not in best or cand[:2] > best[k][:2]:
            best[k] = cand
    return {k: v for k, (_ts, _p, v) in best.items() if v is not None}


@settings(max_examples=300, deadline=None, print_blob=True)
@given(st.lists(record, max_size=60))
def test_latest_per_key_matches_the_record_by_record_model(records) -> None:  # type: ignore[no-untyped-def]
    offsets = [0, 0, 0]
    cols: dict[str, list] = {"key": [], "value": [], "partition": [], "offset": [], "timestamp": []}
    for p, k, v, ts in records:
        cols["key"].append(k)
        cols["value"].append(v)
        cols["partition"].append(p)
        cols["offset"].append(offsets[p])
        cols["timestamp"].append(T0 + ts)
        offsets[p] += 1
    table = pa.table({"key": pa.array(cols["key"], pa.binary()),
                      "value": pa.array(cols["value"], pa.binary()),
                      "partition": pa.array(cols["partition"], pa.int32()),
                      "offset": pa.array(cols["offset"], pa.int64()),
                      "timestamp": pa.array(cols["timestamp"], pa.int64()).cast(pa.timestamp("ms"))})
    # the order rows arrive in must not matter
    shuffled = table.take(pa.array(list(reversed(range(table.num_rows))), pa.int64()))
    got = latest_per_key(shuffled)
    assert dict(zip(got["key"].to_pylist(), got["value"].to_pylist())) == model(records)
    assert got["key"].null_count == 0 and got["value"].null_count == 0


# --- a real broker --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker() -> Iterator[pylog.LocalBroker]:
    yield from running_broker({"log.cleaner.backoff.ms": 200, "log.segment.delete.delay.ms": 0})


def create(bs: str, partitions: int, config: dict[str, str] | None = None) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"tbl-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(30)
    return name


def test_keys_across_partitions_tombstones_and_transactions(broker: pylog.LocalBroker) -> None:
    from confluent_kafka import Producer

    bs = broker.bootstrap_servers
    topic = create(bs, 2)
    p = Producer({"bootstrap.servers": bs})
    p.produce(topic, key=b"a", value=b"a1", partition=0, timestamp=T0)
    p.produce(topic, key=b"a", value=b"a2", partition=1, timestamp=T0 + 10)  # later: wins across partitions
    p.produce(topic, key=b"b", value=b"b1", partition=0, timestamp=T0 + 50)
    p.produce(topic, key=b"b", value=b"b0", partition=0, timestamp=T0 + 5)  # later offset wins in a partition
    p.produce(topic, key=b"c", value=b"c1", partition=1, timestamp=T0)
    p.produce(topic, key=b"c", value=None, partition=1, timestamp=T0 + 1)  # tombstone
    p.produce(topic, key=None, value=b"no key", partition=0, timestamp=T0)
    assert p.flush(30) == 0
    tx = Producer({"bootstrap.servers": bs, "transactional.id": f"t-{topic}"})
    tx.init_transactions(30)
    tx.begin_transaction()
    tx.produce(topic, key=b"a", value=b"aborted", partition=0, timestamp=T0 + 100)
    tx.abort_transaction(30)
    tx.begin_transaction()
    tx.produce(topic, key=b"d", value=b"d1", partition=1, timestamp=T0 + 100)
    tx.commit_transaction(30)
    tx.begin_transaction()
    tx.produce(topic, key=b"b", value=b"open", partition=0, timestamp=T0 + 200)  # left open
    tx.flush(30)
    want = {b"a": b"a2", b"b": b"b0", b"d": b"d1"}
    for source in ({"bootstrap_servers": bs}, {"data_dir": broker.data_dir}):
        table = pylog.read_table(topic, **source)
        assert dict(zip(table["key"].to_pylist(), table["value"].to_pylist())) == want, source
        assert table.schema.names == ["key", "value", "topic", "partition", "offset", "timestamp",
                                      "timestampType"]
    df = pylog.read_table(topic, bootstrap_servers=bs, as_="pandas", decode="utf8")
    assert dict(zip(df["key"], df["value"])) == {k: v.decode() for k, v in want.items()}
    tx.abort_transaction(30)


def test_time_travel_by_timestamp_and_offsets(broker: pylog.LocalBroker) -> None:
    from confluent_kafka import Producer

    bs = broker.bootstrap_servers
    topic = create(bs, 1)
    p = Producer({"bootstrap.servers": bs})
    for day in range(3):
        for k in ("a", "b", "c"):
            if (k, day) != ("c", 2):
                p.produce(topic, key=k.encode(), value=f"{k}{day}".encode(), timestamp=T0 + day * 86_400_000)
    p.produce(topic, key=b"a", value=None, timestamp=T0 + 2 * 86_400_000 + 1)
    assert p.flush(30) == 0

    def as_dict(t: pa.Table) -> dict[str, str]:
        return {k.decode(): v.decode() for k, v in zip(t["key"].to_pylist(), t["value"].to_pylist())}

    assert as_dict(pylog.read_table(topic, bootstrap_servers=bs)) == {"b": "b2", "c": "c1"}
    assert as_dict(pylog.read_table(topic, bootstrap_servers=bs, as_of=T0 + 86_400_000)) == \
        {"a": "a1", "b": "b1", "c": "c1"}
    import datetime as dt

    day0 = dt.datetime.fromtimestamp(T0 / 1000, dt.timezone.utc)
    assert as_dict(pylog.read_table(topic, data_dir=broker.data_dir, as_of=day0)) == \
        {"a": "a0", "b": "b0", "c": "c0"}
    assert as_dict(pylog.read_table(topic, bootstrap_servers=bs, as_of={"0": 4})) == \
        {"a": "a1", "b": "b0", "c": "c0"}
    assert as_dict(pylog.read_table(topic, data_dir=broker.data_dir, as_of={topic: {"0": 0}})) == {}


def test_a_compacted_topic_while_the_cleaner_works(broker: pylog.LocalBroker) -> None:
    from kafka import KafkaProducer

    bs = broker.bootstrap_servers
    topic = create(bs, 2, {"cleanup.policy": "compact", "segment.ms": "100", "segment.bytes": "4096",
                           "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})
    producer = KafkaProducer(bootstrap_servers=bs, linger_ms=5)
    want: dict[bytes, bytes] = {}
    for rnd in range(30):
        for k in range(40):
            key = f"user-{k}".encode()
            value = None if (k % 7 == 0 and rnd == 29) else f"{rnd}-{'x' * (k % 5)}".encode()
            producer.send(topic, key=key, value=value)
            if value is None:
                want.pop(key, None)
            else:
                want[key] = value
        producer.flush()
        time.sleep(0.02)
    producer.close()
    produced = 30 * 40
    compacted = False
    deadline = time.monotonic() + 20
    reads = 0
    while time.monotonic() < deadline and (not compacted or reads < 10):
        for source in ({"bootstrap_servers": bs}, {"data_dir": broker.data_dir}):
            table = pylog.read_table(topic, **source)
            assert dict(zip(table["key"].to_pylist(), table["value"].to_pylist())) == want
            reads += 1
        remaining = pylog.read_topic(topic, data_dir=broker.data_dir, columns=["offset"]).num_rows
        compacted = compacted or remaining < produced
        time.sleep(0.1)
    assert compacted, "the cleaner never compacted the topic"
