"""Iceberg tables the broker keeps up to date (``pylog.iceberg.enable=true``), produced to by real
clients and read back by pyiceberg (an independent Iceberg implementation), with DuckDB and Polars
reading what pyiceberg plans: exactly once across kill -9 in the middle of a commit, registry
schema evolution as a new nullable column, poison records in the dead-letter table, upsert mode,
failover to the new leader of partition 0 in a cluster, and bad catalog settings refused at start."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_support import wait_for
from compat_broker import BrokerError, BrokerProcess, free_port, used_brokers

import pylog
from pylog.iceberg import open_catalog

ICEBERG = {"pylog.iceberg.enable": "true", "pylog.iceberg.commit.interval.ms": "300"}


def create_topic(bs: str, topic: str, partitions: int, config: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(30)


def table_rows(data_dir: Path, table: str) -> Any:
    """The table as pyiceberg reads it now (None before it exists)."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return open_catalog(data_dir).load_table(table).scan().to_arrow()
    except NoSuchTableError:
        return None


def exactly(data_dir: Path, table: str, want: set[tuple[int, int]], part: str = "partition",
            off: str = "offset") -> bool:
    rows = table_rows(data_dir, table)
    if rows is None:
        return False
    got = Counter(zip(rows[part].to_pylist(), rows[off].to_pylist()))
    assert all(n == 1 for n in got.values()), f"records repeated: {[k for k, n in got.items() if n > 1][:5]}"
    assert set(got) <= want, f"records that were never produced: {sorted(set(got) - want)[:5]}"
    return set(got) == want


def produced(bs: str, topic: str) -> set[tuple[int, int]]:
    t = pylog.read_topic(topic, bootstrap_servers=bs, columns=["partition", "offset"], progress=False)
    return set(zip(t["partition"].to_pylist(), t["offset"].to_pylist()))


@pytest.fixture
def start(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., BrokerProcess]]:
    """Starts this test's broker (data in tmp_path/data); it is closed after the test's report."""
    started: list[BrokerProcess] = []

    def go(config: dict[str, str] | None = None) -> BrokerProcess:
        b = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", config=config)
        used_brokers(request.node).append(b)
        started.append(b)
        b.start()
        return b

    yield go
    for b in started:
        b.close()


def data_files(data_dir: Path, table: str) -> set[str]:
    t = open_catalog(data_dir).load_table(table)
    return {task.file.file_path for task in t.scan().plan_files()}


@pytest.mark.timeout(300)
def test_kill9_in_the_middle_of_a_commit_then_every_record_exactly_once(
        tmp_path: Path, start: Callable[..., BrokerProcess]) -> None:
    from confluent_kafka import Producer

    broker = start()
    topic = "orders"
    create_topic(broker.bootstrap, topic, 3, ICEBERG)
    stop = threading.Event()
    sent = Counter[str]()

    def write() -> None:
        p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 5, "message.timeout.ms": 120000})
        i = 0
        while not stop.is_set() and i < 60_000:
            p.produce(topic, key=f"k{i % 101}".encode(), value=json.dumps({"i": i}).encode(),
                      on_delivery=lambda err, _m: sent.update(["ok" if err is None else "failed"]))
            i += 1
            if i % 500 == 0:  # about 2000 records a second, for half a minute
                p.poll(0)
                time.sleep(0.25)
        p.flush(120)

    writer = threading.Thread(target=write)
    writer.start()
    warehouse = tmp_path / "data" / "iceberg" / "warehouse" / "pylog" / "orders" / "data"
    wait_for(lambda: table_rows(broker.data_dir, "pylog.orders") is not None, 60, "the table")
    mid_commit = False
    for _attempt in range(8):  # kill -9 while a commit's data file is written but not yet committed
        known = data_files(broker.data_dir, "pylog.orders")
        deadline = time.monotonic() + 20
        orphan = None
        while orphan is None and time.monotonic() < deadline:
            committed = {f.removeprefix("file://") for f in known}
            fresh = {str(p) for p in warehouse.rglob("*.parquet")} - committed
            if fresh:
                broker.kill()
                orphan = fresh.pop()
            time.sleep(0.002)
        assert orphan is not None, "no commit seen in 20 s"
        mid_commit = ("file://" + orphan) not in data_files(broker.data_dir, "pylog.orders")
        broker.start(broker.port)
        if mid_commit:
            break
    assert mid_commit, "no kill landed between a data file and its commit in 8 tries"
    writer.join(180)
    stop.set()
    assert sent["failed"] == 0 and sent["ok"] == 60_000
    want = produced(broker.bootstrap, topic)
    assert len(want) == 60_000
    wait_for(lambda: exactly(broker.data_dir, "pylog.orders", want), 60, "every record in the table once")
    table = open_catalog(broker.data_dir).load_table("pylog.orders")
    summary = table.current_snapshot().summary.additional_properties
    ends = {int(p): o for p, o in json.loads(summary["pylog.offsets"]).items()}
    assert ends == {p: max(o for q, o in want if q == p) + 1 for p in range(3)}
    # DuckDB and Polars read what pyiceberg plans
    scan = table.scan(row_filter="partition = 1")
    n1 = len([1 for p, _ in want if p == 1])
    assert scan.to_duckdb("orders").sql("select count(distinct \"offset\") from orders").fetchall() == [(n1,)]
    assert scan.to_polars().height == n1


