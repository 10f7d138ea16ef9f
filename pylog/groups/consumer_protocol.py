"""The embedded "consumer" protocol of classic groups: ConsumerProtocolSubscription (JoinGroup
metadata) and ConsumerProtocolAssignment (SyncGroup assignment), versions 0-3, Kafka's layout.

A converted group (classic <-> consumer) reads the members' subscriptions and assignments out of
these bytes and writes assignments back for classic members of a consumer group.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pylog.groups.records import Reader, Writer

TopicPartitions = dict[str, frozenset[int]]


class MalformedConsumerProtocol(ValueError):
    """The bytes are not a ConsumerProtocolSubscription / ConsumerProtocolAssignment."""


@dataclass(frozen=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned: TopicPartitions | None  # v1+; None before
    rack_id: str | None = None


def decode_subscription(data: bytes) -> Subscription:
    try:
        r = Reader(data)
        version = r.i16()
        if version < 0:
            raise MalformedConsumerProtocol(f"subscription version {version}")
        topics = tuple(r.string() or "" for _ in range(_count(r, data)))
        r.bytes_()  # user data (null reads as empty)
        owned: TopicPartitions | None = None
        rack = None
        if version >= 1:
            owned = _read_partitions(r, data)
        if version >= 2:
            r.i32()  # generation id
        if version >= 3:
            rack = r.string()
        return Subscription(version, topics, owned, rack)
    except MalformedConsumerProtocol:
        raise
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise MalformedConsumerProtocol(str(exc)) from exc


def decode_assignment(data: bytes) -> TopicPartitions:
    """The partitions of a ConsumerProtocolAssignment (empty bytes: nothing assigned)."""
    if not data:
        return {}
    try:
        r = Reader(data)
        if r.i16() < 0:
            raise MalformedConsumerProtocol("assignment version")
        return _read_partitions(r, data)
    except MalformedConsumerProtocol:
        raise
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise MalformedConsumerProtocol(str(exc)) from exc


def encode_assignment(partitions: TopicPartitions, version: int = 0) -> bytes:
    """A ConsumerProtocolAssignment of `version` (0-3 share one layout), no user data."""
    w = Writer()
    w.i16(max(0, min(version, 3)))
    items = sorted((t, ps) for t, ps in partitions.items() if ps)
    w.i32(len(items))
    for topic, ps in items:
        w.string(topic)
        w.i32(len(ps))
        for p in sorted(ps):
            w.i32(p)
    w.i32(-1)  # null user data
    return w.getvalue()


def subscription_version(data: bytes) -> int:
    try:
        return max(0, struct.unpack_from(">h", data)[0])
    except struct.error:
        return 0


def _count(r: Reader, data: bytes) -> int:
    n = r.i32()
    if n < 0 or n > len(data):
        raise MalformedConsumerProtocol(f"array length {n}")
    return n


def _read_partitions(r: Reader, data: bytes) -> TopicPartitions:
    out: dict[str, frozenset[int]] = {}
    for _ in range(_count(r, data)):
        topic = r.string() or ""
        out[topic] = frozenset(r.i32() for _ in range(_count(r, data)))
    return out
