"""Both consumer protocols in one group, sans-IO: a KIP-848 member converts a live classic group,
classic members are served through JoinGroup / SyncGroup / Heartbeat mapped onto the consumer
protocol, the group goes back to classic when the last KIP-848 member leaves, the records replay
to the same group, and no partition is ever owned by two members (a seeded property test)."""

from __future__ import annotations

import random

from group_support import load_all
from hypothesis import given, settings
from hypothesis import strategies as st
from migration_support import (
    GROUP,
    PARTITIONS,
    TID,
    TOPIC,
    TOPICS,
    ClassicClient,
    ConsumerClient,
    World,
    assert_disjoint,
    subscription_v1,
)
from pylog.protocol.errors import ErrorCode as E

from pylog.groups import (
    GroupConfig,
    GroupCoordinator,
    GroupState,
    JoinRequest,
    OffsetCommitPartition,
    SyncRequest,
)
from pylog.groups.consumer import ConsumerGroupConfig, Heartbeat
from pylog.groups.consumer_group import ConsumerGroup
from pylog.groups.group import ClassicGroup

ALL = frozenset(range(PARTITIONS))


def world(policy: str = "bidirectional", seed: int = 1) -> World:
    c = GroupCoordinator(
        GroupConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0),
        rng=random.Random(seed),
        consumer=ConsumerGroupConfig(
            session_timeout_ms=10_000, heartbeat_interval_ms=500, migration_policy=policy
        ),
    )
    return World(load_all(c, [], now_ms=0))


def run(w: World, clients: list, rounds: int, step_ms: int = 500) -> None:
    for _ in range(rounds):
        for cl in clients:
            cl.step(w)
            assert_disjoint(clients)
        w.tick(step_ms)


def owned(clients: list) -> frozenset[int]:
    return frozenset(p for cl in clients for p in cl.owned)


def test_consumer_member_joins_a_live_classic_group_and_the_group_goes_back() -> None:
    w = world()
    a, b = ClassicClient("a"), ClassicClient("b")
    run(w, [a, b], 20)
    g = w.c.group(GROUP)
    assert isinstance(g, ClassicGroup) and g.is_(GroupState.STABLE) and owned([a, b]) == ALL
    w.absorb(
        w.c.commit_offsets(
            GROUP,
            a.generation,
            a.member_id,
            None,
            [OffsetCommitPartition(TOPIC, 0, 7)],
            api_version=8,
            now_ms=w.now,
        )
    )

    k = ConsumerClient("k")
    run(w, [a, b, k], 40)
    g = w.c.group(GROUP)
    assert isinstance(g, ConsumerGroup), g
    assert owned([a, b, k]) == ALL and len(k.owned) == 2 and len(a.owned) == len(b.owned) == 2
    assert {m.member_id for m in g.members.values() if m.classic is not None} == {a.member_id, b.member_id}
    assert w.c.fetch_offsets(GROUP, [(TOPIC, 0)]).partitions[0].offset == 7  # offsets survive the change
    described = w.c.describe_groups([GROUP])[0]
    assert described.protocol_type == "consumer" and len(described.members) == 3

    replayed = load_all(GroupCoordinator(w.c.config, rng=random.Random(9)), w.records, now_ms=w.now)
    g2 = replayed.group(GROUP)
    assert isinstance(g2, ConsumerGroup) and set(g2.members) == set(g.members)
    assert {m: x.assignment.assigned for m, x in g2.members.items()} == {
        m: x.assignment.assigned for m, x in g.members.items()
    }

    k.leave(w)
    run(w, [a, b], 40)
    g = w.c.group(GROUP)
    assert isinstance(g, ClassicGroup) and g.is_(GroupState.STABLE), g
    assert owned([a, b]) == ALL and set(g.members) == {a.member_id, b.member_id}
    replayed = load_all(GroupCoordinator(w.c.config, rng=random.Random(9)), w.records, now_ms=w.now)
    assert isinstance(replayed.group(GROUP), ClassicGroup)
    assert set(replayed.group(GROUP).members) == {a.member_id, b.member_id}


