"""Topics described by id and in pages, as Kafka 4 clients ask: kafka-python's admin by topic id,
the Java client's Metadata shape (``name=""`` beside the id, sent with kafka-python's codec), and
DescribeTopicPartitions (75) with its cursor and partition limit."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import kp_wire
import pytest
from compat_broker import BrokerProcess
from compat_clients import create_topic
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin.topics import DescribeTopicPartitionsRequest
from kafka.protocol.metadata import MetadataRequest

UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST, UNKNOWN_TOPIC_ID = 3, 42, 100


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    yield a
    a.close()


def topic_id(admin: KafkaAdminClient, name: str) -> uuid.UUID:
    [t] = admin.describe_topics([name])
    return uuid.UUID(str(t["topic_id"]))


def test_kafka_python_describes_topics_by_id(
    broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=3)
    tid = topic_id(admin, topic_name)
    assert tid != uuid.UUID(int=0)
    [t] = admin.describe_topics([tid])  # kafka-python sends name=None beside the id
    assert (t["error_code"], t["name"], uuid.UUID(str(t["topic_id"]))) == (0, topic_name, tid)
    assert sorted(p["partition_index"] for p in t["partitions"]) == [0, 1, 2]


def test_metadata_by_id_with_an_empty_name_as_the_java_client_sends_it(
    broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    create_topic(broker.bootstrap, f"{topic_name}-other", partitions=1)
    tid, missing = topic_id(admin, topic_name), uuid.uuid4()
    T = MetadataRequest.MetadataRequestTopic
    resp = kp_wire.call(
        broker.bootstrap,
        MetadataRequest,
        12,
        topics=[T(name="", topic_id=tid), T(name="", topic_id=missing)],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    by_id = {t.topic_id: t for t in resp.topics}
    assert set(by_id) == {tid, missing}
    found = by_id[tid]
    assert (found.error_code, found.name) == (0, topic_name)  # the name the client needs
    assert sorted(p.partition_index for p in found.partitions) == [0, 1]
    assert (by_id[missing].error_code, by_id[missing].name) == (UNKNOWN_TOPIC_ID, None)
    # A request by id is answered by id alone, whatever names ride along (as in Kafka).
    resp = kp_wire.call(
        broker.bootstrap,
        MetadataRequest,
        12,
        topics=[T(name=f"{topic_name}-other", topic_id=tid)],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    assert [(t.name, t.topic_id) for t in resp.topics] == [(topic_name, tid)]


def _page(broker: BrokerProcess, names: list[str], limit: int, cursor: tuple[str, int] | None) -> object:
    R = DescribeTopicPartitionsRequest
    return kp_wire.call(
        broker.bootstrap,
        R,
        0,
        topics=[R.TopicRequest(name=n) for n in names],
        response_partition_limit=limit,
        cursor=None if cursor is None else R.Cursor(topic_name=cursor[0], partition_index=cursor[1]),
    )


def test_describe_topic_partitions_pages_through_topics(broker: BrokerProcess, topic_name: str) -> None:
    a, b = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(broker.bootstrap, a, partitions=5)
    create_topic(broker.bootstrap, b, partitions=2)
    names, cursor, pages = [b, a], None, []
    while True:
        resp = _page(broker, names, 3, cursor)
        pages.append([(t.name, [p.partition_index for p in t.partitions]) for t in resp.topics])
        if resp.next_cursor is None:
            break
        cursor = (resp.next_cursor.topic_name, resp.next_cursor.partition_index)
        assert len(pages) < 10
    # name order, at most 3 partitions an answer, each page starting where the cursor points
    assert pages == [[(a, [0, 1, 2])], [(a, [3, 4]), (b, [0])], [(b, [1])]]
    resp = _page(broker, [a, f"{topic_name}-missing"], 2000, None)
    codes = {t.name: t.error_code for t in resp.topics}
    assert codes == {a: 0, f"{topic_name}-missing": UNKNOWN_TOPIC_OR_PARTITION}
    [desc] = [t for t in resp.topics if t.name == a]
    assert desc.topic_id != uuid.UUID(int=0) and all(p.leader_id >= 0 for p in desc.partitions)
    # the cursor must name a topic of the list
    resp = _page(broker, [a], 10, (b, 0))
    assert [t.error_code for t in resp.topics] == [INVALID_REQUEST]


def test_describe_topic_partitions_of_every_topic(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    seen: dict[str, list[int]] = {}
    cursor = None
    for _ in range(1000):
        resp = _page(broker, [], 1, cursor)  # an empty list: every topic, one partition a page
        for t in resp.topics:
            seen.setdefault(t.name, []).extend(p.partition_index for p in t.partitions)
        if resp.next_cursor is None:
            break
        cursor = (resp.next_cursor.topic_name, resp.next_cursor.partition_index)
    assert seen[topic_name] == [0, 1]