AVRO_V1 = {"type": "record", "name": "Payment", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"}]}
AVRO_V2 = {"type": "record", "name": "Payment", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
    {"name": "email", "type": ["null", "string"], "default": None}]}


@pytest.mark.timeout(180)
def test_registry_evolution_and_the_dead_letter_table(start: Callable[..., BrokerProcess]) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    registry_url = f"http://127.0.0.1:{free_port()}"
    broker = start({"schema.registry.listeners": registry_url})
    topic = "payments"
    create_topic(broker.bootstrap, topic, 2, ICEBERG)
    registry = SchemaRegistryClient({"url": registry_url})
    p = Producer({"bootstrap.servers": broker.bootstrap})
    ctx = SerializationContext(topic, MessageField.VALUE)
    v1 = AvroSerializer(registry, json.dumps(AVRO_V1))
    for i in range(50):
        p.produce(topic, key=f"c{i}".encode(), value=v1({"id": i, "customer": f"c{i}"}, ctx))
    p.produce(topic, key=b"bad-1", value=b"not in the wire format")  # poison
    p.produce(topic, key=b"bad-2", value=b"\x00\x00\x01\x86\x9f\x02junk")  # an unknown schema id
    assert p.flush(30) == 0
    wait_for(lambda: (t := table_rows(broker.data_dir, "pylog.payments")) is not None and t.num_rows == 50,
             60, "the first 50 records")
    dlq = wait_for(lambda: table_rows(broker.data_dir, "pylog.payments~dlq"), 30, "the dead-letter table")
    assert sorted(dlq["key"].to_pylist()) == [b"bad-1", b"bad-2"]
    errors = dict(zip(dlq["key"].to_pylist(), dlq["error"].to_pylist()))
    assert "wire format" in errors[b"bad-1"] and "schema id 99999 is unknown" in errors[b"bad-2"]
    assert sorted(dlq["value"].to_pylist())[1] == b"not in the wire format"
    assert registry.get_compatibility() == "BACKWARD"  # the registry's default level
    v2 = AvroSerializer(registry, json.dumps(AVRO_V2))
    for i in range(50, 80):
        record = {"id": i, "customer": f"c{i}", "email": f"{i}@x"}
        p.produce(topic, key=f"c{i}".encode(), value=v2(record, ctx))
    assert p.flush(30) == 0
    rows = wait_for(lambda: (t := table_rows(broker.data_dir, "pylog.payments")) is not None
                    and t.num_rows == 80 and t, 60, "the v2 records")
    table = open_catalog(broker.data_dir).load_table("pylog.payments")
    assert table.schema().find_field("email").optional
    assert [f.name for f in table.schema().fields][-1] == "email"  # Iceberg adds columns at the end
    emails = dict(zip(rows["id"].to_pylist(), rows["email"].to_pylist()))
    assert all(emails[i] is None for i in range(50)) and emails[79] == "79@x"
    assert exactly(broker.data_dir, "pylog.payments", produced(broker.bootstrap, topic) - {
        (p_, o) for p_, o in zip(dlq["partition"].to_pylist(), dlq["offset"].to_pylist())},
        part="kafka_partition", off="kafka_offset")
    got = table.scan(row_filter="id >= 70").to_duckdb("p").sql(
        "select count(*), count(email) from p").fetchall()
    assert got == [(10, 10)]
    assert table.scan(selected_fields=("customer", "email")).to_polars()["email"].null_count() == 50


