"""Streams groups (KIP-1071) in the sans-IO coordinator: joins with a topology, internal topics,
active-task assignment and revocation, leave, session expiry, topology errors, replay."""

from __future__ import annotations

import random
import uuid

from pylog.protocol.errors import ErrorCode

from pylog.groups import GroupConfig, GroupCoordinator
from pylog.groups.streams import StreamsGroupConfig, StreamsHeartbeat, assign
from pylog.groups.streams_group import Status, Subtopology, TopicInfo, Topology

COMPACT = (("cleanup.policy", "compact"),)
P = 0  # every group of these tests lives on __consumer_offsets partition 0
TOPOLOGY = Topology(
    1,
    (
        Subtopology(
            "0",
            source_topics=("input",),
            repartition_sink_topics=("app-repartition",),
        ),
        Subtopology(
            "1",
            repartition_source_topics=(TopicInfo("app-repartition"),),
            state_changelog_topics=(
                TopicInfo("app-store-changelog", configs=(("cleanup.policy", "compact"),)),
            ),
        ),
    ),
)


def topics(**counts: int) -> dict[str, tuple[uuid.UUID, int]]:
    return {n.replace("_", "-"): (uuid.uuid5(uuid.NAMESPACE_DNS, n), c) for n, c in counts.items()}


ALL = topics(input=4, app_repartition=4, app_store_changelog=4)


def coordinator(delay_ms: int = 0) -> GroupCoordinator:
    c = GroupCoordinator(
        GroupConfig(offsets_topic_num_partitions=1),
        rng=random.Random(7),
        streams=StreamsGroupConfig(
            session_timeout_ms=10_000, heartbeat_interval_ms=1000, initial_rebalance_delay_ms=delay_ms
        ),
    )
    c.load_partition(P, [], now_ms=0)
    return c


def hb(member: str, epoch: int, **kw) -> StreamsHeartbeat:
    if epoch == 0:
        kw.setdefault("topology", TOPOLOGY)
        kw.setdefault("rebalance_timeout_ms", 5000)
        kw.setdefault("process_id", f"process-{member}")
    return StreamsHeartbeat("app", member, epoch, **kw)


def beat(c: GroupCoordinator, h: StreamsHeartbeat, now: int = 0, t=ALL) -> dict:
    out = c.streams_group_heartbeat(h, t, now_ms=now)
    LOG.extend(out.records)
    return out.response.response


LOG: list = []


def tasks(resp: dict) -> set[tuple[str, int]]:
    return {(t["subtopology_id"], p) for t in resp["active_tasks"] for p in t["partitions"]}


def settle(c: GroupCoordinator, members: dict[str, int], owned: dict[str, set], now: int = 0) -> None:
    """Heartbeat every member until nothing changes, each reporting what it was last given."""
    for _ in range(6):
        for m in list(members):
            r = beat(
                c, hb(m, members[m], active_tasks=_wire(owned[m]), standby_tasks={}, warmup_tasks={}), now
            )
            assert r["error_code"] == 0, r
            members[m] = r["member_epoch"]
            if r["active_tasks"] is not None:
                owned[m] = tasks(r)


def owning(member: str, epoch: int, owned: set[tuple[str, int]]) -> StreamsHeartbeat:
    return hb(member, epoch, active_tasks=_wire(owned), standby_tasks={}, warmup_tasks={})


def _wire(ts: set[tuple[str, int]]) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for s, p in ts:
        out.setdefault(s, set()).add(p)
    return {s: frozenset(ps) for s, ps in out.items()}


EVERY = {(s, p) for s in "01" for p in range(4)}


def test_two_members_share_all_tasks_then_one_leaves() -> None:
    c = coordinator()
    a = beat(c, hb("a", 0))
    assert a["error_code"] == 0 and a["member_epoch"] == 2 and tasks(a) == EVERY
    assert a["heartbeat_interval_ms"] == 1000 and a["status"] == []
    b = beat(c, hb("b", 0))
    assert b["member_epoch"] == 3 and tasks(b) == set()  # a still owns them all
    members, owned = {"a": 2, "b": 3}, {"a": EVERY, "b": set()}
    settle(c, members, owned)
    assert owned["a"] | owned["b"] == EVERY and not owned["a"] & owned["b"]
    assert len(owned["a"]) == len(owned["b"]) == 4
    g = c.streams_group("app")
    assert g is not None and g.state == "Stable"
    left = beat(c, hb("b", -1))
    assert left["member_epoch"] == -1 and left["error_code"] == 0
    settle(c, {"a": members["a"]}, owned)
    assert owned["a"] == EVERY
    assert c.streams_group("app").members.keys() == {"a"}


