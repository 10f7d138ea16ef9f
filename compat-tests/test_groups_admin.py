"""Group administration: list, describe, committed offsets, alter offsets and delete, through the
kafka-python, confluent-kafka and kafkajs admin clients, against a live group and an empty one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from compat_broker import BrokerProcess
from compat_clients import Rec, create_topic, kafkajs_admin, produce, unique
from compat_groups import Member, wait_for

NON_EMPTY_GROUP = 68
pytestmark = pytest.mark.timeout(150)


@pytest.fixture
def live_group(broker: BrokerProcess, topic_name: str, tmp_path: Path) -> Iterator[tuple[str, str, Member]]:
    """A topic with two partitions and a one-member group (kafka-python) that owns both."""
    create_topic(broker.bootstrap, topic_name, partitions=2)
    produce(
        "confluent-kafka", broker.bootstrap, topic_name, [Rec(b"x%d" % i, partition=i % 2) for i in range(6)]
    )
    group = unique("admin")
    m = Member("kafka-python", broker.bootstrap, topic_name, group, tmp_path)
    try:
        wait_for(lambda: m.assignment == [0, 1], 60, "the member to own both partitions", [m])
        yield topic_name, group, m
    finally:
        m.close()


def test_kafka_python_group_admin(broker: BrokerProcess, live_group: tuple[str, str, Member]) -> None:
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import GroupIdNotFoundError, NonEmptyGroupError
    from kafka.structs import OffsetAndMetadata

    topic, group, member = live_group
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    try:
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert group in listed and listed[group]["protocol_type"] == "consumer"

        desc = admin.describe_groups([group])[group]
        assert desc["error"] is None and desc["group_state"] == "Stable"
        assert desc["protocol_type"] == "consumer" and desc["protocol_data"] in ("range", "roundrobin")
        [m] = desc["members"]
        assert topic in repr(m["member_assignment"])

        res = dict(admin.delete_groups([group]))
        assert _errno(res[group]) == NonEmptyGroupError.errno

        member.leave()
        wait_for(
            lambda: admin.describe_groups([group])[group]["group_state"] == "Empty", 30, "group to be Empty"
        )
        assert admin.describe_groups([group])[group]["members"] == []

        new = {
            TopicPartition(topic, 0): OffsetAndMetadata(2, "", -1),
            TopicPartition(topic, 1): OffsetAndMetadata(1, "", -1),
        }
        assert all(err.errno == 0 for err in admin.alter_group_offsets(group, new).values())
        offsets = admin.list_group_offsets({group: None})[group]
        assert {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic} == {0: 2, 1: 1}

        res = dict(admin.delete_groups([group]))
        assert _errno(res[group]) == 0
        assert group not in {g["group_id"] for g in admin.list_groups()}
        res = dict(admin.delete_groups([group]))
        assert _errno(res[group]) == GroupIdNotFoundError.errno
    finally:
        admin.close()


def _errno(result: object) -> int:
    """kafka-python 3.0's delete_groups reports each group's error class name, "OK" for none."""
    import kafka.errors

    if isinstance(result, str):
        return 0 if result == "OK" else int(getattr(kafka.errors, result).errno)
    return int(getattr(result, "errno", 0))


def test_confluent_group_admin(broker: BrokerProcess, live_group: tuple[str, str, Member]) -> None:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, KafkaException
    from confluent_kafka import TopicPartition as TP
    from confluent_kafka.admin import AdminClient

    topic, group, member = live_group
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    listed = {g.group_id: g for g in admin.list_consumer_groups(request_timeout=20).result(30).valid}
    assert group in listed and listed[group].state == ConsumerGroupState.STABLE
    assert not listed[group].is_simple_consumer_group

    desc = admin.describe_consumer_groups([group], request_timeout=20)[group].result(30)
    assert desc.state == ConsumerGroupState.STABLE
    assert desc.partition_assignor in ("range", "roundrobin")
    [m] = desc.members
    assert sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions) == [
        (topic, 0),
        (topic, 1),
    ]

    with pytest.raises(KafkaException) as exc:
        admin.delete_consumer_groups([group], request_timeout=20)[group].result(30)
    assert exc.value.args[0].code() == KafkaError.NON_EMPTY_GROUP

    member.leave()

    def empty() -> bool:
        return admin.describe_consumer_groups([group])[group].result(30).state == ConsumerGroupState.EMPTY

    wait_for(empty, 30, "group to be Empty")

    req = ConsumerGroupTopicPartitions(group, [TP(topic, 0, 3), TP(topic, 1, 2)])
    admin.alter_consumer_group_offsets([req])[group].result(30)
    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    assert {tp.partition: tp.offset for tp in got.topic_partitions if tp.topic == topic} == {0: 3, 1: 2}

    admin.delete_consumer_groups([group], request_timeout=20)[group].result(30)
    listed = {g.group_id for g in admin.list_consumer_groups(request_timeout=20).result(30).valid}
    assert group not in listed


def test_kafkajs_group_admin(
    broker: BrokerProcess, live_group: tuple[str, str, Member], kafkajs: object
) -> None:
    topic, group, member = live_group
    b = broker.bootstrap
    groups = {g["groupId"]: g for g in kafkajs_admin(b, "listGroups")["groups"]}
    assert groups[group]["protocolType"] == "consumer"

    [desc] = kafkajs_admin(b, "describeGroups", [group])["groups"]
    assert (desc["groupId"], desc["state"], desc["protocolType"]) == (group, "Stable", "consumer")
    assert len(desc["members"]) == 1

    res = kafkajs_admin(b, "deleteGroups", [group], allow_error=True)
    assert "error" in res  # NON_EMPTY_GROUP

    member.leave()
    wait_for(
        lambda: kafkajs_admin(b, "describeGroups", [group])["groups"][0]["state"] == "Empty",
        40,
        "group to be Empty",
    )
    kafkajs_admin(
        b,
        "setOffsets",
        {
            "groupId": group,
            "topic": topic,
            "partitions": [{"partition": 0, "offset": "1"}, {"partition": 1, "offset": "2"}],
        },
    )
    [entry] = kafkajs_admin(b, "fetchOffsets", {"groupId": group, "topics": [topic]})
    assert {p["partition"]: p["offset"] for p in entry["partitions"]} == {0: "1", 1: "2"}

    [deleted] = kafkajs_admin(b, "deleteGroups", [group])
    assert deleted["groupId"] == group and deleted["errorCode"] == 0
    assert group not in {g["groupId"] for g in kafkajs_admin(b, "listGroups")["groups"]}