@pytest.mark.timeout(120)
def test_upsert_mode_keeps_the_latest_value_per_key(start: Callable[..., BrokerProcess]) -> None:
    from kafka import KafkaProducer

    broker = start()
    create_topic(broker.bootstrap, "profiles", 2, {**ICEBERG, "pylog.iceberg.mode": "upsert"})
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap)
    latest: dict[bytes, bytes | None] = {}
    for rnd in range(5):
        for k in range(20):
            key = f"user-{k}".encode()
            value = None if (k % 6 == 0 and rnd == 4) else f"{rnd}".encode()
            kp.send("profiles", key=key, value=value)
            latest[key] = value
        kp.flush()
        time.sleep(0.4)
    kp.close()
    want = {k: v for k, v in latest.items() if v is not None}

    def matches() -> bool:
        rows = table_rows(broker.data_dir, "pylog.profiles")
        return rows is not None and dict(zip(rows["key"].to_pylist(), rows["value"].to_pylist())) == want \
            and rows.num_rows == len(want)

    wait_for(matches, 60, "the latest value of every key")


@pytest.mark.timeout(300)
def test_the_new_leader_of_partition_0_takes_over(cluster_factory: Any, tmp_path: Path) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    shared = tmp_path / "shared"
    cluster = cluster_factory(3, {"pylog.iceberg.catalog.uri": f"sqlite:///{shared}/catalog.db",
                                  "pylog.iceberg.warehouse": str(shared / "warehouse")})
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    config = {**ICEBERG, "pylog.iceberg.commit.interval.ms": "1000", "min.insync.replicas": "2"}
    admin.create_topics([NewTopic("clicks", 2, 3, config=config)])["clicks"].result(30)
    p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True})
    for i in range(2000):
        p.produce("clicks", key=f"u{i % 50}".encode(), value=f"{i}".encode())
    assert p.flush(60) == 0
    cat = open_catalog(uri=f"sqlite:///{shared}/catalog.db", warehouse=str(shared / "warehouse"))

    def holds(n: int) -> bool:
        try:
            return cat.load_table("pylog.clicks").scan().to_arrow().num_rows == n
        except Exception:
            return False

    wait_for(lambda: holds(2000), 60, "the first 2000 records")
    md = admin.list_topics("clicks", timeout=10).topics["clicks"].partitions
    materialiser = md[0].leader
    cluster.kill(materialiser)
    for i in range(2000, 3000):
        p.produce("clicks", key=f"u{i % 50}".encode(), value=f"{i}".encode())
    assert p.flush(60) == 0
    t0 = time.monotonic()
    wait_for(lambda: holds(3000), 60, "the records produced after the kill")
    rows = cat.load_table("pylog.clicks").scan().to_arrow()
    assert len(set(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist()))) == 3000
    assert time.monotonic() - t0 < 1.0 + 3.0 + 10  # interval + session timeout + 10 s
    new = AdminClient({"bootstrap.servers": bs}).list_topics("clicks", timeout=10).topics["clicks"].partitions
    assert new[0].leader != materialiser


def test_bad_catalog_settings_stop_the_start(tmp_path: Path, start: Callable[..., BrokerProcess]) -> None:
    with pytest.raises(BrokerError):
        start({"pylog.iceberg.catalog.type": "rest"})
    assert "pylog.iceberg.catalog.type=rest needs pylog.iceberg.catalog.uri" in \
        (tmp_path / "broker.log").read_text()


@pytest.mark.timeout(120)
def test_dead_letters_before_the_topic_has_a_schema(start: Callable[..., BrokerProcess]) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    registry_url = f"http://127.0.0.1:{free_port()}"
    broker = start({"schema.registry.listeners": registry_url})
    create_topic(broker.bootstrap, "events", 1, {**ICEBERG, "pylog.iceberg.layout": "registry"})
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        p.produce("events", value=f"junk {i}".encode())
    assert p.flush(30) == 0
    dlq = wait_for(lambda: (t := table_rows(broker.data_dir, "pylog.events~dlq")) is not None
                   and t.num_rows == 3 and t, 60, "the dead letters")
    assert dlq["offset"].to_pylist() == [0, 1, 2]
    assert table_rows(broker.data_dir, "pylog.events") is None  # no schema, no columns yet
    v1 = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(AVRO_V1))
    ctx = SerializationContext("events", MessageField.VALUE)
    p.produce("events", value=v1({"id": 7, "customer": "ada"}, ctx))
    assert p.flush(30) == 0
    rows = wait_for(lambda: table_rows(broker.data_dir, "pylog.events"), 60, "the table")
    assert rows.select(["id", "customer", "kafka_offset"]).to_pylist() == [
        {"id": 7, "customer": "ada", "kafka_offset": 3}]
    assert table_rows(broker.data_dir, "pylog.events~dlq").num_rows == 3
