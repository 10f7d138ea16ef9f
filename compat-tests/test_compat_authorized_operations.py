"""Authorized operations (KIP-430) as confluent-kafka's AdminClient reads them.

With no authorizer, the caller may perform every operation valid for the resource type, as Kafka
answers: 8 for a topic, 5 for a group, 7 for the cluster. A request that does not ask gets none.
"""

from __future__ import annotations

from typing import Any

from compat_broker import BrokerProcess
from compat_clients import create_topic, unique

TOPIC_OPS = {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
GROUP_OPS = {"READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
CLUSTER_OPS = {
    "CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"
}


def names(ops: Any) -> set[str] | None:
    return None if ops is None else {op.name for op in ops}


def _admin(broker: BrokerProcess) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap})


def test_describe_topics(broker: BrokerProcess, topic_name: str) -> None:
    from confluent_kafka import TopicCollection

    create_topic(broker.bootstrap, topic_name, partitions=2)
    admin = _admin(broker)
    topics = TopicCollection([topic_name])
    [asked] = admin.describe_topics(topics, include_authorized_operations=True, request_timeout=20).values()
    desc = asked.result(30)
    assert desc.name == topic_name and len(desc.partitions) == 2
    assert names(desc.authorized_operations) == TOPIC_OPS
    [plain] = admin.describe_topics(topics, request_timeout=20).values()
    assert not plain.result(30).authorized_operations


def test_describe_cluster(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    desc = admin.describe_cluster(include_authorized_operations=True, request_timeout=20).result(30)
    assert desc.cluster_id and len(desc.nodes) == 1
    assert names(desc.authorized_operations) == CLUSTER_OPS
    assert not admin.describe_cluster(request_timeout=20).result(30).authorized_operations


def test_describe_consumer_groups(broker: BrokerProcess, topic_name: str) -> None:
    from confluent_kafka import Consumer, ConsumerGroupState, TopicPartition

    create_topic(broker.bootstrap, topic_name)
    group = unique("ops")
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False}
    consumer = Consumer(conf)
    try:  # a committed offset makes the group exist (Empty)
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 0)], asynchronous=False)
    finally:
        consumer.close()
    admin = _admin(broker)
    asked = admin.describe_consumer_groups([group], include_authorized_operations=True, request_timeout=20)
    desc = asked[group].result(30)
    assert desc.group_id == group and desc.state == ConsumerGroupState.EMPTY
    assert names(desc.authorized_operations) == GROUP_OPS
    plain = admin.describe_consumer_groups([group], request_timeout=20)[group].result(30)
    assert not plain.authorized_operations
