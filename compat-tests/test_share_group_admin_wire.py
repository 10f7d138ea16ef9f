"""The share-group admin APIs on the wire, bytes written by hand from the released protocol
(what Kafka's `kafka-share-groups` sends): DeleteShareGroupOffsets v0 names whole topics (no
partitions) and is answered per topic, so a real tool's request is read, not dropped as malformed.
A malformed request of a known API closes that connection only; the broker keeps serving others.

Neither confluent-kafka nor kafka-python exposes the share-group offset admin calls, so the
requests are built here, byte by byte, independently of pylog's codec."""

from __future__ import annotations

import struct
import time

from compat_broker import BrokerProcess
from compat_raw import RawConn, Reader, api_versions, frame
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

DELETE_SHARE_GROUP_OFFSETS = 92
GROUP_ID_NOT_FOUND = 69
UNKNOWN_TOPIC_OR_PARTITION = 3
DEADLINE_S = 30.0


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def cstr(s: str) -> bytes:
    """COMPACT_STRING."""
    data = s.encode()
    return uvarint(len(data) + 1) + data


def flexible_header(api_key: int, version: int, correlation_id: int) -> bytes:
    """Request header v2: client id as a (non-compact) nullable string, then no tagged fields."""
    return struct.pack(">hhih", api_key, version, correlation_id, 3) + b"raw" + b"\x00"


def read_uvarint(r: Reader) -> int:
    shift = value = 0
    while True:
        (b,) = r.take("B")
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value
        shift += 7


def read_cstr(r: Reader) -> str | None:
    n = read_uvarint(r) - 1
    if n < 0:
        return None
    s = r.data[r.pos : r.pos + n].decode()
    r.pos += n
    return s


def skip_tags(r: Reader) -> None:
    for _ in range(read_uvarint(r)):
        read_uvarint(r)
        r.pos += read_uvarint(r)


def delete_share_group_offsets(
    conn: RawConn, group: str, topics: list[str]
) -> tuple[int, list[tuple[str, int]]]:
    """DeleteShareGroupOffsets v0 as released: (top-level error, [(topic, error)])."""
    body = cstr(group) + uvarint(len(topics) + 1)
    for t in topics:
        body += cstr(t) + b"\x00"  # TopicName, no tagged fields: no per-topic partitions
    body += b"\x00"
    conn.send(frame(flexible_header(DELETE_SHARE_GROUP_OFFSETS, 0, 7) + body))
    r = Reader(conn.recv_frame())
    assert r.i32() == 7
    skip_tags(r)  # response header v1
    r.i32()  # throttle
    error = r.i16()
    read_cstr(r)
    out = []
    for _ in range(read_uvarint(r) - 1):
        name = read_cstr(r)
        r.pos += 16  # topic id
        out.append((name or "", r.i16()))
        read_cstr(r)
        skip_tags(r)
    skip_tags(r)
    return error, out


def consume_all(bootstrap: str, group: str, topic: str, want: int) -> list[int]:
    """An implicit-mode share consumer takes `want` records (accepting them), then leaves."""
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.subscribe([topic])
    got: list[int] = []
    end = time.monotonic() + DEADLINE_S
    try:
        while len(got) < want and time.monotonic() < end:
            got += [int(m.value()) for m in c.poll(0.5) if m.error() is None]
        c.commit_sync()
    finally:
        c.close()
    return sorted(got)


def test_delete_share_group_offsets_as_released(broker: BrokerProcess, topic_name: str) -> None:
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(30)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(6):
        p.produce(topic_name, value=str(i).encode(), partition=i % 2)
    assert p.flush(30) == 0
    group = f"sg-{topic_name}"
    for f in admin.incremental_alter_configs([_earliest(group)]).values():
        f.result(30)
    assert consume_all(bootstrap, group, topic_name, 6) == list(range(6))
    with RawConn("127.0.0.1", broker.port) as conn:
        assert delete_share_group_offsets(conn, "no-such-group", [topic_name])[0] == GROUP_ID_NOT_FOUND
        error, topics = delete_share_group_offsets(conn, group, [topic_name, f"{topic_name}-none"])
    assert error == 0
    assert topics == [(topic_name, 0), (f"{topic_name}-none", UNKNOWN_TOPIC_OR_PARTITION)]
    # the group's state of both partitions is gone: it starts over at share.auto.offset.reset
    assert consume_all(bootstrap, group, topic_name, 6) == list(range(6))


def test_malformed_share_admin_request_closes_only_its_connection(
    broker: BrokerProcess, topic_name: str
) -> None:
    """DeleteShareGroupOffsets whose topic array claims 50 entries but holds one: the connection is
    answered with an error or closed; a connection opened before and a new one are served."""
    with RawConn("127.0.0.1", broker.port) as before:
        assert api_versions(before).error_code == 0
        with RawConn("127.0.0.1", broker.port) as bad:
            body = cstr("g") + uvarint(51) + cstr("t") + b"\x00"
            bad.send(frame(flexible_header(DELETE_SHARE_GROUP_OFFSETS, 0, 9) + body))
            kind, payload = bad.outcome()
            if kind == "frame":
                assert payload is not None and Reader(payload).i32() == 9
        assert api_versions(before).error_code == 0
    with RawConn("127.0.0.1", broker.port) as fresh:
        assert api_versions(fresh).error_code == 0
        assert delete_share_group_offsets(fresh, "no-such-group", [topic_name])[0] == GROUP_ID_NOT_FOUND
    assert broker.alive()


def _earliest(group: str) -> ConfigResource:
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    return ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
