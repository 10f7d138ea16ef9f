"""QuorumController: validation errors with Kafka's codes, records for what succeeded."""

from __future__ import annotations

import random
import uuid
from collections import Counter

import pytest
from pylog.protocol.errors import ErrorCode

from pylog.cluster.controller import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    IncrementalAlterConfigsResource,
    NewPartitions,
    NewTopic,
    QuorumController,
    assign_replicas,
)
from pylog.cluster.image import MetadataImage
from pylog.cluster.records import (
    BrokerEndpoint,
    ConfigResourceType,
    PartitionRecord,
    TopicRecord,
)

TOPIC = ConfigResourceType.TOPIC
BROKER = ConfigResourceType.BROKER


def controller(brokers: int = 3, seed: int = 1) -> QuorumController:
    c = QuorumController(rng=random.Random(seed))
    for b in range(1, brokers + 1):
        res = c.register_broker(b, uuid.UUID(int=b), [BrokerEndpoint("PLAINTEXT", "localhost", 9090 + b)])
        assert res.response.error_code == ErrorCode.NONE and res.response.broker_epoch == b
        hb = c.broker_heartbeat(b, b, 10**9, want_fence=False, want_shutdown=False, now_ms=0)
        assert hb.response.error_code == ErrorCode.NONE and not hb.response.is_fenced
    return c


def test_create_topic_emits_topic_configs_and_partitions() -> None:
    c = controller()
    res = c.create_topics([NewTopic("orders", 6, 2, configs={"cleanup.policy": "compact"})])
    (r,) = res.response
    assert r.error_code == ErrorCode.NONE and r.num_partitions == 6 and r.replication_factor == 2
    assert [type(x).__name__ for x in res.records[:2]] == ["TopicRecord", "ConfigRecord"]
    parts = [x for x in res.records if isinstance(x, PartitionRecord)]
    assert [p.partition_id for p in parts] == list(range(6))
    for p in parts:
        assert len(set(p.replicas)) == 2 and p.leader == p.replicas[0] and p.isr == p.replicas
    assert Counter(p.leader for p in parts) == {1: 2, 2: 2, 3: 2}  # leaders spread round-robin
    assert c.image.topic("orders").topic_id == r.topic_id  # type: ignore[union-attr]
    assert c.image.topic_configs("orders") == {"cleanup.policy": "compact"}


def test_defaults_and_validate_only() -> None:
    c = controller()
    res = c.create_topics([NewTopic("a")], validate_only=True)
    assert res.records == () and res.response[0].error_code == ErrorCode.NONE
    assert res.response[0].num_partitions == 1 and c.image.topic("a") is None
    res = c.create_topics([NewTopic("a")])
    assert len(res.records) == 2 and c.image.topic("a") is not None