def test_upgrade_refused_by_policy_or_by_a_non_consumer_protocol() -> None:
    w = world(policy="downgrade")
    a = ClassicClient("a")
    run(w, [a], 10)
    r = w.c.consumer_group_heartbeat(
        Heartbeat(GROUP, "", 0, rebalance_timeout_ms=1000, subscribed_topic_names=[TOPIC]),
        TOPICS,
        now_ms=w.now,
    ).response
    assert r["error_code"] == E.GROUP_ID_NOT_FOUND
    assert isinstance(w.c.group(GROUP), ClassicGroup)

    w = world()
    h = 10**9
    w.absorb(
        w.c.join_group(
            JoinRequest(
                "connect",
                "",
                None,
                "c",
                "/h",
                10_000,
                10_000,
                "connect",
                [("v1", b"x")],
                3,
            ),
            now_ms=0,
            handle=h,
        )
    )
    w.tick(100)
    r = w.c.consumer_group_heartbeat(
        Heartbeat("connect", "", 0, rebalance_timeout_ms=1000, subscribed_topic_names=[TOPIC]),
        TOPICS,
        now_ms=w.now,
    ).response
    assert r["error_code"] == E.GROUP_ID_NOT_FOUND


def test_an_empty_classic_group_gives_way_and_keeps_its_offsets() -> None:
    w = world()
    w.absorb(
        w.c.commit_offsets(GROUP, -1, "", None, [OffsetCommitPartition(TOPIC, 1, 3)], api_version=8, now_ms=0)
    )
    k = ConsumerClient("k")
    run(w, [k], 4)
    assert isinstance(w.c.group(GROUP), ConsumerGroup) and k.owned == ALL
    assert w.c.fetch_offsets(GROUP, [(TOPIC, 1)]).partitions[0].offset == 3


def test_classic_member_joining_a_consumer_group_reports_owned_partitions() -> None:
    """A cooperative classic member (subscription v1) that still owns a revoked partition keeps
    the group from handing it out."""
    w = world()
    k = ConsumerClient("k")
    run(w, [k], 4)
    assert k.owned == ALL
    res = {}
    h = 10**9 + 1
    w.absorb(
        w.c.join_group(
            JoinRequest(
                GROUP,
                "",
                None,
                "a",
                "/h",
                10_000,
                20_000,
                "consumer",
                [("cooperative-sticky", subscription_v1(TOPIC, []))],
                5,
            ),
            now_ms=w.now,
            handle=h,
        )
    )
    res = w.results.pop(h)
    assert res.error == E.MEMBER_ID_REQUIRED
    w.absorb(
        w.c.join_group(
            JoinRequest(
                GROUP,
                res.member_id,
                None,
                "a",
                "/h",
                10_000,
                20_000,
                "consumer",
                [("cooperative-sticky", subscription_v1(TOPIC, []))],
                5,
            ),
            now_ms=w.now,
            handle=h + 1,
        )
    )
    joined = w.results.pop(h + 1)
    assert joined.error == E.NONE and joined.leader == "" and joined.members == ()
    g = w.c.group(GROUP)
    assert isinstance(g, ConsumerGroup) and g.members[joined.member_id].classic is not None
    # k still owns everything: the classic member gets nothing until k revokes
    w.absorb(
        w.c.sync_group(
            SyncRequest(
                GROUP, joined.generation_id, joined.member_id, None, "consumer", "cooperative-sticky", {}
            ),
            now_ms=w.now,
            handle=h + 2,
            topics=TOPICS,
        )
    )
    synced = w.results.pop(h + 2)
    assert synced.error == E.NONE
    k.step(w)  # k learns its new target and gives partitions up
    assert len(k.owned) == 3
    k.step(w)
    assert w.absorb(
        w.c.heartbeat(GROUP, joined.generation_id, joined.member_id, None, now_ms=w.now)
    ).response in (
        E.REBALANCE_IN_PROGRESS,
        E.NONE,
    )


