"""DescribeTopicPartitions (75) answered as Kafka's brokers answer it: the ELR lists of every
partition (KIP-966) are empty arrays, never null. Kafka's Java Admin client (kafka-topics
--describe, Streams) reads them without a null check and fails on a null one.

Checked three ways: kafka-python's admin ``describe_topic_partitions`` (its DescribeTopicPartitions
call), the response as kafka-python's codec decodes it, and the bytes on the wire.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import kp_wire
from compat_broker import BrokerProcess
from compat_clients import create_topic
from compat_raw import RawConn, Reader, frame, header
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin.topics import DescribeTopicPartitionsRequest

DESCRIBE_TOPIC_PARTITIONS = 75


def test_kafka_python_admin_describes_topic_partitions(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=3)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    try:
        out = admin.describe_topic_partitions([topic_name])
    finally:
        admin.close()
    [topic] = out["topics"]
    assert (topic["error_code"], topic["name"], topic["is_internal"]) == (0, topic_name, False)
    assert [p["partition_index"] for p in topic["partitions"]] == [0, 1, 2]
    for p in topic["partitions"]:
        assert (p["error_code"], p["leader_id"], p["replica_nodes"], p["isr_nodes"]) == (0, 1, [1], [1])
        assert p["offline_replicas"] == []
    assert out["next_cursor"] is None


def test_elr_lists_decode_as_empty_lists(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    R = DescribeTopicPartitionsRequest
    resp: Any = kp_wire.call(broker.bootstrap, R, 0, topics=[R.TopicRequest(name=topic_name)],
                             response_partition_limit=2000, cursor=None)
    [topic] = resp.topics
    assert [p.partition_index for p in topic.partitions] == [0, 1]
    assert [(p.eligible_leader_replicas, p.last_known_elr) for p in topic.partitions] == [([], [])] * 2
    assert resp.next_cursor is None  # the last page: Kafka sends no cursor either


def _uvarint(r: Reader) -> int:
    shift = value = 0
    while True:
        b = r.take("B")[0]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value
        shift += 7


def _compact_int32_array(r: Reader) -> list[int] | None:
    """A compact array of int32 (length + 1 as a varint; 0 is null)."""
    n = _uvarint(r) - 1
    return None if n < 0 else list(r.take(f"{n}i"))


def _compact_string(r: Reader) -> str | None:
    n = _uvarint(r) - 1
    if n < 0:
        return None
    s = r.data[r.pos : r.pos + n].decode()
    r.pos += n
    return s


def _skip_tags(r: Reader) -> None:
    for _ in range(_uvarint(r)):
        _uvarint(r)
        r.pos += _uvarint(r)


def _describe_raw(broker: BrokerProcess, topic: str) -> list[tuple[int, list[int] | None, list[int] | None]]:
    """DescribeTopicPartitions v0 spelled out by hand: (partition, ELR, last known ELR) as sent."""
    name = topic.encode()
    body = (
        b"\x02" + bytes([len(name) + 1]) + name + b"\x00"  # topics: one, its tagged fields
        + struct.pack(">i", 2000)  # response_partition_limit
        + b"\xff"  # cursor: null
        + b"\x00"  # tagged fields
    )
    with RawConn(broker.host, broker.port) as conn:
        conn.send(frame(header(DESCRIBE_TOPIC_PARTITIONS, 0, 7) + b"\x00" + body))  # request header v2
        r = Reader(conn.recv_frame())
    assert r.i32() == 7
    _skip_tags(r)  # response header v1
    r.i32()  # throttle_time_ms
    out = []
    [topics] = [_uvarint(r) - 1]
    assert topics == 1
    assert (r.i16(), _compact_string(r)) == (0, topic)
    assert uuid.UUID(bytes=bytes(r.take("16B"))) != uuid.UUID(int=0)
    r.i8()  # is_internal
    for _ in range(_uvarint(r) - 1):
        error_code, index, leader, _epoch = r.take("hiii")
        assert (error_code, leader) == (0, 1)
        assert _compact_int32_array(r) == [1] and _compact_int32_array(r) == [1]  # replicas, ISR
        elr, last_known = _compact_int32_array(r), _compact_int32_array(r)
        assert _compact_int32_array(r) == []  # offline replicas
        _skip_tags(r)
        out.append((index, elr, last_known))
    r.i32()  # topic_authorized_operations
    _skip_tags(r)
    assert r.i8() == -1  # next_cursor: null on the last page
    _skip_tags(r)
    assert r.pos == len(r.data)
    return out


def test_elr_lists_are_empty_arrays_on_the_wire(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    assert _describe_raw(broker, topic_name) == [(0, [], []), (1, [], [])]
