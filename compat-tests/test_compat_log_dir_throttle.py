"""Kafka 4.3 broker configs through kafka-python's admin client, and the one
``kafka-reassign-partitions`` sets on every broker of a move and removes again with ``--verify``:
``replica.alter.log.dirs.io.max.bytes.per.second``, which holds moves between log dirs
(AlterReplicaLogDirs) to its rate."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compat_broker import BrokerProcess, used_brokers
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.admin._configs import AlterConfigOp
from kafka.errors import NoError

pytestmark = pytest.mark.timeout(180)

IO_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


@pytest.fixture
def jbod(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    """A broker with two log directories (the first also its data directory)."""
    a, b = tmp_path / "disk-a", tmp_path / "disk-b"
    broker = BrokerProcess(a, tmp_path / "jbod.log", config={"log.dirs": f"{a},{b}"})
    used_brokers(request.node).append(broker)
    broker.start()
    yield broker
    broker.close()


@pytest.fixture
def admin(jbod: BrokerProcess) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=jbod.bootstrap, request_timeout_ms=20000)
    yield a
    a.close()


def _node(admin: KafkaAdminClient) -> str:
    return str(admin.describe_cluster()["brokers"][0]["broker_id"])


def _alter(admin: KafkaAdminClient, node: str, configs: dict[str, Any]) -> str:
    res = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, node, configs=configs)],
                              incremental=True, raise_on_unknown=False)
    return str(res["broker"][node])


def _described(admin: KafkaAdminClient, node: str, name: str) -> dict[str, Any]:
    res = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, node, configs={name: None})],
                                 config_filter="all")
    return dict(res["broker"][node][name])


def _replicas(admin: KafkaAdminClient, topic: str) -> dict[tuple[str, bool], int]:
    """{(log dir, is future): size} of partition 0 of ``topic``."""
    out = {}
    for broker in admin.describe_log_dirs():
        for result in broker["log_dirs"]:
            for t in result["topics"]:
                for p in t["partitions"] if t["name"] == topic else []:
                    out[(result["log_dir"], p["is_future_key"])] = p["partition_size"]
    return out


def test_kafka_43_broker_configs_are_set_described_and_refused_as_kafka_does(admin: KafkaAdminClient) -> None:
    node = _node(admin)
    assert _alter(admin, node, {"group.consumer.assignment.interval.ms": (AlterConfigOp.SET, "2000"),
                                "cordoned.log.dirs": (AlterConfigOp.SET, "")}) == "OK"
    entry = _described(admin, node, "group.consumer.assignment.interval.ms")
    assert entry["value"] == "2000" and entry["config_source"] == "DYNAMIC_BROKER_CONFIG"
    entry = _described(admin, node, "group.share.max.delivery.count.limit")
    assert entry["value"] == "10" and entry["config_source"] == "DEFAULT_CONFIG"
    refused = _alter(admin, node, {"group.share.max.delivery.count.limit": (AlterConfigOp.SET, "12")})
    assert "Cannot update these configs dynamically: {group.share.max.delivery.count.limit}" in refused
    refused = _alter(admin, node, {IO_RATE: (AlterConfigOp.SET, "-1")})
    assert f"Invalid value -1 for configuration {IO_RATE}: Value must be at least 0" in refused


def test_a_log_dir_move_is_held_by_the_throttle_until_it_is_removed(
    jbod: BrokerProcess, admin: KafkaAdminClient
) -> None:
    a, b = (str(Path(d).resolve()) for d in jbod.config["log.dirs"].split(","))
    node = _node(admin)
    topic = "throttled-move"
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"segment.bytes": str(256 * 1024)})])
    producer = KafkaProducer(bootstrap_servers=jbod.bootstrap, acks="all", linger_ms=5)
    for i in range(5000):  # about 2 MB: several segment files, more than one chunk to copy
        producer.send(topic, value=b"z" * 400 + b"%08d" % i, partition=0)
    producer.flush()
    producer.close()
    [(src, _)] = _replicas(admin, topic)
    dest = b if src == a else a

    # what kafka-reassign-partitions --execute --replica-alter-log-dirs-throttle 1 sets
    assert _alter(admin, node, {IO_RATE: (AlterConfigOp.SET, "1")}) == "OK"
    entry = _described(admin, node, IO_RATE)
    assert entry["value"] == "1" and entry["config_source"] == "DYNAMIC_BROKER_CONFIG"
    answer = admin.alter_replica_log_dirs({(topic, 0, int(node)): dest})
    assert list(answer.values()) == [NoError], answer
    deadline = time.monotonic() + 30
    while (dest, True) not in _replicas(admin, topic):
        assert time.monotonic() < deadline, "no future replica appeared"
        time.sleep(0.1)
    time.sleep(2)  # one byte a second: the copy stays held after its first chunk
    replicas = _replicas(admin, topic)
    assert set(replicas) == {(src, False), (dest, True)} and replicas[(dest, True)] < replicas[(src, False)]

    # what --verify does once the reassignment is done: the throttle is removed
    assert _alter(admin, node, {IO_RATE: (AlterConfigOp.DELETE, None)}) == "OK"
    assert _described(admin, node, IO_RATE)["config_source"] == "DEFAULT_CONFIG"
    deadline = time.monotonic() + 60
    while set(_replicas(admin, topic)) != {(dest, False)}:
        assert time.monotonic() < deadline, f"the move did not finish: {_replicas(admin, topic)}"
        time.sleep(0.2)
    held = [line for line in jbod.log_text().splitlines() if f"moved {topic}-0 to" in line]
    assert len(held) == 1 and f"copies held 0 ms by {IO_RATE}" not in held[0], held