def test_missing_internal_topics_are_reported_and_handed_out() -> None:
    c = coordinator()
    out = c.streams_group_heartbeat(hb("a", 0), topics(input=3), now_ms=0)
    result = out.response
    r = result.response
    assert r["error_code"] == 0 and tasks(r) == set()
    assert [s["status_code"] for s in r["status"]] == [Status.MISSING_INTERNAL_TOPICS]
    created = {t.name: t for t in result.to_create}
    assert created.keys() == {"app-repartition", "app-store-changelog"}
    assert created["app-repartition"].partitions == 3 and created["app-store-changelog"].partitions == 3
    assert created["app-store-changelog"].configs == (("cleanup.policy", "compact"),)
    assert c.streams_group("app").state == "NotReady"
    # once they exist, the next heartbeat bumps the epoch and assigns every task
    r = beat(c, hb("a", r["member_epoch"]), t=topics(input=3, app_repartition=3, app_store_changelog=3))
    assert r["status"] == [] and tasks(r) == {(s, p) for s in "01" for p in range(3)}


def test_missing_source_topics_and_wrong_partition_counts() -> None:
    c = coordinator()
    r = beat(c, hb("a", 0), t={})
    assert r["status"] == [
        {"status_code": Status.MISSING_SOURCE_TOPICS, "status_detail": "Source topics input are missing."}
    ]
    r = beat(c, hb("a", r["member_epoch"]), t=topics(input=4, app_repartition=2, app_store_changelog=4))
    assert r["status"][0]["status_code"] == Status.INCORRECTLY_PARTITIONED_TOPICS
    assert "app-repartition" in r["status"][0]["status_detail"]


