"""Deterministic tests of the KIP-848 coordinator core: joins, incremental reconciliation (a
partition is revoked before it is assigned elsewhere), static members, session expiry, replay."""

from __future__ import annotations

import random
import uuid

from group_support import load_all
from pylog.protocol.errors import ErrorCode

from pylog.groups import GroupConfig, GroupCoordinator, OffsetCommitPartition
from pylog.groups.consumer import ConsumerGroupConfig, Heartbeat
from pylog.groups.group_records import decode_key
from pylog.groups.reconciliation import MemberAssignment, MemberState, reconcile

T = uuid.UUID(int=7)
TOPICS = {"t": (T, 4)}
CFG = ConsumerGroupConfig(session_timeout_ms=10_000, heartbeat_interval_ms=1000)


def coordinator(seed: int = 1, **config: int) -> GroupCoordinator:
    c = GroupCoordinator(
        GroupConfig(offsets_topic_num_partitions=4, **config), rng=random.Random(seed), consumer=CFG
    )
    return load_all(c, [], now_ms=0)


def join(c, now, member_id="", instance_id=None):
    out = c.consumer_group_heartbeat(
        Heartbeat(
            "g",
            member_id,
            0,
            instance_id=instance_id,
            rebalance_timeout_ms=30_000,
            subscribed_topic_names=["t"],
        ),
        TOPICS,
        now_ms=now,
    )
    return out.response, out.records


def beat(c, now, member_id, epoch, owned):
    out = c.consumer_group_heartbeat(Heartbeat("g", member_id, epoch, owned=owned), TOPICS, now_ms=now)
    return out.response


def parts(resp):
    a = resp["assignment"]
    return None if a is None else {p for tp in a["topic_partitions"] for p in tp["partitions"]}


def test_reconcile_revokes_before_assigning_elsewhere() -> None:
    current = MemberAssignment(MemberState.STABLE, 1, 0, {T: frozenset({0, 1, 2, 3})})
    nxt = reconcile("a", current, 2, {T: frozenset({0, 1})}, None, lambda t, p: None)
    assert nxt.state is MemberState.UNREVOKED_PARTITIONS
    assert nxt.member_epoch == 1 and nxt.assigned == {T: frozenset({0, 1})}
    assert nxt.pending_revocation == {T: frozenset({2, 3})}
    # still owning a revoked partition: no progress
    assert reconcile("a", nxt, 2, {T: frozenset({0, 1})}, {T: frozenset({0, 1, 2})}, lambda t, p: None) == nxt
    done = reconcile("a", nxt, 2, {T: frozenset({0, 1})}, {T: frozenset({0, 1})}, lambda t, p: None)
    assert done.state is MemberState.STABLE and done.member_epoch == 2


def test_reconcile_waits_for_unreleased_partitions() -> None:
    current = MemberAssignment(MemberState.STABLE, 1, 0, {})
    held = {(T, 2): "a", (T, 3): "a"}
    nxt = reconcile("b", current, 2, {T: frozenset({2, 3})}, None, lambda t, p: held.get((t, p)))
    assert nxt.state is MemberState.UNRELEASED_PARTITIONS and nxt.assigned == {} and nxt.member_epoch == 2
    free = reconcile("b", nxt, 2, {T: frozenset({2, 3})}, {}, lambda t, p: None)
    assert free.state is MemberState.STABLE and free.assigned == {T: frozenset({2, 3})}


def test_two_members_split_without_overlap() -> None:
    c = coordinator()
    ra, _ = join(c, 0)
    a = ra["member_id"]
    assert parts(ra) == {0, 1, 2, 3} and ra["member_epoch"] == 1
    rb, _ = join(c, 10)
    b = rb["member_id"]
    assert rb["member_epoch"] == 2 and parts(rb) == set()  # a still owns everything
    ra = beat(c, 20, a, 1, {T: frozenset({0, 1, 2, 3})})
    keep = parts(ra)
    assert len(keep) == 2 and ra["member_epoch"] == 1  # revoking: epoch unchanged
    assert parts(beat(c, 30, b, 2, {})) in (set(), None)  # not released yet
    ra = beat(c, 40, a, 1, {T: frozenset(keep)})
    assert ra["member_epoch"] == 2
    rb = beat(c, 50, b, 2, {})
    assert parts(rb) == {0, 1, 2, 3} - keep
    assert c.group("g").state == "Stable"


def test_session_timeout_fences_and_frees_partitions() -> None:
    c = coordinator()
    a = join(c, 0)[0]["member_id"]
    b = join(c, 0)[0]["member_id"]
    assert c.next_deadline_ms() == 10_000
    beat(c, 5_000, b, 2, {})
    out = c.tick(10_001)  # a stopped heartbeating
    assert a not in c.group("g").members
    assert any(r.value is None for r in out.records)
    rb = beat(c, 10_002, b, 2, {})
    assert parts(rb) == {0, 1, 2, 3} and rb["member_epoch"] == 3