@pytest.mark.parametrize(
    ("topic", "code"),
    [
        (NewTopic(""), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (NewTopic("."), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (NewTopic(".."), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (NewTopic("a" * 250), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (NewTopic("has space"), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (NewTopic("ünï"), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (NewTopic("exists"), ErrorCode.TOPIC_ALREADY_EXISTS),
        (NewTopic("ex_ists"), ErrorCode.INVALID_TOPIC_EXCEPTION),  # collides with "ex.ists"
        (NewTopic("t", 0), ErrorCode.INVALID_PARTITIONS),
        (NewTopic("t", -2), ErrorCode.INVALID_PARTITIONS),
        (NewTopic("t", 1, 0), ErrorCode.INVALID_REPLICATION_FACTOR),
        (NewTopic("t", 1, 4), ErrorCode.INVALID_REPLICATION_FACTOR),
        (NewTopic("t", configs={"no.such.config": "1"}), ErrorCode.INVALID_CONFIG),
        (NewTopic("t", configs={"retention.ms": "soon"}), ErrorCode.INVALID_CONFIG),
        (NewTopic("t", configs={"cleanup.policy": "shred"}), ErrorCode.INVALID_CONFIG),
        (NewTopic("t", configs={"min.insync.replicas": "0"}), ErrorCode.INVALID_CONFIG),
        (NewTopic("t", configs={"retention.ms": None}), ErrorCode.INVALID_CONFIG),
        (NewTopic("t", assignments={0: [1], 2: [2]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (NewTopic("t", assignments={0: [1, 1]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (NewTopic("t", assignments={0: [9]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (NewTopic("t", 1, assignments={0: [1]}), ErrorCode.INVALID_REQUEST),
        (NewTopic("__cluster_metadata"), ErrorCode.INVALID_REQUEST),
    ],
)
def test_create_topic_errors(topic: NewTopic, code: int) -> None:
    c = controller()
    c.create_topics([NewTopic("exists"), NewTopic("ex.ists")])
    before = c.image.to_dict()
    res = c.create_topics([topic])
    assert res.response[0].error_code == code, res.response[0].error_message
    assert res.response[0].error_message
    assert res.records == () and c.image.to_dict() == before


def test_errors_are_per_topic_and_duplicates_rejected() -> None:
    c = controller(brokers=1)
    res = c.create_topics([NewTopic("ok"), NewTopic("bad name"), NewTopic("dup"), NewTopic("dup")])
    codes = [r.error_code for r in res.response]
    assert codes == [
        0,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REQUEST,
    ]
    assert [type(r) for r in res.records] == [TopicRecord, PartitionRecord]


def test_manual_assignment() -> None:
    c = controller()
    res = c.create_topics([NewTopic("m", assignments={0: [3, 1], 1: [2, 3]})])
    assert res.response[0].error_code == 0
    assert [(p.replicas, p.leader) for p in c.image.partitions("m").values()] == [((3, 1), 3), ((2, 3), 2)]


def test_assign_replicas_spreads_followers() -> None:
    placement = assign_replicas([1, 2, 3, 4, 5], 10, 3, start=0, shift=0)
    assert all(len(set(r)) == 3 for r in placement)
    assert Counter(r[0] for r in placement) == dict.fromkeys([1, 2, 3, 4, 5], 2)
    assert Counter(b for r in placement for b in r) == dict.fromkeys([1, 2, 3, 4, 5], 6)


def test_delete_topics() -> None:
    c = controller()
    created = c.create_topics([NewTopic("a", configs={"retention.ms": "1"}), NewTopic("b")]).response
    res = c.delete_topics(["a", "nope"], [created[1].topic_id, uuid.UUID(int=7)])  # type: ignore[list-item]
    codes = [r.error_code for r in res.response]
    assert codes == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0, ErrorCode.UNKNOWN_TOPIC_ID]
    assert res.response[2].name == "b"
    assert c.image.topics == {} and c.image.topic_configs("a") == {}
    off = QuorumController(c.image, rng=random.Random(0), delete_topic_enable=False)
    off.create_topics([NewTopic("x")])
    assert off.delete_topics(["x"]).response[0].error_code == ErrorCode.TOPIC_DELETION_DISABLED


def test_create_partitions() -> None:
    c = controller()
    c.create_topics([NewTopic("t", 2, 2)])
    res = c.create_partitions(
        [NewPartitions("t", 2), NewPartitions("t2", 5), NewPartitions("t", 1)], validate_only=True
    )
    assert [r.error_code for r in res.response] == [
        ErrorCode.INVALID_REQUEST,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_REQUEST,
    ]
    assert c.create_partitions([NewPartitions("t", 2)]).response[0].error_code == ErrorCode.INVALID_PARTITIONS
    assert c.create_partitions([NewPartitions("t", 1)]).response[0].error_code == ErrorCode.INVALID_PARTITIONS
    bad = c.create_partitions([NewPartitions("t", 4, [[1, 2]])]).response[0]
    assert bad.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    res = c.create_partitions([NewPartitions("t", 5)])
    assert res.response[0].error_code == 0 and len(res.records) == 3
    parts = c.image.partitions("t")
    assert sorted(parts) == [0, 1, 2, 3, 4] and all(len(p.replicas) == 2 for p in parts.values())
    res = c.create_partitions([NewPartitions("t", 6, [[3, 1]])])
    assert res.response[0].error_code == 0 and c.image.partition("t", 5).replicas == (3, 1)  # type: ignore[union-attr]


def test_incremental_alter_configs() -> None:
    c = controller()
    c.create_topics([NewTopic("t")])
    ops = [
        AlterableConfig("retention.ms", AlterConfigOp.SET, "1000"),
        AlterableConfig("cleanup.policy", AlterConfigOp.APPEND, "compact"),
    ]
    res = c.incremental_alter_configs([IncrementalAlterConfigsResource(TOPIC, "t", ops)])
    assert res.response[0].error_code == 0
    assert c.image.topic_configs("t") == {"retention.ms": "1000", "cleanup.policy": "delete,compact"}
    ops = [
        AlterableConfig("retention.ms", AlterConfigOp.DELETE),
        AlterableConfig("cleanup.policy", AlterConfigOp.SUBTRACT, "delete"),
    ]
    c.incremental_alter_configs([IncrementalAlterConfigsResource(TOPIC, "t", ops)])
    assert c.image.topic_configs("t") == {"cleanup.policy": "compact"}

    def code(resource: IncrementalAlterConfigsResource) -> int:
        return c.incremental_alter_configs([resource]).response[0].error_code

    assert code(IncrementalAlterConfigsResource(TOPIC, "nope", [])) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    bad_key = [AlterableConfig("bogus", AlterConfigOp.SET, "1")]
    assert code(IncrementalAlterConfigsResource(TOPIC, "t", bad_key)) == ErrorCode.INVALID_CONFIG
    not_list = [AlterableConfig("retention.ms", AlterConfigOp.APPEND, "1")]
    assert code(IncrementalAlterConfigsResource(TOPIC, "t", not_list)) == ErrorCode.INVALID_CONFIG
    dup = [AlterableConfig("retention.ms", 0, "1"), AlterableConfig("retention.ms", 1)]
    assert code(IncrementalAlterConfigsResource(TOPIC, "t", dup)) == ErrorCode.INVALID_REQUEST
    null = [AlterableConfig("retention.ms", AlterConfigOp.SET, None)]
    assert code(IncrementalAlterConfigsResource(TOPIC, "t", null)) == ErrorCode.INVALID_REQUEST
    assert code(IncrementalAlterConfigsResource(8, "1", [])) == ErrorCode.INVALID_REQUEST
    ok = [AlterableConfig("log.retention.ms", AlterConfigOp.SET, "5")]
    assert code(IncrementalAlterConfigsResource(BROKER, "", ok)) == 0
    assert c.image.broker_configs() == {"log.retention.ms": "5"}
    assert code(IncrementalAlterConfigsResource(BROKER, "x", ok)) == ErrorCode.INVALID_REQUEST
    ro = [AlterableConfig("node.id", AlterConfigOp.SET, "5")]
    assert code(IncrementalAlterConfigsResource(BROKER, "1", ro)) == ErrorCode.INVALID_REQUEST


def test_alter_configs_replaces_the_whole_set() -> None:
    c = controller()
    c.create_topics([NewTopic("t", configs={"retention.ms": "1", "segment.ms": "100"})])
    res = c.alter_configs([AlterConfigsResource(TOPIC, "t", {"retention.ms": "2"})])
    assert res.response[0].error_code == 0
    assert c.image.topic_configs("t") == {"retention.ms": "2"}
    res = c.alter_configs([AlterConfigsResource(TOPIC, "t", {"segment.bytes": "1"})], validate_only=True)
    assert res.response[0].error_code == ErrorCode.INVALID_CONFIG and res.records == ()


def test_producer_id_blocks() -> None:
    c = controller(brokers=1)
    a = c.allocate_producer_ids(1).response
    b = c.allocate_producer_ids(1, count=10).response
    assert (a.first_producer_id, a.count, b.first_producer_id, b.count) == (0, 1000, 1000, 10)
    assert c.image.next_producer_id == 1010
    assert c.allocate_producer_ids(1, broker_epoch=42).response.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert c.allocate_producer_ids(1, broker_epoch=1).response.error_code == 0


def test_inactive_controller_answers_not_controller() -> None:
    c = controller()
    c.deactivate()
    res = c.create_topics([NewTopic("a"), NewTopic("b")])
    assert res.records == () and {r.error_code for r in res.response} == {ErrorCode.NOT_CONTROLLER}
    assert c.allocate_producer_ids(1).response.error_code == ErrorCode.NOT_CONTROLLER
    c.activate(MetadataImage())
    assert c.create_topics([NewTopic("a")]).response[0].error_code == ErrorCode.INVALID_REPLICATION_FACTOR
