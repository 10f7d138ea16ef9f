"""Offset commit / fetch / delete / retention and the admin APIs of the group coordinator."""

from __future__ import annotations

from group_support import GROUP, Shell, coordinator, subscription
from pylog.protocol.errors import ErrorCode as E

from pylog.groups import GroupState, OffsetCommitPartition
from pylog.groups.records import OffsetKey, decode_key, decode_offset_value

DAY = 86_400_000


def commit(s: Shell, *parts, gen=-1, member="", instance=None, version=8, retention=-1, group=GROUP):
    out = s.absorb(
        s.c.commit_offsets(
            group,
            gen,
            member,
            instance,
            [p if isinstance(p, OffsetCommitPartition) else OffsetCommitPartition(*p) for p in parts],
            retention_time_ms=retention,
            api_version=version,
            now_ms=s.now,
        )
    )
    return [e.error for e in out.response]


def fetched(s: Shell, parts=None, group=GROUP):
    res = s.c.fetch_offsets(group, parts)
    assert res.error == E.NONE
    return {(p.topic, p.partition): p.offset for p in res.partitions}


def stable_group(s: Shell, topics=("t",)):
    a, ha = s.join_new(protocols=(("range", subscription(*topics)),))
    gen, _, _ = s.stabilize([ha])
    return a, gen


def test_standalone_commit_creates_group_and_is_fetchable():
    s = Shell(coordinator())
    assert commit(s, ("t", 0, 42), ("t", 1, 7, 3, "meta")) == [E.NONE, E.NONE]
    g = s.c.group(GROUP)
    assert g is not None and g.is_(GroupState.EMPTY) and g.protocol_type is None
    assert fetched(s) == {("t", 0): 42, ("t", 1): 7}
    res = s.c.fetch_offsets(GROUP, [("t", 1), ("t", 9)])
    assert [(p.offset, p.leader_epoch, p.metadata) for p in res.partitions] == [(7, 3, "meta"), (-1, -1, "")]
    keys = [decode_key(k) for k, _ in s.records]
    assert keys == [OffsetKey(GROUP, "t", 0), OffsetKey(GROUP, "t", 1)]
    assert decode_offset_value(s.records[1][1]).metadata == "meta"
    assert fetched(s, group="unknown") == {}
    assert fetched(s, [("x", 0)], group="unknown") == {("x", 0): -1}


def test_multi_group_fetch():
    s = Shell(coordinator())
    commit(s, ("t", 0, 1), group="a")
    commit(s, ("t", 0, 2), group="b")
    res = s.c.fetch_offsets_groups([("a", None), ("b", [("t", 0)]), ("c", None)])
    assert [(r.group_id, [p.offset for p in r.partitions]) for r in res] == [
        ("a", [1]),
        ("b", [2]),
        ("c", []),
    ]


def test_commit_generation_and_member_checks():
    s = Shell(coordinator())
    assert commit(s, ("t", 0, 1), gen=3, member="m") == [E.ILLEGAL_GENERATION]
    assert commit(s, ("t", 0, 1), gen=3, member="m", version=9) == [E.GROUP_ID_NOT_FOUND]
    assert s.c.group(GROUP) is None
    a, gen = stable_group(s)
    assert commit(s, ("t", 0, 5), gen=gen, member=a) == [E.NONE]
    assert commit(s, ("t", 0, 5)) == [E.UNKNOWN_MEMBER_ID]  # assign()-style commit into a live group
    assert commit(s, ("t", 0, 5), gen=gen, member="stranger") == [E.UNKNOWN_MEMBER_ID]
    assert commit(s, ("t", 0, 5), gen=gen + 1, member=a) == [E.ILLEGAL_GENERATION]
    # A rebalance starts: commits of the current generation are still accepted (revocation).
    _, _hn = s.join_new(client_id="n")
    assert s.c.group(GROUP).is_(GroupState.PREPARING_REBALANCE)
    assert commit(s, ("t", 0, 6), gen=gen, member=a) == [E.NONE]
    ha = s.join(a, protocols=(("range", subscription("t")),))
    assert s.result(ha).generation_id == gen + 1
    assert commit(s, ("t", 0, 7), gen=gen + 1, member=a) == [E.REBALANCE_IN_PROGRESS]
    assert fetched(s) == {("t", 0): 6}


def test_commit_metadata_too_large_is_per_partition():
    s = Shell(coordinator(offset_metadata_max_bytes=4))
    res = commit(s, ("t", 0, 1, -1, "12345"), ("t", 1, 1, -1, "1234"), ("t", 2, 1, -1, None))
    assert res == [E.OFFSET_METADATA_TOO_LARGE, E.NONE, E.NONE]
    assert fetched(s) == {("t", 1): 1, ("t", 2): 1}


def test_commit_by_static_member_is_fenced_after_replacement():
    s = Shell(coordinator())
    h = s.join("", instance="i")
    gen, _, _ = s.stabilize([h])
    old = s.results[h].member_id
    s.join("", instance="i")
    assert commit(s, ("t", 0, 1), gen=gen, member=old, instance="i") == [E.FENCED_INSTANCE_ID]