def test_regex_resubscription_assigns_only_the_new_subscription() -> None:
    """librdkafka 0045: after a member changes its regex, its target holds only the new
    subscription's topics; a new regex's topics come one heartbeat after the literal ones."""
    import uuid

    topics = {"re1": (uuid.UUID(int=1), 4), "re2": (uuid.UUID(int=2), 4), "lit": (uuid.UUID(int=3), 2)}
    w = world()

    def beat(hb: Heartbeat) -> dict:
        return w.absorb(w.c.consumer_group_heartbeat(hb, topics, now_ms=w.now)).response

    r = beat(Heartbeat("rx", "", 0, rebalance_timeout_ms=1000, subscribed_topic_names=["re1"]))
    mid, epoch = r["member_id"], r["member_epoch"]

    def names(resp: dict) -> dict[str, int]:
        by_id = {tid: n for n, (tid, _) in topics.items()}
        return {by_id[tp["topic_id"]]: len(tp["partitions"]) for tp in resp["assignment"]["topic_partitions"]}

    assert names(r) == {"re1": 4}
    r = beat(Heartbeat("rx", mid, epoch, subscribed_topic_names=[], subscribed_topic_regex="^re.*"))
    assert names(r) == {}  # the new regex is not resolved yet; re1 is no longer subscribed
    r = beat(Heartbeat("rx", mid, r["member_epoch"], owned={}))
    assert names(r) == {"re1": 4, "re2": 4}
    # unsubscribe (librdkafka sends an empty subscription and gives everything up) ...
    everything = {topics["re1"][0]: frozenset(range(4)), topics["re2"][0]: frozenset(range(4))}
    r = beat(
        Heartbeat(
            "rx",
            mid,
            r["member_epoch"],
            subscribed_topic_names=[],
            subscribed_topic_regex="",
            owned=everything,
        )
    )
    assert names(r) == {}
    r = beat(Heartbeat("rx", mid, r["member_epoch"], owned={}))
    # ... then subscribe to a literal topic and another regex: the literal topic comes first
    r = beat(
        Heartbeat(
            "rx",
            mid,
            r["member_epoch"],
            subscribed_topic_names=["lit"],
            subscribed_topic_regex="^re2$",
            owned={},
        )
    )
    assert names(r) == {"lit": 2}
    r = beat(Heartbeat("rx", mid, r["member_epoch"], owned={topics["lit"][0]: frozenset(range(2))}))
    assert names(r) == {"lit": 2, "re2": 4}  # then the new regex's topics, and only those
    g = w.c.consumer_group("rx")
    assert set(g.target[mid]) == {topics["lit"][0], topics["re2"][0]}


def test_the_holder_of_a_partition_keeps_it_when_a_member_joins() -> None:
    """Uniform assignor: one partition, two members; the member that holds it keeps it, and a member
    that left and rejoined (max.poll.interval.ms exceeded) is last in line for it."""
    import uuid

    topics = {"one": (uuid.UUID(int=5), 1)}
    w = world()

    def beat(hb: Heartbeat) -> dict:
        return w.absorb(w.c.consumer_group_heartbeat(hb, topics, now_ms=w.now)).response

    ids = []
    for name in ("x", "y"):
        r = beat(
            Heartbeat("one", "", 0, rebalance_timeout_ms=1000, subscribed_topic_names=["one"], client_id=name)
        )
        ids.append((r["member_id"], r["member_epoch"], r["assignment"]["topic_partitions"]))
    (x, xe, xa), (y, ye, ya) = ids
    assert [tp["partitions"] for tp in xa] == [[0]] and ya == []
    r = beat(Heartbeat("one", x, xe, owned={topics["one"][0]: frozenset({0})}))
    assert r["error_code"] == E.NONE  # x keeps partition 0 at the new epoch
    assert [tp["partitions"] for tp in r["assignment"]["topic_partitions"]] == [[0]]
    # x exceeds max.poll.interval.ms: it leaves with epoch -1 and rejoins with epoch 0 at once
    beat(Heartbeat("one", x, -1))
    r = beat(Heartbeat("one", x, 0, rebalance_timeout_ms=1000, subscribed_topic_names=["one"]))
    assert r["assignment"] == {"topic_partitions": []}
    r = beat(Heartbeat("one", y, ye, owned={}))
    assert [tp["partitions"] for tp in r["assignment"]["topic_partitions"]] == [[0]]


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_mixed_protocol_members_never_share_a_partition(seed: int) -> None:
    """Random joins, leaves and crashes of classic and KIP-848 members: no partition is owned by two
    live members at any step, and once the survivors settle every partition is owned exactly once.
    The group's records replay to the same type and members."""
    print(f"seed={seed}")
    rnd = random.Random(seed)
    w = world(seed=seed)
    live: list = []
    for step in range(rnd.randint(3, 10)):
        action = rnd.choice(["classic", "consumer", "consumer", "leave", "crash", "wait"])
        if action in ("classic", "consumer") and len(live) < 5:
            cls = ClassicClient if action == "classic" else ConsumerClient
            live.append(cls(f"{action}-{step}"))
        elif action in ("leave", "crash") and live:
            cl = live.pop(rnd.randrange(len(live)))
            if action == "leave":
                cl.leave(w)
        run(w, live, rnd.randint(1, 12))
    run(w, live, 80)
    if live:
        assert owned(live) == ALL, (seed, [(c.name, sorted(c.owned)) for c in live])
        g = w.c.group(GROUP)
        replayed = load_all(GroupCoordinator(w.c.config, rng=random.Random(1)), w.records, now_ms=w.now)
        g2 = replayed.group(GROUP)
        assert type(g2) is type(g) and set(g2.members) == set(g.members)
    assert TID is not None