def test_topology_and_request_errors() -> None:
    c = coordinator()
    beat(c, hb("a", 0))
    other = Topology(1, (Subtopology("0", source_topics=("input", "more")),))
    r = beat(c, hb("b", 0, topology=other))
    assert (
        r["error_code"] == ErrorCode.INVALID_REQUEST
        and r["error_message"] == "Topology updates are not supported yet."
    )
    assert c.streams_group("app").members.keys() == {"a"}
    stale = beat(c, hb("c", 0, topology=Topology(0, TOPOLOGY.subtopologies)))
    assert stale["status"][0]["status_code"] == Status.STALE_TOPOLOGY
    assert beat(c, hb("a", 0, topology=None))["error_code"] == ErrorCode.INVALID_REQUEST
    assert beat(c, hb("a", 0, rebalance_timeout_ms=-1))["error_code"] == ErrorCode.INVALID_REQUEST
    assert beat(c, hb("a", 0, instance_id="i"))["error_message"] == "Static membership is not yet supported."
    bad = Topology(1, (Subtopology("0", repartition_source_topics=(TopicInfo("x"),)),))
    assert beat(c, hb("d", 0, topology=bad))["error_code"] == ErrorCode.STREAMS_INVALID_TOPOLOGY
    assert beat(c, hb("zz", 5))["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    assert beat(c, hb("a", 99))["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
    assert beat(c, StreamsHeartbeat("nope", "m", 3))["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    assert (
        beat(c, hb("a", 2, active_tasks={"9": frozenset({0})}, standby_tasks={}, warmup_tasks={}))[
            "error_code"
        ]
        == ErrorCode.INVALID_REQUEST
    )


def test_session_expiry_moves_tasks_to_the_survivor() -> None:
    c = coordinator()
    members, owned = {"a": 0, "b": 0}, {"a": set(), "b": set()}
    for m in members:
        r = beat(c, hb(m, 0))
        members[m] = r["member_epoch"]
        owned[m] = tasks(r)
    settle(c, members, owned)
    assert owned["b"]
    # only a keeps heartbeating; b's session (10 s) runs out
    for now in (4000, 8000, 12000):
        r = beat(
            c, hb("a", members["a"], active_tasks=_wire(owned["a"]), standby_tasks={}, warmup_tasks={}), now
        )
        members["a"] = r["member_epoch"]
        if r["active_tasks"] is not None:
            owned["a"] = tasks(r)
    c.tick(12_001)
    assert c.streams_group("app").members.keys() == {"a"}
    settle(c, {"a": members["a"]}, owned, now=12_002)
    assert owned["a"] == EVERY


def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    c = coordinator()
    a = beat(c, hb("a", 0))
    assert tasks(a) == EVERY
    b = beat(c, hb("b", 0), now=100)
    # a keeps reporting every task: it is asked to revoke half and stays at its epoch meanwhile
    r = beat(c, owning("a", a["member_epoch"], EVERY), now=200)
    assert r["member_epoch"] == a["member_epoch"] and len(tasks(r)) == 4
    assert c.streams_group("app").members["a"].state == 2  # UNREVOKED_TASKS
    r = beat(c, owning("b", b["member_epoch"], set()), now=300)
    assert r["active_tasks"] is None  # unchanged: what b should get is still a's
    c.tick(200 + 5000)  # a's rebalance timeout (5 s)
    assert c.streams_group("app").members.keys() == {"b"}
    members, owned = {"b": r["member_epoch"]}, {"b": set()}
    settle(c, members, owned, now=5300)
    assert owned["b"] == EVERY


def test_user_endpoints_get_the_partitions_of_every_members_tasks() -> None:
    c = coordinator()
    members, owned = {"a": 0, "b": 0}, {"a": set(), "b": set()}
    for m, port in (("a", 8001), ("b", 8002)):
        r = beat(c, hb(m, 0, user_endpoint=("localhost", port)))
        members[m], owned[m] = r["member_epoch"], tasks(r)
    settle(c, members, owned)
    r = beat(c, owning("a", members["a"], owned["a"]))
    assert r["endpoint_information_epoch"] > 0 and r["partitions_by_user_endpoint"]
    r = beat(c, hb("a", members["a"], endpoint_information_epoch=r["endpoint_information_epoch"]))
    assert r["partitions_by_user_endpoint"] is None  # already seen
    r = beat(c, hb("a", members["a"], endpoint_information_epoch=0))
    by_port = {e["user_endpoint"]["port"]: e["active_partitions"] for e in r["partitions_by_user_endpoint"]}
    for m, port in (("a", 8001), ("b", 8002)):
        want = {("input" if s == "0" else "app-repartition", p) for s, p in owned[m]}
        assert {(t["topic"], p) for t in by_port[port] for p in t["partitions"]} == want


def test_shutdown_request_and_group_max_size() -> None:
    c = GroupCoordinator(
        GroupConfig(offsets_topic_num_partitions=1),
        rng=random.Random(1),
        streams=StreamsGroupConfig(max_size=2, initial_rebalance_delay_ms=0),
    )
    c.load_partition(P, [], now_ms=0)
    a = beat(c, hb("a", 0))
    b = beat(c, hb("b", 0))
    full = beat(c, hb("c", 0))
    assert full["error_code"] == ErrorCode.GROUP_MAX_SIZE_REACHED
    beat(c, hb("a", a["member_epoch"], shutdown_application=True))
    r = beat(c, hb("b", b["member_epoch"]))
    assert [s["status_code"] for s in r["status"]] == [Status.SHUTDOWN_APPLICATION]
    assert "member a" in r["status"][0]["status_detail"]


def test_replay_restores_the_group() -> None:
    LOG.clear()
    c = coordinator()
    members, owned = {"a": 0, "b": 0}, {"a": set(), "b": set()}
    for m in members:
        r = beat(c, hb(m, 0))
        members[m] = r["member_epoch"]
        owned[m] = tasks(r)
    settle(c, members, owned)
    before = c.streams_group("app")
    other = coordinator()
    other.load_partition(P, [(r.key, r.value) for r in LOG], now_ms=100)
    after = other.streams_group("app")
    assert after is not None and after.topology == TOPOLOGY
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    assert {m: x.assigned for m, x in after.members.items()} == {
        m: x.assigned for m, x in before.members.items()
    }
    assert after.target == before.target and after.state == "Stable"
    # the members carry on with the new coordinator
    r = beat(other, hb("a", members["a"]), now=200)
    assert r["error_code"] == 0 and r["member_epoch"] == members["a"]
    listed = other.list_groups()[1]
    assert [(g.group_id, g.group_type, g.group_state) for g in listed] == [("app", "streams", "Stable")]
    described = other.streams_group_describe(["app", "nope"], {})
    assert described[0]["topology"]["subtopologies"][1]["state_changelog_topics"][0]["partitions"] == 4
    assert described[1]["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    # once empty, DeleteGroups removes it and a replay of everything forgets it
    for m in ("a", "b"):
        beat(other, hb(m, -1), now=300)
    assert other.delete_groups(["app"], now_ms=400).response == [("app", ErrorCode.NONE)]


def test_initial_rebalance_delay_assigns_once_the_first_members_joined() -> None:
    c = coordinator(delay_ms=3000)
    a = beat(c, hb("a", 0), now=0)
    assert tasks(a) == set() and [s["status_code"] for s in a["status"]] == [Status.ASSIGNMENT_DELAYED]
    b = beat(c, hb("b", 0), now=1000)
    assert tasks(b) == set() and b["status"][0]["status_code"] == Status.ASSIGNMENT_DELAYED
    assert c.next_deadline_ms() == 3000
    c.tick(3000)
    members = {"a": a["member_epoch"], "b": b["member_epoch"]}
    owned: dict[str, set] = {"a": set(), "b": set()}
    settle(c, members, owned, now=3001)
    assert owned["a"] | owned["b"] == EVERY and len(owned["a"]) == len(owned["b"]) == 4
    assert members["a"] == members["b"] == c.streams_group("app").group_epoch


def test_assignor_is_balanced_and_sticky() -> None:
    counts = {"0": 5, "1": 2}
    first = assign({"a": {}, "b": {}, "c": {}}, counts)
    sizes = sorted(sum(len(p) for p in t.values()) for t in first.values())
    assert sizes == [2, 2, 3]
    second = assign({**first, "d": {}}, counts)
    for m in "abc":
        for s, ps in second[m].items():
            assert ps <= first[m].get(s, frozenset())  # nobody gains a task while d is short
    every = [(s, p) for t in second.values() for s, ps in t.items() for p in ps]
    assert sorted(every) == sorted((s, p) for s, n in counts.items() for p in range(n))


def test_random_joins_leaves_and_expiries_never_give_a_task_to_two_members() -> None:
    """A seeded simulation: members join, heartbeat (reporting what they were last given), leave
    or fall silent; no two live members ever hold one task, and the survivors end with all."""
    for seed in range(40):
        rng = random.Random(seed)
        c = coordinator()
        clients: dict[str, list] = {}  # member -> [epoch, tasks it holds]
        now = 0
        for _ in range(120):
            now += rng.randint(0, 300)
            m = f"m{rng.randrange(5)}"
            if m not in clients:
                if rng.random() < 0.5:
                    r = beat(c, hb(m, 0), now)
                    clients[m] = [r["member_epoch"], tasks(r)]
            elif rng.random() < 0.08:
                beat(c, hb(m, -1), now)
                del clients[m]
            else:
                r = beat(c, owning(m, *clients[m]), now)
                if r["error_code"] != 0:
                    del clients[m]
                    continue
                clients[m][0] = r["member_epoch"]
                if r["active_tasks"] is not None:
                    clients[m][1] = tasks(r)
            c.tick(now)
            g = c.streams_group("app")
            for k in [k for k in clients if g is None or k not in g.members]:
                del clients[k]  # fenced: its session or revocation timed out
            held = [t for _, owned in clients.values() for t in owned]
            assert len(held) == len(set(held)), seed
        for _ in range(6):
            for k, state in clients.items():
                r = beat(c, owning(k, *state), now)
                state[0] = r["member_epoch"]
                if r["active_tasks"] is not None:
                    state[1] = tasks(r)
        if clients:
            assert set().union(*(owned for _, owned in clients.values())) == EVERY, seed