def test_offsets_of_empty_group_expire_retention_after_it_became_empty():
    s = Shell(coordinator())
    a, gen = stable_group(s)
    commit(s, ("t", 0, 5), gen=gen, member=a)
    s.advance(8 * DAY)  # the member's session expires: the group is Empty from then on
    g = s.c.group(GROUP)
    assert g.is_(GroupState.EMPTY)
    empty_since = g.state_timestamp_ms
    assert fetched(s) == {("t", 0): 5}
    s.advance(empty_since + 7 * DAY - s.now - 1)
    s.absorb(s.c.expire_offsets(s.now))
    assert fetched(s) == {("t", 0): 5}
    s.advance(1)
    n = len(s.records)
    s.absorb(s.c.expire_offsets(s.now))
    assert s.c.group(GROUP) is None  # Empty with no offsets: gone, with tombstones
    assert [v for _, v in s.records[n:]] == [None, None]


def test_live_consumer_group_keeps_offsets_of_subscribed_topics_only():
    s = Shell(coordinator(offsets_retention_check_interval_ms=3_600_000))
    a, ha = s.join_new(protocols=(("range", subscription("t")),), session=1_800_000)
    gen, _, _ = s.stabilize([ha])
    commit(s, ("t", 0, 5), ("old", 0, 9), gen=gen, member=a)
    while s.now < 7 * DAY + 2 * 3_600_000:  # heartbeats keep the member alive past the retention
        s.now += 600_000
        assert s.heartbeat(a, gen) == E.NONE
    assert fetched(s) == {("t", 0): 5}


def test_explicit_retention_time_and_standalone_expiry():
    s = Shell(coordinator())
    commit(s, ("t", 0, 1), retention=1000, version=2)
    commit(s, ("t", 1, 1))
    s.advance(1000)
    s.absorb(s.c.expire_offsets(s.now))
    assert fetched(s) == {("t", 1): 1}
    s.advance(7 * DAY)
    s.absorb(s.c.expire_offsets(s.now))
    assert s.c.group(GROUP) is None


def test_delete_offsets():
    s = Shell(coordinator())
    assert s.absorb(s.c.delete_offsets(GROUP, [("t", 0)], now_ms=0)).response.error == E.GROUP_ID_NOT_FOUND
    a, gen = stable_group(s, topics=("t",))
    commit(s, ("t", 0, 5), ("u", 0, 9), gen=gen, member=a)
    res = s.absorb(s.c.delete_offsets(GROUP, [("t", 0), ("u", 0), ("v", 0)], now_ms=s.now)).response
    assert [p.error for p in res.partitions] == [E.GROUP_SUBSCRIBED_TO_TOPIC, E.NONE, E.NONE]
    assert fetched(s) == {("t", 0): 5}
    assert s.records[-1] == (s.records[-1][0], None)


def test_delete_offsets_of_non_consumer_group_with_members():
    s = Shell(coordinator(group_initial_rebalance_delay_ms=0))
    s.join_new(protocol_type="connect")
    res = s.absorb(s.c.delete_offsets(GROUP, [("t", 0)], now_ms=s.now)).response
    assert res.error == E.NON_EMPTY_GROUP


def test_delete_groups():
    s = Shell(coordinator())
    commit(s, ("t", 0, 1), group="standalone")
    stable_group(s)
    out = s.absorb(s.c.delete_groups(["standalone", GROUP, "missing"], now_ms=s.now))
    assert out.response == [
        ("standalone", E.NONE),
        (GROUP, E.NON_EMPTY_GROUP),
        ("missing", E.GROUP_ID_NOT_FOUND),
    ]
    assert [r.value for r in out.records] == [None, None]  # offset + group tombstones
    assert s.c.group("standalone") is None


def test_describe_and_list_groups():
    s = Shell(coordinator())
    commit(s, ("t", 0, 1), group="standalone")
    a, gen = stable_group(s)
    d = {g.group_id: g for g in s.c.describe_groups([GROUP, "standalone", "nope"])}
    g = d[GROUP]
    assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
    assert g.members[0].member_id == a and g.members[0].member_assignment == f"{a}@{gen}".encode()
    assert g.members[0].member_metadata == subscription("t")
    assert d["standalone"].group_state == "Empty" and d["nope"].group_state == "Dead"
    err, listed = s.c.list_groups()
    assert err == E.NONE and {(x.group_id, x.group_state) for x in listed} == {
        (GROUP, "Stable"),
        ("standalone", "Empty"),
    }
    assert [x.group_id for x in s.c.list_groups(["empty"])[1]] == ["standalone"]
    assert s.c.list_groups(None, ["consumer"])[1] == []
    assert len(s.c.list_groups(None, ["Classic"])[1]) == 2
    # Not Stable: no metadata or assignment shown.
    s.join_new(client_id="x")
    assert s.c.describe_groups([GROUP])[0].members[0].member_assignment == b""
