"""Keys and values of the compacted `__consumer_offsets` topic, and which partition holds a group.

The encoding is Apache Kafka's own binary format (the OffsetCommitKey/Value and
GroupMetadataKey/Value schemas of the group coordinator), not JSON: Kafka's tooling
(`kafka-console-consumer --formatter ...OffsetsMessageFormatter`, log dumps) reads pylog's
offsets topic unchanged, the format is versioned and compact, and compaction only needs the key
bytes to be deterministic, which they are.

Writers emit OffsetCommitValue v3 (v1 when the commit carries an explicit expire timestamp, as
Kafka does) and GroupMetadataValue v3; readers accept versions 0-3. Key version 0/1 is an offset
commit, 2 group metadata; higher key versions (Kafka's KIP-848 consumer-group records) are
skipped by the loader.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def java_string_hash(s: str) -> int:
    """`String.hashCode()` of the JVM: 31-polynomial over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % offsets.topic.num.partitions` (abs(MIN_VALUE) is 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None
    # log offset of the `__consumer_offsets` record carrying it (-1 until known); not encoded
    record_offset: int = field(default=-1, compare=False)


@dataclass(frozen=True)
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadataValue, ...] = ()


# ---------------------------------------------------------------------------- primitive codec


class Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def i16(self, v: int) -> None:
        self.parts.append(_I16.pack(v))

    def i32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def i64(self, v: int) -> None:
        self.parts.append(_I64.pack(v))

    def string(self, v: str | None) -> None:
        if v is None:
            self.i16(-1)
            return
        b = v.encode()
        self.i16(len(b))
        self.parts.append(b)

    def bytes_(self, v: bytes) -> None:
        self.i32(len(v))
        self.parts.append(bytes(v))

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated __consumer_offsets record")
        v = self.data[self.pos : self.pos + n]
        self.pos += n
        return v

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else bytes(self._take(n)).decode()

    def bytes_(self) -> bytes:
        n = self.i32()
        return b"" if n < 0 else bytes(self._take(n))


# ---------------------------------------------------------------------------- keys


def offset_commit_key(group_id: str, topic: str, partition: int) -> bytes:
    w = Writer()
    w.i16(OFFSET_COMMIT_KEY_VERSION)
    w.string(group_id)
    w.string(topic)
    w.i32(partition)
    return w.getvalue()


def group_metadata_key(group_id: str) -> bytes:
    w = Writer()
    w.i16(GROUP_METADATA_KEY_VERSION)
    w.string(group_id)
    return w.getvalue()


@dataclass(frozen=True)
class OffsetKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group_id: str


def decode_key(data: bytes) -> OffsetKey | GroupKey | None:
    """None for key versions this coordinator does not own (skipped on load)."""
    r = Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string() or "", r.string() or "", r.i32())
    if version == 2:
        return GroupKey(r.string() or "")
    return None


# ---------------------------------------------------------------------------- values


def encode_offset_value(v: OffsetAndMetadata) -> bytes:
    w = Writer()
    if v.expire_timestamp is not None:
        w.i16(1)
        w.i64(v.offset)
        w.string(v.metadata)
        w.i64(v.commit_timestamp)
        w.i64(v.expire_timestamp)
    else:
        w.i16(3)
        w.i64(v.offset)
        w.i32(v.leader_epoch)
        w.string(v.metadata)
        w.i64(v.commit_timestamp)
    return w.getvalue()


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    r = Reader(data)
    version = r.i16()
    if version in (0, 2):
        return OffsetAndMetadata(r.i64(), -1, r.string() or "", r.i64())
    if version == 1:
        offset, metadata, commit_ts, expire_ts = r.i64(), r.string() or "", r.i64(), r.i64()
        return OffsetAndMetadata(offset, -1, metadata, commit_ts, expire_ts)
    if version == 3:
        return OffsetAndMetadata(r.i64(), r.i32(), r.string() or "", r.i64())
    raise ValueError(f"unsupported OffsetCommitValue version {version}")


def encode_group_value(v: GroupMetadataValue) -> bytes:
    w = Writer()
    w.i16(3)
    w.string(v.protocol_type)
    w.i32(v.generation)
    w.string(v.protocol)
    w.string(v.leader)
    w.i64(v.current_state_timestamp)
    w.i32(len(v.members))
    for m in v.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.i32(m.rebalance_timeout_ms)
        w.i32(m.session_timeout_ms)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return w.getvalue()


def decode_group_value(data: bytes) -> GroupMetadataValue:
    r = Reader(data)
    version = r.i16()
    if not 0 <= version <= 3:
        raise ValueError(f"unsupported GroupMetadataValue version {version}")
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.string() or ""
        instance_id = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        members.append(
            MemberMetadataValue(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                r.bytes_(),
                r.bytes_(),
            )
        )
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


def consumer_subscription_topics(metadata: bytes) -> frozenset[str] | None:
    """Topics of a ConsumerProtocolSubscription (any version: topics come right after the version).

    None when the bytes are not a consumer subscription, so callers fall back to "unknown".
    """
    try:
        r = Reader(metadata)
        if r.i16() < 0:
            return None
        n = r.i32()
        if n < 0 or n > len(metadata):
            return None
        return frozenset(r.string() or "" for _ in range(n))
    except (ValueError, UnicodeDecodeError, struct.error):
        return None