def test_fenced_epoch_and_unknown_member() -> None:
    c = coordinator()
    a = join(c, 0)[0]["member_id"]
    assert beat(c, 1, a, 7, None)["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
    assert beat(c, 1, "nobody", 1, None)["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    bad = c.consumer_group_heartbeat(
        Heartbeat("g", "", 0, subscribed_topic_names=["t"]), TOPICS, now_ms=2
    ).response
    assert bad["error_code"] == ErrorCode.INVALID_REQUEST


def test_static_member_returns_with_its_partitions() -> None:
    c = coordinator()
    ra, _ = join(c, 0, instance_id="i1")
    rb, _ = join(c, 0, instance_id="i2")
    a, b = ra["member_id"], rb["member_id"]
    ra = beat(c, 1, a, 1, {T: frozenset({0, 1, 2, 3})})
    beat(c, 2, a, 1, {T: frozenset(parts(ra))})
    beat(c, 3, b, 2, {})
    mine = set(c.group("g").members[a].assignment.assigned[T])
    epoch_before = c.group("g").group_epoch
    left = c.consumer_group_heartbeat(Heartbeat("g", a, -2, instance_id="i1"), TOPICS, now_ms=4).response
    assert left["error_code"] == 0
    again, _ = join(c, 5, instance_id="i1")
    assert again["member_id"] != a and parts(again) == mine
    assert c.group("g").group_epoch == epoch_before  # no rebalance
    # a second live member with the same instance id is refused
    assert join(c, 6, instance_id="i1")[0]["error_code"] == ErrorCode.UNRELEASED_INSTANCE_ID


def test_replay_restores_groups() -> None:
    c = coordinator()
    records = []
    ra, recs = join(c, 0)
    records += recs
    a = ra["member_id"]
    p = c.partition_for("g")
    assert all(decode_key(r.key) is not None for r in records)
    fresh = coordinator(seed=7)
    fresh.load_partition(p, [(r.key, r.value) for r in records], now_ms=100)
    g = fresh.group("g")
    assert g.group_epoch == 1 and g.members[a].assignment.assigned == {T: frozenset({0, 1, 2, 3})}
    r = beat(fresh, 101, a, 1, {T: frozenset({0, 1, 2, 3})})
    assert r["error_code"] == 0 and r["member_epoch"] == 1
    fresh.unload_partition(p)
    assert fresh.group("g") is None


def test_regex_subscription_and_range_assignor() -> None:
    """A new regex is resolved one heartbeat after it appears (Kafka resolves regexes off the
    request path): the first answer assigns nothing, the next one the matching topics."""
    c = coordinator(seed=2)
    topics = {
        "orders-a": (uuid.UUID(int=1), 2),
        "orders-b": (uuid.UUID(int=2), 2),
        "other": (uuid.UUID(int=3), 1),
    }
    r = c.consumer_group_heartbeat(
        Heartbeat(
            "g", "", 0, rebalance_timeout_ms=1, subscribed_topic_regex="orders-.*", server_assignor="range"
        ),
        topics,
        now_ms=0,
    ).response
    assert r["assignment"] == {"topic_partitions": []}
    r = c.consumer_group_heartbeat(
        Heartbeat("g", r["member_id"], r["member_epoch"]), topics, now_ms=1
    ).response
    got = {(tp["topic_id"].int, p) for tp in r["assignment"]["topic_partitions"] for p in tp["partitions"]}
    assert got == {(1, 0), (1, 1), (2, 0), (2, 1)}
    bad = c.consumer_group_heartbeat(
        Heartbeat("h", "", 0, rebalance_timeout_ms=1, subscribed_topic_regex="(("), topics, now_ms=0
    )
    assert bad.response["error_code"] == ErrorCode.INVALID_REGULAR_EXPRESSION


def test_offsets_of_a_consumer_group_with_members_do_not_expire() -> None:
    """The offsets of a KIP-848 group are kept while the group has members."""
    c = coordinator(seed=3, offsets_retention_minutes=1)
    a = join(c, 0)[0]["member_id"]
    out = c.commit_offsets("g", 1, a, None, [OffsetCommitPartition("t", 0, 5)], api_version=9, now_ms=0)
    assert [r.error for r in out.response] == [ErrorCode.NONE]
    for now in range(5_000, 70_001, 5_000):  # heartbeats keep the member for more than the retention
        assert beat(c, now, a, 1, None)["error_code"] == ErrorCode.NONE
    assert c.expire_offsets(70_000).records == []
    assert c.fetch_offsets("g", [("t", 0)]).partitions[0].offset == 5
    c.consumer_group_heartbeat(Heartbeat("g", a, -1), TOPICS, now_ms=70_000)
    assert c.expire_offsets(70_001).records  # no members: they expire as usual


def test_a_group_config_overrides_the_broker_session_timeout() -> None:
    """The per-group config lookup (Kafka's GROUP resource) is where a group's session timeout
    and heartbeat interval come from when it sets them."""
    c = coordinator()
    c.set_group_configs(
        lambda gid: (
            {"consumer.session.timeout.ms": "3000", "consumer.heartbeat.interval.ms": "700"}
            if gid == "g"
            else {}
        )
    )
    r, _ = join(c, 0)
    assert r["heartbeat_interval_ms"] == 700
    assert c.next_deadline_ms() == 3000
    c.tick(3000)
    assert r["member_id"] not in c.group("g").members
