"""Metadata records round-trip through their JSON form; the image applies them."""

from __future__ import annotations

import uuid

import pytest

from pylog.cluster.image import MetadataApplyError, MetadataImage
from pylog.cluster.records import (
    NO_LEADER,
    BrokerEndpoint,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RecordDecodeError,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    decode_records,
    encode_records,
)

TID = uuid.UUID("6b3c1f0e-6a52-4d59-9d41-2f1b0c9a7e11")
INC = uuid.UUID("0f0e0d0c-0b0a-4908-8706-050403020100")

ALL = [
    RegisterBrokerRecord(
        1, INC, 7, (BrokerEndpoint("PLAINTEXT", "localhost", 9092),), rack="r1", fenced=False
    ),
    UnregisterBrokerRecord(1, 7),
    TopicRecord("orders", TID),
    PartitionRecord(TID, 0, (1, 2, 3), (1, 2), 1, 0, 0),
    PartitionChangeRecord(TID, 0, isr=(1,), leader=2),
    PartitionChangeRecord(TID, 0),
    RemoveTopicRecord(TID),
    ConfigRecord(ConfigResourceType.TOPIC, "orders", "retention.ms", "1000"),
    ConfigRecord(ConfigResourceType.BROKER, "", "log.retention.ms", None),
    ProducerIdsRecord(1, 7, 1000),
    FeatureLevelRecord("metadata.version", 1),
]


def test_every_record_type_round_trips() -> None:
    data = encode_records(ALL)
    assert b'"type":"TopicRecord"' in data
    assert decode_records(data) == ALL


@pytest.mark.parametrize("bad", [b"", b"{", b"{}", b"[1]", b'[{"type":"Nope"}]', b'[{"type":"TopicRecord"}]'])
def test_bad_payloads_raise_decode_error(bad: bytes) -> None:
    with pytest.raises(RecordDecodeError):
        decode_records(bad)


def test_unknown_fields_are_ignored_and_missing_ones_default() -> None:
    data = (
        b'[{"type":"PartitionChangeRecord","topic_id":"%s","partition_id":3,"future":1}]' % str(TID).encode()
    )
    (r,) = decode_records(data)
    assert r == PartitionChangeRecord(TID, 3)


def build() -> MetadataImage:
    img = MetadataImage()
    img.apply_batch(
        [
            RegisterBrokerRecord(1, INC, 1, fenced=False),
            RegisterBrokerRecord(2, INC, 2, fenced=True),
            TopicRecord("orders", TID),
            ConfigRecord(ConfigResourceType.TOPIC, "orders", "cleanup.policy", "compact"),
            PartitionRecord(TID, 0, (1, 2), (1, 2), 1),
            PartitionRecord(TID, 1, (2, 1), (2, 1), 2),
        ],
        offset=5,
    )
    return img


def test_image_queries() -> None:
    img = build()
    assert img.offset == 5
    assert img.topic("orders") == img.topic(TID)
    assert set(img.partitions("orders")) == {0, 1}
    assert img.partition(TID, 1).leader == 2  # type: ignore[union-attr]
    assert img.topic_configs("orders") == {"cleanup.policy": "compact"}
    assert img.live_brokers() == [1]
    assert img.last_broker_epoch == 2
    assert img.partitions("nope") == {}
    with pytest.raises(TypeError):
        img.topics["x"] = None  # type: ignore[index]


def test_partition_change_bumps_epochs() -> None:
    img = build()
    img.apply(PartitionChangeRecord(TID, 0, isr=(1,)))
    p = img.partition("orders", 0)
    assert p is not None and (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1,), 1, 0, 1)
    img.apply(PartitionChangeRecord(TID, 0, leader=NO_LEADER))
    p = img.partition("orders", 0)
    assert p is not None and (p.leader, p.leader_epoch, p.partition_epoch) == (NO_LEADER, 1, 2)


def test_remove_topic_drops_partitions_and_configs_and_copy_is_independent() -> None:
    img = build()
    snap = img.copy()
    assert snap == img
    img.apply(RemoveTopicRecord(TID))
    assert img.topic("orders") is None and img.topic_configs("orders") == {}
    assert snap.topic("orders") is not None and len(snap.partitions(TID)) == 2
    assert snap != img


def test_config_delete_and_producer_ids_and_features() -> None:
    img = build()
    img.apply(ConfigRecord(ConfigResourceType.TOPIC, "orders", "cleanup.policy", None))
    assert img.topic_configs("orders") == {}
    img.apply(ConfigRecord(ConfigResourceType.BROKER, "", "log.retention.ms", "5"))
    assert img.broker_configs() == {"log.retention.ms": "5"}
    img.apply(ProducerIdsRecord(1, 1, 1000))
    assert img.next_producer_id == 1000
    with pytest.raises(MetadataApplyError):
        img.apply(ProducerIdsRecord(1, 1, 1000))
    img.apply(FeatureLevelRecord("metadata.version", 3))
    assert img.features == {"metadata.version": 3}
    img.apply(UnregisterBrokerRecord(1, 99))  # stale epoch: ignored
    assert 1 in img.brokers
    img.apply(UnregisterBrokerRecord(1, 1))
    assert 1 not in img.brokers


def test_inconsistent_records_raise() -> None:
    img = build()
    with pytest.raises(MetadataApplyError):
        img.apply(TopicRecord("orders", uuid.uuid4()))
    with pytest.raises(MetadataApplyError):
        img.apply(PartitionRecord(uuid.uuid4(), 0, (1,), (1,), 1))
    with pytest.raises(MetadataApplyError):
        img.apply(PartitionChangeRecord(TID, 9))
    with pytest.raises(MetadataApplyError):
        img.apply(RemoveTopicRecord(uuid.uuid4()))
