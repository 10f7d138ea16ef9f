"""Feature versions (KIP-584 / KIP-1022) through kafka-python's admin: ``describe_features`` reads
ApiVersions' supported and finalized levels, ``update_features`` changes them under Kafka's rules,
and the levels gate what confluent-kafka's KIP-848 consumer and KIP-932 share consumer may do."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from compat_broker import BrokerProcess
from compat_clients import Rec, create_topic, produce
from confluent_kafka import Consumer, KafkaError, KafkaException, ShareConsumer
from kafka.admin import KafkaAdminClient, UpdateFeatureType
from kafka.errors import InvalidUpdateVersionError

SAFE = UpdateFeatureType.SAFE_DOWNGRADE
UNSAFE = UpdateFeatureType.UNSAFE_DOWNGRADE
UNSUPPORTED_VERSION = 35


@pytest.fixture
def admin(own_broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=own_broker.bootstrap, request_timeout_ms=20000)
    yield a
    a.close()


def finalized(admin: KafkaAdminClient) -> dict[str, int]:
    return {n: f["finalized"][1] for n, f in admin.describe_features().items() if "finalized" in f}


def test_describe_features_sees_supported_and_finalized_levels(admin: KafkaAdminClient) -> None:
    features = admin.describe_features()
    supported = {n: f["supported"] for n, f in features.items()}
    assert supported == {
        "metadata.version": (7, 29),  # 3.3-IV3 .. 4.2-IV1
        "group.version": (0, 1),
        "share.version": (0, 1),
        "transaction.version": (0, 0),
        "kraft.version": (0, 1),
        "streams.version": (0, 1),
        "eligible.leader.replicas.version": (0, 0),
    }
    assert finalized(admin) == {
        "metadata.version": 29,
        "group.version": 1,
        "share.version": 1,
        "streams.version": 1,
    }
    assert all(f.get("finalized_epoch", 1) > 0 for f in features.values())


def refused(admin: KafkaAdminClient, updates: dict, reason: str) -> None:
    with pytest.raises(InvalidUpdateVersionError) as err:
        admin.update_features(updates)
    assert reason in str(err.value)


def test_update_features_follows_kafkas_rules(admin: KafkaAdminClient) -> None:
    refused(admin, {"transaction.version": 2}, "does not support this feature")
    refused(admin, {"share.version": 2}, "only supports versions [0, 1]")
    refused(admin, {"group.version": 0}, "without setting the upgrade type")  # a downgrade as UPGRADE
    refused(admin, {"metadata.version": (SAFE, 22)}, "might delete metadata information")
    refused(admin, {"metadata.version": (UNSAFE, 22)}, "Unsafe metadata downgrade is not supported")
    refused(admin, {"metadata.version": (SAFE, 26)}, "share.version could not be set to 1")
    refused(admin, {"metadata.version": (SAFE, 6)}, "only supports versions [7, 29]")
    refused(admin, {"kraft.version": 1}, "cannot be changed while running")  # set at format time
    # all or nothing: one bad update fails the good one beside it
    refused(admin, {"group.version": (SAFE, 0), "share.version": 5}, "share.version")
    assert finalized(admin)["group.version"] == 1
    # validate_only changes nothing
    assert admin.update_features({"group.version": (SAFE, 0)}, validate_only=True) == {"group.version": "OK"}
    assert finalized(admin)["group.version"] == 1
    # a downgrade within 4.0-IV1 .. 4.2-IV1 changes no metadata format, and back up
    assert admin.update_features({"metadata.version": (SAFE, 27)}) == {"metadata.version": "OK"}
    assert finalized(admin)["metadata.version"] == 27
    assert admin.update_features({"metadata.version": 29}) == {"metadata.version": "OK"}
    assert finalized(admin)["metadata.version"] == 29


def test_group_version_gates_the_consumer_group_protocol(
    own_broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str
) -> None:
    create_topic(own_broker.bootstrap, topic_name, partitions=1)
    produce("confluent-kafka", own_broker.bootstrap, topic_name, [Rec(b"hello")])
    assert admin.update_features({"group.version": (SAFE, 0)}) == {"group.version": "OK"}
    assert "group.version" not in finalized(admin)  # level 0 is no level
    assert _kip848_first_message(own_broker.bootstrap, topic_name, "g-off") == "unsupported"
    assert admin.update_features({"group.version": 1}) == {"group.version": "OK"}
    assert _kip848_first_message(own_broker.bootstrap, topic_name, "g-on") == "hello"


def _kip848_first_message(bootstrap: str, topic: str, group: str) -> str:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._FATAL, m.error()
                assert "API version not supported" in m.error().str()
                return "unsupported"
            return bytes(m.value()).decode()
        raise AssertionError("neither a record nor an error within 30 s")
    finally:
        c.close()


def test_share_version_gates_share_groups(
    own_broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str
) -> None:
    create_topic(own_broker.bootstrap, topic_name, partitions=1)
    assert admin.update_features({"share.version": (SAFE, 0)}) == {"share.version": "OK"}
    c = ShareConsumer({"bootstrap.servers": own_broker.bootstrap, "group.id": "sg-off"})
    c.subscribe([topic_name])
    try:
        with pytest.raises(KafkaException) as err:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                c.poll(0.5)
        assert err.value.args[0].code() == UNSUPPORTED_VERSION
    finally:
        c.close()
    assert admin.update_features({"share.version": 1}) == {"share.version": "OK"}
    c = ShareConsumer({"bootstrap.servers": own_broker.bootstrap, "group.id": "sg-on"})
    c.subscribe([topic_name])
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            produce("confluent-kafka", own_broker.bootstrap, topic_name, [Rec(b"shared")])
            got = [bytes(m.value()) for m in c.poll(1.0) if m.error() is None]
        assert got and set(got) == {b"shared"}
    finally:
        c.close()
