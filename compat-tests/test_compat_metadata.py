"""Metadata as each real client sees it: one broker, advertised at the address it listens on."""

from __future__ import annotations

import asyncio
import json

from compat_broker import BrokerProcess
from compat_clients import create_topic, kafkajs_admin, run_cmd


def test_kafka_python_metadata(broker: BrokerProcess, topic_name: str) -> None:
    from kafka.admin import KafkaAdminClient

    create_topic(broker.bootstrap, topic_name, partitions=3)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    try:
        cluster = admin.describe_cluster()
        brokers = cluster["brokers"]
        assert [(b["host"], b["port"]) for b in brokers] == [("127.0.0.1", broker.port)]
        node_id = brokers[0].get("broker_id", brokers[0].get("node_id"))
        assert cluster["cluster_id"]
        assert topic_name in admin.list_topics()
        [described] = admin.describe_topics([topic_name])
        assert described["error_code"] == 0
        parts = sorted(described["partitions"], key=lambda p: p["partition_index"])
        assert [p["partition_index"] for p in parts] == [0, 1, 2]
        assert all(p["leader_id"] == node_id and p["error_code"] == 0 for p in parts)
        assert all(p["replica_nodes"] == [node_id] and p["isr_nodes"] == [node_id] for p in parts)
    finally:
        admin.close()


def test_confluent_metadata(broker: BrokerProcess, topic_name: str) -> None:
    from confluent_kafka.admin import AdminClient

    create_topic(broker.bootstrap, topic_name, partitions=3)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    md = admin.list_topics(timeout=20)
    assert md.cluster_id
    assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", broker.port)]
    [node_id] = md.brokers
    assert md.controller_id == node_id
    t = md.topics[topic_name]
    assert t.error is None
    assert sorted(t.partitions) == [0, 1, 2]
    for p in t.partitions.values():
        assert p.error is None
        assert p.leader == node_id
        assert p.replicas == [node_id] and p.isrs == [node_id]


def test_confluent_metadata_unknown_topic(broker: BrokerProcess, topic_name: str) -> None:
    """Asking for one missing topic (no auto-creation) names it with UNKNOWN_TOPIC_OR_PART."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "allow.auto.create.topics": False})
    md = admin.list_topics(topic=topic_name, timeout=20)
    t = md.topics[topic_name]
    assert t.error is not None and t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_aiokafka_metadata(broker: BrokerProcess, topic_name: str) -> None:
    from aiokafka import AIOKafkaConsumer

    create_topic(broker.bootstrap, topic_name, partitions=3)

    async def go() -> tuple[set[str], set[int] | None]:
        from aiokafka import AIOKafkaProducer

        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap)
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await asyncio.wait_for(c.start(), 30)
        await asyncio.wait_for(p.start(), 30)
        try:
            return await c.topics(), await asyncio.wait_for(p.partitions_for(topic_name), 30)
        finally:
            await c.stop()
            await p.stop()

    topics, partitions = asyncio.run(go())
    assert topic_name in topics
    assert partitions == {0, 1, 2}


def test_kcat_metadata(broker: BrokerProcess, topic_name: str, kcat: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=3)
    out = run_cmd([kcat, "-b", broker.bootstrap, "-L", "-J", "-t", topic_name, "-m", "20"])
    md = json.loads(out.stdout)
    assert [b["name"] for b in md["brokers"]] == [f"127.0.0.1:{broker.port}"]
    node_id = md["brokers"][0]["id"]
    [t] = md["topics"]
    assert t["topic"] == topic_name and "error" not in t
    parts = sorted(t["partitions"], key=lambda p: p["partition"])
    assert [p["partition"] for p in parts] == [0, 1, 2]
    assert all(p["leader"] == node_id for p in parts)


def test_kafkajs_metadata(broker: BrokerProcess, topic_name: str, kafkajs: object) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=3)
    cluster = kafkajs_admin(broker.bootstrap, "describeCluster")
    assert [(b["host"], b["port"]) for b in cluster["brokers"]] == [("127.0.0.1", broker.port)]
    node_id = cluster["brokers"][0]["nodeId"]
    assert cluster["clusterId"]
    assert topic_name in kafkajs_admin(broker.bootstrap, "listTopics")
    md = kafkajs_admin(broker.bootstrap, "fetchTopicMetadata", {"topics": [topic_name]})
    [t] = md["topics"]
    parts = sorted(t["partitions"], key=lambda p: p["partitionId"])
    assert [p["partitionId"] for p in parts] == [0, 1, 2]
    assert all(p["leader"] == node_id and p["partitionErrorCode"] == 0 for p in parts)
