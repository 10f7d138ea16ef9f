"""Topic administration through three admin clients: create (with configs), duplicate create,
create partitions, describe and alter configs, delete, and the errors Kafka gives for misuse."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from compat_broker import BrokerProcess
from compat_clients import Rec, consume, create_topic, kafkajs_admin, produce
from kafka.admin import KafkaAdminClient

TOPIC = 2  # ConfigResourceType.TOPIC on the wire
RETENTION = "retention.ms"


def partition_count(bootstrap: str, topic: str) -> int:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic=topic, timeout=20)
    t = md.topics[topic]
    assert t.error is None, t.error
    return len(t.partitions)


def topic_exists(bootstrap: str, topic: str) -> bool:
    from confluent_kafka.admin import AdminClient

    return topic in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20).topics


def produce_to_last_partition(bootstrap: str, topic: str, partitions: int) -> None:
    last = partitions - 1
    produce("confluent-kafka", bootstrap, topic, [Rec(b"in the new partition", partition=last)])
    got = consume("kafka-python", bootstrap, topic, 1, partitions=(last,))
    assert [(r.partition, r.value) for r in got] == [(last, b"in the new partition")]


# ----------------------------------------------------------------------------------- kafka-python


@pytest.fixture
def kp_admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    yield admin
    admin.close()


def kp_topic_config(admin: KafkaAdminClient, topic: str) -> dict[str, Any]:
    from kafka.admin import ConfigResource, ConfigResourceType

    res = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
    return res["topic"][topic]


def test_kafka_python_topic_lifecycle(
    broker: BrokerProcess, kp_admin: KafkaAdminClient, topic_name: str
) -> None:
    from kafka.errors import InvalidPartitionsError, TopicAlreadyExistsError, UnknownTopicOrPartitionError

    spec = {"num_partitions": 2, "replication_factor": 1, "configs": {RETENTION: "3600000"}}
    res = kp_admin.create_topics({topic_name: spec}, wait_for_metadata=True)
    assert [(t["name"], t["error_code"]) for t in res["topics"]] == [(topic_name, 0)]
    assert topic_name in kp_admin.list_topics()
    assert partition_count(broker.bootstrap, topic_name) == 2

    with pytest.raises(TopicAlreadyExistsError):
        kp_admin.create_topics({topic_name: spec})

    cfg = kp_topic_config(kp_admin, topic_name)
    assert cfg[RETENTION]["value"] == "3600000"
    assert cfg[RETENTION]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert cfg["cleanup.policy"]["value"] == "delete"  # a default is described too

    kp_admin.alter_configs([_kp_resource(topic_name, {RETENTION: "7200000"})])
    assert kp_topic_config(kp_admin, topic_name)[RETENTION]["value"] == "7200000"

    kp_admin.create_partitions({topic_name: 5})
    assert partition_count(broker.bootstrap, topic_name) == 5
    produce_to_last_partition(broker.bootstrap, topic_name, 5)
    with pytest.raises(InvalidPartitionsError):
        kp_admin.create_partitions({topic_name: 3})

    kp_admin.delete_topics([topic_name])
    assert topic_name not in kp_admin.list_topics()
    with pytest.raises(UnknownTopicOrPartitionError):
        kp_admin.delete_topics([topic_name])


def _kp_resource(topic: str, configs: dict[str, str]) -> Any:
    from kafka.admin import ConfigResource, ConfigResourceType

    return ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)


def test_kafka_python_create_validate_only(
    broker: BrokerProcess, kp_admin: KafkaAdminClient, topic_name: str
) -> None:
    kp_admin.create_topics({topic_name: {"num_partitions": 3, "replication_factor": 1}}, validate_only=True)
    assert not topic_exists(broker.bootstrap, topic_name)


def test_kafka_python_broker_configs(broker: BrokerProcess, kp_admin: KafkaAdminClient) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    node = str(kp_admin.describe_cluster()["brokers"][0].get("broker_id"))
    res = kp_admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, node)], config_filter="all")
    cfg = res["broker"][node]
    assert cfg["message.max.bytes"]["value"] == "1048588"  # Kafka's default
    assert "log.retention.ms" in cfg or "log.retention.hours" in cfg


def test_kafka_python_invalid_topic_requests(kp_admin: KafkaAdminClient, topic_name: str) -> None:
    from kafka.errors import InvalidPartitionsError, InvalidTopicError, UnknownTopicOrPartitionError

    with pytest.raises(InvalidTopicError):
        kp_admin.create_topics({"bad/name": {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(InvalidPartitionsError):
        kp_admin.create_topics({topic_name: {"num_partitions": 0, "replication_factor": 1}})
    with pytest.raises(UnknownTopicOrPartitionError):
        kp_admin.create_partitions({topic_name + "-missing": 4})


# ------------------------------------------------------------------------------- confluent-kafka


def test_confluent_topic_lifecycle(broker: BrokerProcess, topic_name: str) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        NewPartitions,
        NewTopic,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    new = NewTopic(topic_name, num_partitions=2, replication_factor=1, config={RETENTION: "3600000"})
    admin.create_topics([new], operation_timeout=20)[topic_name].result(30)
    assert partition_count(broker.bootstrap, topic_name) == 2

    with pytest.raises(KafkaException) as exc:
        admin.create_topics([new], operation_timeout=20)[topic_name].result(30)
    assert exc.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    resource = ConfigResource(ResourceType.TOPIC, topic_name)
    entries = admin.describe_configs([resource])[resource].result(30)
    assert entries[RETENTION].value == "3600000"
    assert entries[RETENTION].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["cleanup.policy"].value == "delete"

    change = ConfigResource(
        ResourceType.TOPIC,
        topic_name,
        incremental_configs=[ConfigEntry(RETENTION, "7200000", incremental_operation=AlterConfigOpType.SET)],
    )
    for fut in admin.incremental_alter_configs([change]).values():
        fut.result(30)
    entries = admin.describe_configs([resource])[resource].result(30)
    assert entries[RETENTION].value == "7200000"

    admin.create_partitions([NewPartitions(topic_name, 4)], operation_timeout=20)[topic_name].result(30)
    assert partition_count(broker.bootstrap, topic_name) == 4
    produce_to_last_partition(broker.bootstrap, topic_name, 4)
    with pytest.raises(KafkaException) as exc:
        admin.create_partitions([NewPartitions(topic_name, 2)])[topic_name].result(30)
    assert exc.value.args[0].code() == KafkaError.INVALID_PARTITIONS

    admin.delete_topics([topic_name], operation_timeout=20)[topic_name].result(30)
    assert not topic_exists(broker.bootstrap, topic_name)
    with pytest.raises(KafkaException) as exc:
        admin.delete_topics([topic_name], operation_timeout=20)[topic_name].result(30)
    assert exc.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_confluent_legacy_alter_configs(broker: BrokerProcess, topic_name: str) -> None:
    """AlterConfigs (key 33), the non-incremental form older tools use."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    create_topic(broker.bootstrap, topic_name)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic_name, set_config={RETENTION: "5400000"})
    for fut in admin.alter_configs([resource]).values():
        fut.result(30)
    plain = ConfigResource(ResourceType.TOPIC, topic_name)
    assert admin.describe_configs([plain])[plain].result(30)[RETENTION].value == "5400000"


