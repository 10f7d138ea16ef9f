"""`__consumer_offsets` encoding, partitioning and state replay."""

from __future__ import annotations

import random
import struct

from group_support import GROUP, Shell, coordinator, load_all, subscription
from pylog.protocol.errors import ErrorCode as E

from pylog.groups import GroupConfig, GroupCoordinator, GroupState, OffsetCommitPartition
from pylog.groups.records import (
    GroupKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetAndMetadata,
    OffsetKey,
    consumer_subscription_topics,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_offset_value,
    group_metadata_key,
    java_string_hash,
    offset_commit_key,
    partition_for,
)


def test_java_string_hash_and_partition():
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0
    assert java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00  # UTF-16 surrogate pair
    for gid in ("console-consumer-1", "my-group", "ü"):
        h = java_string_hash(gid)
        assert partition_for(gid, 50) == abs(h) % 50


def test_keys_round_trip():
    assert decode_key(offset_commit_key("g", "t", 3)) == OffsetKey("g", "t", 3)
    assert decode_key(group_metadata_key("g")) == GroupKey("g")
    assert offset_commit_key("g", "t", 3) == b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x03"
    assert decode_key(struct.pack(">h", 3) + b"whatever") is None


def test_values_round_trip():
    v3 = OffsetAndMetadata(42, 7, "meta", 1000)
    assert encode_offset_value(v3)[:2] == b"\x00\x03"
    assert decode_offset_value(encode_offset_value(v3)) == v3
    v1 = OffsetAndMetadata(42, -1, "", 1000, 5000)
    assert encode_offset_value(v1)[:2] == b"\x00\x01"
    assert decode_offset_value(encode_offset_value(v1)) == v1
    v0 = struct.pack(">hqh", 0, 9, 1) + b"x" + struct.pack(">q", 5)
    assert decode_offset_value(v0) == OffsetAndMetadata(9, -1, "x", 5)
    g = GroupMetadataValue(
        "consumer",
        4,
        "range",
        "m1",
        123,
        (
            MemberMetadataValue("m1", "i1", "c", "/h", 300, 10, b"sub", b"asg"),
            MemberMetadataValue("m2", None, "c", "/h", 300, 10, b"", b""),
        ),
    )
    assert decode_group_value(encode_group_value(g)) == g
    empty = GroupMetadataValue("", 0, None, None, -1)
    assert decode_group_value(encode_group_value(empty)) == empty


def test_group_value_v0_decodes_with_defaults():
    def s(x: str) -> bytes:
        return struct.pack(">h", len(x)) + x.encode()

    body = (
        struct.pack(">h", 0)
        + s("consumer")
        + struct.pack(">i", 2)
        + s("range")
        + s("m")
        + struct.pack(">i", 1)
        + s("m")
        + s("c")
        + s("/h")
        + struct.pack(">i", 10000)
        + struct.pack(">i", 1)
        + b"s"
        + struct.pack(">i", 1)
        + b"a"
    )
    v = decode_group_value(body)
    assert v.current_state_timestamp == -1
    assert v.members[0] == MemberMetadataValue("m", None, "c", "/h", 10000, 10000, b"s", b"a")


def test_consumer_subscription_topics():
    assert consumer_subscription_topics(subscription("a", "b")) == {"a", "b"}
    assert consumer_subscription_topics(b"\x00") is None
    assert consumer_subscription_topics(b"") is None


def _scenario() -> Shell:
    s = Shell(coordinator(offsets_topic_num_partitions=3))
    a, ha = s.join_new(protocols=(("range", subscription("t")),))
    hs = s.join("", instance="st", protocols=(("range", subscription("t")),))
    gen, _, _ = s.stabilize([ha, hs])
    s.absorb(
        s.c.commit_offsets(
            GROUP, gen, a, None, [OffsetCommitPartition("t", 0, 10, 2, "m")], api_version=8, now_ms=s.now
        )
    )
    for gid in ("standalone", "doomed"):
        s.absorb(
            s.c.commit_offsets(
                gid, -1, "", None, [OffsetCommitPartition("t", 1, 5)], api_version=8, now_ms=s.now
            )
        )
    s.absorb(
        s.c.commit_offsets(
            "standalone", -1, "", None, [OffsetCommitPartition("t", 1, 6)], api_version=8, now_ms=s.now
        )
    )
    s.absorb(s.c.delete_groups(["doomed"], now_ms=s.now))
    s.absorb(s.c.delete_offsets("standalone", [("nope", 0)], now_ms=s.now))
    return s


def test_replay_rebuilds_groups_and_offsets():
    s = _scenario()
    c2 = load_all(GroupCoordinator(s.c.config, rng=random.Random(99)), s.records, now_ms=s.now)
    assert sorted(c2.group_ids()) == sorted(s.c.group_ids()) == sorted([GROUP, "standalone"])
    for gid in c2.group_ids():
        g1, g2 = s.c.group(gid), c2.group(gid)
        assert c2.offsets_of(gid) == s.c.offsets_of(gid)
        assert (g2.state, g2.generation_id, g2.protocol_type, g2.protocol_name, g2.leader_id) == (
            g1.state,
            g1.generation_id,
            g1.protocol_type,
            g1.protocol_name,
            g1.leader_id,
        )
        assert {m: x.assignment for m, x in g2.members.items()} == {
            m: x.assignment for m, x in g1.members.items()
        }
        assert g2.static_members == g1.static_members
        assert g2.subscribed_topics == g1.subscribed_topics
    assert c2.fetch_offsets(GROUP).partitions[0].leader_epoch == 2


def test_loaded_members_continue_or_expire():
    s = _scenario()
    g = s.c.group(GROUP)
    gen = g.generation_id
    members = list(g.members)
    s2 = Shell(GroupCoordinator(s.c.config, rng=random.Random(5)), now=s.now + 1000)
    load_all(s2.c, s.records, now_ms=s2.now)
    assert s2.c.group(GROUP).state is GroupState.STABLE
    s2.now += 5000
    assert s2.heartbeat(members[0], gen) == E.NONE
    s2.now += 5000  # the second member's 10 s session since load has run out
    s2.absorb(s2.c.tick(s2.now))
    assert members[1] not in s2.c.group(GROUP).members
    assert s2.heartbeat(members[0], gen) == E.REBALANCE_IN_PROGRESS


def test_load_partition_replaces_only_that_partition():
    s = _scenario()
    p = s.c.partition_for(GROUP)
    own = [r for r in s.records if s.c.partition_for(decode_key(r[0]).group_id) == p]
    c2 = GroupCoordinator(s.c.config, rng=random.Random(3))
    assert c2.fetch_offsets(GROUP).error == E.NOT_COORDINATOR
    c2.load_partition(p, own, now_ms=s.now)
    assert c2.fetch_offsets(GROUP).partitions[0].offset == 10
    c2.load_partition(p, [], now_ms=s.now)
    assert c2.group(GROUP) is None


def test_config_from_kafka_properties():
    from pylog.groups import GroupConfig

    cfg = GroupConfig.from_kafka(
        {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1", "log.dirs": "/x"}
    )
    assert cfg.group_initial_rebalance_delay_ms == 0 and cfg.offsets_topic_num_partitions == 1
    assert cfg.offsets_retention_ms == 7 * 86_400_000


def test_loaded_coordinator_schedules_the_retention_check():
    c = load_all(GroupCoordinator(GroupConfig(), rng=random.Random(1)), [], now_ms=1000)
    assert c.next_deadline_ms() == 1000 + c.config.offsets_retention_check_interval_ms
