"""Client metrics (KIP-714) with real clients: confluent-kafka producers and consumers (librdkafka
2.16, ``enable.metrics.push`` on by default) push their metrics once a CLIENT_METRICS subscription
asks for them, and ``pylog.client_metrics`` reads them back. Subscriptions are written with
IncrementalAlterConfigs and listed with ListConfigResources, both encoded by kafka-python's codec
(confluent-kafka 2.16 has no CLIENT_METRICS resource type)."""

from __future__ import annotations

import time
from typing import Any

import kp_wire
import pytest
from compat_broker import BrokerProcess
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin.configs import IncrementalAlterConfigsRequest, ListConfigResourcesRequest

import pylog

CLIENT_METRICS, TOPIC = 16, 2
SET, DELETE = 0, 1
R = IncrementalAlterConfigsRequest.AlterConfigsResource


def subscribe(address: str, name: str, **configs: str | None) -> None:
    ops = [
        R.AlterableConfig(name=k.replace("_", "."), config_operation=DELETE if v is None else SET, value=v)
        for k, v in configs.items()
    ]
    resp = kp_wire.call(
        address,
        IncrementalAlterConfigsRequest,
        1,
        resources=[R(resource_type=CLIENT_METRICS, resource_name=name, configs=ops)],
        validate_only=False,
    )
    assert [r.error_code for r in resp.responses] == [0], resp


def wait_for_metrics(address: str, client_ids: set[str], metrics: set[str], timeout_s: float = 60) -> Any:
    """pylog.client_metrics as a DataFrame once every client id has pushed the given metrics."""
    deadline = time.monotonic() + timeout_s
    while True:
        df = pylog.client_metrics(bootstrap_servers=address).to_pandas()
        seen = set(zip(df["client_id"], df["metric"]))
        if all((c, mname) in seen for c in client_ids for mname in metrics):
            return df
        assert time.monotonic() < deadline, f"no metrics from {client_ids} after {timeout_s}s: {sorted(seen)}"
        time.sleep(0.5)


def test_confluent_producer_and_consumer_push_their_metrics(broker: BrokerProcess, topic_name: str) -> None:
    addr = broker.bootstrap
    subscribe(addr, "every-client", metrics="*", interval_ms="1000")
    admin = AdminClient({"bootstrap.servers": addr})
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    producer = Producer({"bootstrap.servers": addr, "client.id": "metrics-producer", "linger.ms": 5})
    consumer = Consumer(
        {
            "bootstrap.servers": addr,
            "client.id": "metrics-consumer",
            "group.id": f"{topic_name}-group",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic_name])
    try:
        deadline, df = time.monotonic() + 90, None
        producer_metrics = {
            "org.apache.kafka.producer.record.queue.time.avg",
            "org.apache.kafka.producer.node.request.latency.avg",
        }
        consumer_metrics = {
            "org.apache.kafka.consumer.fetch.manager.fetch.latency.avg",
            "org.apache.kafka.consumer.coordinator.assigned.partitions",
        }
        while df is None:
            for i in range(20):
                producer.produce(topic_name, f"v{i}".encode())
            producer.poll(0)
            consumer.poll(0.2)
            try:
                df = wait_for_metrics(addr, {"metrics-producer"}, producer_metrics, timeout_s=0.1)
                df = wait_for_metrics(addr, {"metrics-consumer"}, consumer_metrics, timeout_s=0.1)
            except AssertionError:
                df = None
                assert time.monotonic() < deadline, "the clients pushed no metrics in 90 s"
        rows = df[df["client_id"].isin(["metrics-producer", "metrics-consumer"])]
        assert set(rows["client_software_name"]) == {"confluent-kafka-python"}
        assert all("2.16" in v for v in rows["client_software_version"])
        assert set(rows["client_source_address"]) == {"127.0.0.1"}
        assert (rows["pushes"] >= 1).all() and rows["pushed_at"].notna().all()
        assert (rows["push_interval_ms"] == 1000).all() and (rows["broker"] == 1).all()
        assert rows["error"].isna().all()
        assigned = rows[rows["metric"] == "org.apache.kafka.consumer.coordinator.assigned.partitions"]
        assert assigned["value"].max() == 1  # the consumer owns the topic's one partition
    finally:
        consumer.close()
        producer.flush(10)


def test_subscriptions_select_clients_and_are_listed(broker: BrokerProcess, topic_name: str) -> None:
    addr = broker.bootstrap
    subscribe(addr, "every-client", metrics=None, interval_ms=None)  # the other test's subscription
    subscribe(
        addr,
        "only-chosen",
        metrics="org.apache.kafka.producer.",
        interval_ms="1000",
        match="client_id=chosen-.*",
    )
    chosen = Producer({"bootstrap.servers": addr, "client.id": "chosen-1"})
    other = Producer({"bootstrap.servers": addr, "client.id": "not-chosen"})
    try:
        df = wait_for_metrics(addr, {"chosen-1"}, {"org.apache.kafka.producer.record.queue.time.avg"})
        mine = df[df["client_id"] == "chosen-1"]
        assert mine["metric"].str.startswith("org.apache.kafka.producer.").all()
        # the other producer was told to push nothing: it is known, and has no metrics
        time.sleep(2.5)
        df = pylog.client_metrics(bootstrap_servers=addr).to_pandas()
        rows = df[df["client_id"] == "not-chosen"]
        assert len(rows) == 1 and rows["metric"].isna().all() and (rows["pushes"] == 0).all()
    finally:
        chosen.flush(5)
        other.flush(5)
    # ListConfigResources: v0 lists the subscriptions, v1 any type
    v0 = kp_wire.call(addr, ListConfigResourcesRequest, 0)
    assert v0.error_code == 0 and {r.resource_name for r in v0.config_resources} == {"only-chosen"}
    admin = AdminClient({"bootstrap.servers": addr})
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    v1 = kp_wire.call(addr, ListConfigResourcesRequest, 1, resource_types=[CLIENT_METRICS, TOPIC])
    listed = {(r.resource_type, r.resource_name) for r in v1.config_resources}
    assert (CLIENT_METRICS, "only-chosen") in listed and (TOPIC, topic_name) in listed
    everything = kp_wire.call(addr, ListConfigResourcesRequest, 1, resource_types=[])
    assert {r.resource_type for r in everything.config_resources} >= {CLIENT_METRICS, TOPIC, 4, 8}
    assert kp_wire.call(addr, ListConfigResourcesRequest, 1, resource_types=[3]).error_code == 35


def test_an_unreachable_cluster_is_a_clear_error() -> None:
    with pytest.raises(ConnectionError, match="no Kafka broker reachable"):
        pylog.client_metrics(bootstrap_servers="127.0.0.1:1", timeout_s=2)