# ------------------------------------------------------------------------------------------ kafkajs


def test_kafkajs_topic_lifecycle(broker: BrokerProcess, topic_name: str, kafkajs: object) -> None:
    b = broker.bootstrap
    spec = {
        "topics": [
            {
                "topic": topic_name,
                "numPartitions": 2,
                "replicationFactor": 1,
                "configEntries": [{"name": RETENTION, "value": "3600000"}],
            }
        ],
        "waitForLeaders": True,
    }
    assert kafkajs_admin(b, "createTopics", spec) is True
    assert kafkajs_admin(b, "createTopics", spec) is False  # kafkajs reports "already exists" as false
    assert topic_name in kafkajs_admin(b, "listTopics")

    query = {"resources": [{"type": TOPIC, "name": topic_name}], "includeSynonyms": False}
    [res] = kafkajs_admin(b, "describeConfigs", query)["resources"]
    assert res["errorCode"] == 0
    values = {e["configName"]: e["configValue"] for e in res["configEntries"]}
    assert values[RETENTION] == "3600000"

    alter = {
        "validateOnly": False,
        "resources": [
            {"type": TOPIC, "name": topic_name, "configEntries": [{"name": RETENTION, "value": "7200000"}]}
        ],
    }
    kafkajs_admin(b, "alterConfigs", alter)
    [res] = kafkajs_admin(b, "describeConfigs", query)["resources"]
    assert {e["configName"]: e["configValue"] for e in res["configEntries"]}[RETENTION] == "7200000"

    kafkajs_admin(b, "createPartitions", {"topicPartitions": [{"topic": topic_name, "count": 3}]})
    md = kafkajs_admin(b, "fetchTopicMetadata", {"topics": [topic_name]})
    assert len(md["topics"][0]["partitions"]) == 3
    produce_to_last_partition(b, topic_name, 3)
    err = kafkajs_admin(
        b, "createPartitions", {"topicPartitions": [{"topic": topic_name, "count": 1}]}, allow_error=True
    )
    assert "error" in err

    kafkajs_admin(b, "deleteTopics", {"topics": [topic_name], "timeout": 20000})
    assert topic_name not in kafkajs_admin(b, "listTopics")
