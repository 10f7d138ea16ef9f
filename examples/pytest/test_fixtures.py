"""pylog's pytest fixtures, used as a test suite of any project would use them."""

from __future__ import annotations

import pytest


def test_each_test_gets_a_new_empty_topic(kafka_broker, kafka_topic: str) -> None:
    assert kafka_topic.startswith("test_each_test_gets_a_new_empty_topic-")
    assert kafka_broker.read(kafka_topic).num_rows == 0


@pytest.mark.kafka_topic(partitions=4, config={"cleanup.policy": "compact"})
def test_the_marker_shapes_the_topic(kafka_broker, kafka_topic: str) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    try:
        [topic] = admin.describe_topics([kafka_topic])
        assert len(topic["partitions"]) == 4
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, kafka_topic)])
        assert configs["topic"][kafka_topic]["cleanup.policy"]["value"] == "compact"
    finally:
        admin.close()


def test_produce_and_read_helpers(kafka_broker, kafka_topic: str) -> None:
    written = kafka_broker.produce(kafka_topic, ["one", b"two", None], keys=["k", "k", "k"],
                                   headers=[{"source": "test"}, [("n", b"2")], {}])
    assert written.records == 3 and written.offsets == {0: (0, 2)}
    table = kafka_broker.read(kafka_topic, include_headers=True)
    assert table.column("value").to_pylist() == [b"one", b"two", None]
    assert table.column("key").to_pylist() == [b"k"] * 3
    assert table.column("headers").to_pylist()[:2] == [[{"key": "source", "value": b"test"}],
                                                      [{"key": "n", "value": b"2"}]]
    assert str(table.schema.field("timestamp").type) == "timestamp[ms, tz=UTC]"


def test_topics_by_hand(kafka_broker) -> None:
    name = kafka_broker.create_topic(partitions=2, config={"retention.ms": "60000"})
    with pytest.raises(RuntimeError, match="TOPIC_ALREADY_EXISTS"):
        kafka_broker.create_topic(name)
    kafka_broker.produce(name, b"first", partition=1)
    assert kafka_broker.read(name, partitions=[1]).column("offset").to_pylist() == [0]
    kafka_broker.delete_topic(name)


def test_the_data_directory_is_the_brokers(kafka_broker, kafka_topic: str) -> None:
    import pylog

    kafka_broker.produce(kafka_topic, [b"a", b"b"])
    local = pylog.read_topic(kafka_topic, data_dir=kafka_broker.data_dir)
    assert local.column("value").to_pylist() == [b"a", b"b"]


def test_schema_registry(kafka_broker, schema_registry_url: str, kafka_topic: str) -> None:
    import pyarrow as pa

    import pylog

    payments = pa.table({"id": [1, 2], "amount": [9.5, 12.25]})
    pylog.write_topic(payments, kafka_topic, bootstrap_servers=kafka_broker.bootstrap_servers,
                      value_schema="registry", schema_registry_url=schema_registry_url, progress=False)
    table = kafka_broker.read(kafka_topic, decode="registry")
    assert table.column("value").to_pylist() == [{"id": 1, "amount": 9.5}, {"id": 2, "amount": 12.25}]


def test_a_cluster_survives_a_killed_leader(kafka_cluster, kafka_topic: str) -> None:
    """kafka_cluster: three nodes (started only because a test asks for them); kill -9 a leader."""
    from kafka import KafkaAdminClient

    kafka_cluster.produce(kafka_topic, [b"before"])
    admin = KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers)
    try:
        [topic] = admin.describe_topics([kafka_topic])
    finally:
        admin.close()
    [partition] = topic["partitions"]
    leader = partition["leader_id"]
    assert sorted(partition["replica_nodes"]) == [1, 2, 3]  # replicated to every node by default
    kafka_cluster.cluster.kill(leader)  # kill -9
    try:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all"})
        producer.produce(kafka_topic, b"after")
        assert producer.flush(30) == 0  # delivered, to the new leader
        assert kafka_cluster.read(kafka_topic).column("value").to_pylist() == [b"before", b"after"]
    finally:
        kafka_cluster.cluster.start_node(leader)
