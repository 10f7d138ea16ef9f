"""JoinGroup / SyncGroup / Heartbeat / LeaveGroup semantics of the classic group coordinator."""

from __future__ import annotations

import random

import pytest
from group_support import GROUP, Shell, coordinator
from pylog.protocol.errors import ErrorCode as E

from pylog.groups import GroupState, SyncRequest
from pylog.groups.records import GroupKey, decode_group_value, decode_key


def shell(**config: int) -> Shell:
    return Shell(coordinator(**config))


def state(s: Shell, group: str = GROUP) -> GroupState:
    g = s.c.group(group)
    assert g is not None
    return g.state


def test_member_id_required_round_trip_then_single_member_generation():
    s = shell()
    h = s.join("")
    first = s.results.pop(h)
    assert first.error == E.MEMBER_ID_REQUIRED and first.member_id.startswith("client-")
    assert first.generation_id == -1
    # The new group is persisted at once (empty metadata record).
    assert [decode_key(k) for k, _ in s.records] == [GroupKey(GROUP)]
    h2 = s.join(first.member_id)
    assert s.result(h2) is None  # parked for the initial rebalance delay
    assert s.c.next_deadline_ms() == 100
    s.advance(100)
    res = s.result(h2)
    assert res.error == E.NONE and res.generation_id == 1 and res.leader == first.member_id
    assert res.protocol_name == "range" and res.protocol_type == "consumer"
    assert [m.member_id for m in res.members] == [first.member_id]
    assert state(s) is GroupState.COMPLETING_REBALANCE
    hs = s.sync(first.member_id, 1, {first.member_id: b"A"})
    assert s.result(hs).error == E.NONE and s.result(hs).assignment == b"A"
    assert state(s) is GroupState.STABLE
    value = decode_group_value(s.records[-1][1])
    assert value.generation == 1 and value.members[0].assignment == b"A"


def test_old_versions_join_without_member_id_round_trip():
    s = shell(group_initial_rebalance_delay_ms=0)
    h = s.join("", version=3)
    res = s.result(h)
    assert res.error == E.NONE and res.generation_id == 1 and res.member_id


def test_zero_initial_delay_completes_in_the_same_call():
    s = shell(group_initial_rebalance_delay_ms=0)
    _, h = s.join_new()
    assert s.result(h).error == E.NONE


def test_unknown_member_of_unknown_group_and_bad_arguments():
    s = shell()
    assert s.result(s.join("ghost")).error == E.UNKNOWN_MEMBER_ID
    assert s.c.group(GROUP) is None
    assert s.result(s.join("", group="")).error == E.INVALID_GROUP_ID
    assert s.result(s.join("", session=10)).error == E.INVALID_SESSION_TIMEOUT
    assert s.result(s.join("", protocol_type="")).error == E.INCONSISTENT_GROUP_PROTOCOL


@pytest.mark.parametrize("seed", range(5))
def test_join_storm_lands_in_one_generation(seed):
    rnd = random.Random(seed)
    s = shell()
    n = 6
    ids = [s.results.pop(s.join("", client_id=f"c{i}")).member_id for i in range(n)]
    order = ids[:]
    rnd.shuffle(order)
    handles = []
    for mid in order:
        handles.append(s.join(mid))
        s.advance(rnd.randrange(0, 90))  # each arrival within the extended delay window
    gen, leader, members = s.stabilize(handles)
    assert gen == 1 and leader == order[0]
    assert sorted(members) == sorted(ids)
    leader_join = next(s.results[h] for h in handles if s.results[h].member_id == leader)
    assert [m.member_id for m in leader_join.members] == order
    assert all(not s.results[h].members for h in handles if s.results[h].member_id != leader)
    assert state(s) is GroupState.STABLE


def test_initial_delay_is_bounded_by_rebalance_timeout():
    s = shell(group_initial_rebalance_delay_ms=100)
    _mid, h = s.join_new(rebalance=1000)
    for i in range(30):  # a new member every 90 ms keeps extending the delay
        s.join_new(client_id=f"late{i}", rebalance=1000)
        s.advance(90)
        if s.result(h) is not None:
            break
    assert s.result(h) is not None and s.now <= 1100


def test_join_storm_into_stable_group_completes_when_all_rejoined():
    s = shell()
    a, ha = s.join_new()
    b, hb = s.join_new()
    gen, leader, _ = s.stabilize([ha, hb])
    new = [s.join_new(client_id=f"n{i}") for i in range(3)]
    assert state(s) is GroupState.PREPARING_REBALANCE
    assert s.heartbeat(a, gen) == E.REBALANCE_IN_PROGRESS
    h_a2 = s.join(a)
    assert s.result(h_a2) is None
    h_b2 = s.join(b)  # the last known member rejoins: completes without any timeout
    handles = [h_a2, h_b2, *(h for _, h in new)]
    assert all(h in s.results for h in handles)
    gen2, leader2, members = s.stabilize(handles)
    assert gen2 == gen + 1 and leader2 == leader and len(members) == 5


def test_member_dying_mid_rebalance_is_removed_at_rebalance_timeout():
    s = shell()
    joined = [s.join_new(client_id=f"c{i}", rebalance=5000) for i in range(3)]
    gen, _leader, ids = s.stabilize([h for _, h in joined])
    newcomer, hn = s.join_new(client_id="new", rebalance=5000)
    alive = [mid for mid in ids if mid != ids[2]]
    rejoins = [s.join(mid) for mid in alive]
    assert not any(h in s.results for h in [*rejoins, hn])
    s.advance(4900)
    assert not any(h in s.results for h in rejoins)
    s.advance(200)
    gen2, _, members = s.stabilize([*rejoins, hn])
    assert gen2 == gen + 1 and set(members) == {*alive, newcomer}
    assert ids[2] not in s.c.group(GROUP).members
    assert s.heartbeat(ids[2], gen) == E.UNKNOWN_MEMBER_ID


def test_leader_not_rejoining_hands_leadership_to_a_joined_member():
    s = shell()
    a, ha = s.join_new(rebalance=5000)
    b, hb = s.join_new(client_id="b", rebalance=5000)
    gen, leader, _ = s.stabilize([ha, hb])
    follower = b if leader == a else a
    h = s.join(follower, protocols=(("range", b"changed"),), rebalance=5000)
    s.advance(5000)
    res = s.result(h)
    assert res.error == E.NONE and res.leader == follower and res.generation_id == gen + 1
    assert [m.member_id for m in res.members] == [follower]


def test_heartbeats_racing_leaves():
    s = shell()
    a, ha = s.join_new()
    b, hb = s.join_new(client_id="b")
    gen, _, _ = s.stabilize([ha, hb])
    res = s.leave((a, None))
    assert res.error == E.NONE and [m.error for m in res.members] == [E.NONE]
    assert s.heartbeat(a, gen) == E.UNKNOWN_MEMBER_ID
    assert s.heartbeat(b, gen) == E.REBALANCE_IN_PROGRESS
    res = s.leave((a, None), ("nobody", None))
    assert [m.error for m in res.members] == [E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID]
    # b is the only one left: its rejoin completes the rebalance straight away.
    h = s.join(b)
    assert s.result(h).generation_id == gen + 1 and s.result(h).leader == b
    res = s.leave((b, None))
    assert state(s) is GroupState.PREPARING_REBALANCE or state(s) is GroupState.EMPTY
    assert state(s) is GroupState.EMPTY and s.c.group(GROUP).generation_id == gen + 2
    assert s.leave(("x", None), group="missing").error == E.UNKNOWN_MEMBER_ID


def test_leave_of_parked_member_completes_its_join_and_the_rebalance():
    s = shell()
    a, ha = s.join_new()
    b, hb = s.join_new(client_id="b")
    gen, _, _ = s.stabilize([ha, hb])
    h_a = s.join(a, protocols=(("range", b"new"),))
    assert s.result(h_a) is None
    s.leave((b, None))
    assert s.result(h_a).error == E.NONE and s.result(h_a).generation_id == gen + 1


def test_stale_generation_is_rejected_everywhere():
    s = shell()
    a, ha = s.join_new()
    b, hb = s.join_new(client_id="b")
    gen, _leader, _ = s.stabilize([ha, hb])
    s.leave((b, None))
    s.stabilize([s.join(a)])
    assert s.heartbeat(a, gen) == E.ILLEGAL_GENERATION
    assert s.result(s.sync(a, gen)).error == E.ILLEGAL_GENERATION
    assert s.heartbeat(a, gen + 1) == E.NONE
    # The removed member rejoins with its old id: unknown, so it must start over.
    assert s.result(s.join(b)).error == E.UNKNOWN_MEMBER_ID


def test_sync_errors_and_followers_waiting_for_the_leader():
    s = shell()
    a, ha = s.join_new()
    b, _hb = s.join_new(client_id="b")
    s.advance(200)
    gen = s.result(ha).generation_id
    leader = s.result(ha).leader
    follower = b if leader == a else a
    assert s.result(s.sync("nobody", gen)).error == E.UNKNOWN_MEMBER_ID
    h = s.c.sync_group(SyncRequest(GROUP, gen, follower, None, "other", None, {}), now_ms=s.now, handle="x")
    assert h.completions[0][1].error == E.INCONSISTENT_GROUP_PROTOCOL
    hf = s.sync(follower, gen)
    assert s.result(hf) is None
    # Committing while the assignment is being computed: REBALANCE_IN_PROGRESS.
    hl = s.sync(leader, gen, {follower: b"F"})  # the leader forgot itself: empty assignment
    assert s.result(hf).assignment == b"F" and s.result(hl).assignment == b""
    # A rejoining follower with unchanged metadata keeps its generation and assignment.
    hj = s.join(follower)
    assert s.result(hj).generation_id == gen and not s.result(hj).members
    assert s.result(s.sync(follower, gen)).assignment == b"F"
    assert state(s) is GroupState.STABLE


def test_new_member_aborts_completing_rebalance_for_parked_syncs():
    s = shell()
    a, ha = s.join_new()
    b, _hb = s.join_new(client_id="b")
    s.advance(200)
    gen = s.result(ha).generation_id
    follower = b if s.result(ha).leader == a else a
    hf = s.sync(follower, gen)
    s.join_new(client_id="c")
    assert s.result(hf).error == E.REBALANCE_IN_PROGRESS
    assert state(s) is GroupState.PREPARING_REBALANCE


def test_members_not_syncing_are_removed_after_rebalance_timeout():
    s = shell()
    a, ha = s.join_new(rebalance=3000)
    b, _hb = s.join_new(client_id="b", rebalance=3000)
    s.advance(200)
    gen, leader = s.result(ha).generation_id, s.result(ha).leader
    follower = b if leader == a else a
    s.sync(leader, gen, {a: b"1", b: b"2"})
    s.heartbeat(follower, gen)
    s.advance(2000)
    s.heartbeat(follower, gen)
    s.heartbeat(leader, gen)
    s.advance(1000)  # the follower never sent SyncGroup
    assert follower not in s.c.group(GROUP).members
    assert state(s) is GroupState.PREPARING_REBALANCE


def test_session_expiry_triggers_rebalance_and_empty_group():
    s = shell()
    a, ha = s.join_new(session=6000)
    b, hb = s.join_new(client_id="b", session=6000)
    gen, _, _ = s.stabilize([ha, hb])
    s.advance(3000)
    assert s.heartbeat(a, gen) == E.NONE
    s.advance(3000)
    assert b not in s.c.group(GROUP).members
    assert s.heartbeat(a, gen) == E.REBALANCE_IN_PROGRESS
    h = s.join(a, session=6000)
    assert s.result(h).generation_id == gen + 1
    s.sync(a, gen + 1, {a: b"x"})
    s.advance(6000)
    g = s.c.group(GROUP)
    assert g.state is GroupState.EMPTY and not g.members and g.generation_id == gen + 2
    assert decode_group_value(s.records[-1][1]).members == ()


def test_pending_member_delays_rebalance_until_its_session_expires():
    s = shell()
    a, ha = s.join_new(session=6000, rebalance=60_000)
    gen, _, _ = s.stabilize([ha])
    pending = s.results.pop(s.join("", client_id="p", session=6000))
    assert pending.error == E.MEMBER_ID_REQUIRED
    h = s.join(a, protocols=(("range", b"v2"),))
    assert s.result(h) is None  # waits for the pending member
    s.advance(6000)
    assert s.result(h).generation_id == gen + 1
    # The pending id is forgotten.
    assert s.result(s.join(pending.member_id)).error == E.UNKNOWN_MEMBER_ID


def test_new_member_that_never_completes_is_bounded_by_new_member_timeout():
    s = shell()
    a, ha = s.join_new(rebalance=600_000, session=6000)
    s.stabilize([ha])
    s.join_new(client_id="n", rebalance=600_000)
    # `a` never rejoins but keeps heartbeating; the new member is dropped after 5 minutes.
    for _ in range(101):
        s.advance(3000)
        s.heartbeat(a, 1)
    assert len(s.c.group(GROUP).members) == 1


def test_protocol_selection_and_inconsistent_protocols():
    s = shell()
    _, h1 = s.join_new(protocols=(("range", b"1"), ("roundrobin", b"1")))
    _, h2 = s.join_new(client_id="b", protocols=(("roundrobin", b"2"), ("range", b"2")))
    _, h3 = s.join_new(client_id="c", protocols=(("roundrobin", b"3"), ("sticky", b"3")))
    s.advance(200)
    assert {s.result(h).protocol_name for h in (h1, h2, h3)} == {"roundrobin"}
    leader_res = next(s.result(h) for h in (h1, h2, h3) if s.result(h).members)
    assert [m.metadata for m in leader_res.members] == [b"1", b"2", b"3"]
    bad = s.join("", protocols=(("sticky", b""),))
    assert s.result(bad).error == E.INCONSISTENT_GROUP_PROTOCOL
    bad = s.join("", protocol_type="connect")
    assert s.result(bad).error == E.INCONSISTENT_GROUP_PROTOCOL


def test_static_member_restart_keeps_generation_and_fences_old_id():
    s = shell()
    a, ha = s.join_new()
    hs = s.join("", instance="i-1")
    gen, _leader, _ids = s.stabilize([ha, hs])
    old = s.results[hs].member_id
    assert old.startswith("i-1-")
    assignment = s.c.group(GROUP).members[old].assignment
    n_records = len(s.records)
    h = s.join("", instance="i-1")
    res = s.result(h)
    assert res.error == E.NONE and res.generation_id == gen and res.member_id != old
    assert state(s) is GroupState.STABLE
    assert len(s.records) == n_records + 1  # the new member id is persisted
    assert s.heartbeat(old, gen, instance="i-1") == E.FENCED_INSTANCE_ID
    assert s.result(s.sync(old, gen, instance="i-1")).error == E.FENCED_INSTANCE_ID
    assert s.heartbeat(res.member_id, gen, instance="i-1") == E.NONE
    assert s.result(s.sync(res.member_id, gen, instance="i-1")).assignment == assignment
    assert s.heartbeat(a, gen) == E.NONE  # nobody else noticed


def test_static_leader_restart_for_old_and_new_join_versions():
    s = shell()
    hs = s.join("", instance="lead")
    _b, hb = s.join_new(client_id="b")
    gen, leader, _ = s.stabilize([hs, hb])
    assert leader == s.results[hs].member_id
    res = s.result(s.join("", instance="lead", version=7))
    assert res.leader == leader and not res.members and res.generation_id == gen
    res9 = s.result(s.join("", instance="lead", version=9))
    assert res9.leader == res9.member_id and res9.skip_assignment and len(res9.members) == 2


def test_static_member_with_changed_protocol_or_during_completing_rebalances():
    s = shell()
    hs = s.join("", instance="i", protocols=(("range", b""), ("rr", b"")))
    gen, _, _ = s.stabilize([hs])
    h = s.join("", instance="i", protocols=(("rr", b""),))
    assert s.result(h) is None or s.result(h).generation_id == gen + 1
    s.advance(0)
    res = s.result(h)
    assert res.generation_id == gen + 1 and res.protocol_name == "rr"
    old = res.member_id
    # Restart while CompletingRebalance: the old id is fenced and a new generation follows.
    h2 = s.join("", instance="i", protocols=(("rr", b""),))
    assert s.result(h2).generation_id == gen + 2 and s.result(h2).member_id != old
    assert s.heartbeat(old, gen + 2, instance="i") == E.FENCED_INSTANCE_ID


def test_static_member_not_rejoining_stays_until_session_expiry():
    s = shell()
    a, ha = s.join_new(session=6000, rebalance=1000)
    hs = s.join("", instance="st", session=6000, rebalance=1000)
    gen, _, _ = s.stabilize([ha, hs])
    st = s.results[hs].member_id
    h = s.join(a, protocols=(("range", b"new"),), session=6000, rebalance=1000)
    s.advance(1000)
    assert s.result(h).generation_id == gen + 1
    assert st in s.c.group(GROUP).members  # static: kept despite not rejoining
    s.advance(6000)
    assert st not in s.c.group(GROUP).members


def test_leave_by_instance_id_and_fencing():
    s = shell()
    hs = s.join("", instance="i")
    _gen, _, _ = s.stabilize([hs])
    mid = s.results[hs].member_id
    res = s.leave(("other-id", "i"))
    assert res.members[0].error == E.FENCED_INSTANCE_ID
    res = s.leave(("", "unknown"))
    assert res.members[0].error == E.UNKNOWN_MEMBER_ID
    res = s.leave(("", "i"))
    assert res.members[0].error == E.NONE and mid not in s.c.group(GROUP).members
    assert state(s) is GroupState.EMPTY


def test_group_max_size():
    s = shell(group_max_size=2)
    _a, ha = s.join_new()
    _b, hb = s.join_new(client_id="b")
    s.stabilize([ha, hb])
    h = s.join("", version=3)
    assert s.result(h).error == E.GROUP_MAX_SIZE_REACHED


def test_not_coordinator_and_loading():
    c = coordinator(offsets_topic_num_partitions=4)
    p = c.partition_for(GROUP)
    c2 = type(c)(c.config, rng=random.Random(1))
    c2.load_partition((p + 1) % 4, [], now_ms=0)
    s = Shell(c2)
    assert s.result(s.join("")).error == E.NOT_COORDINATOR
    assert s.heartbeat("m", 1) == E.NOT_COORDINATOR
    c2.mark_loading(p)
    assert s.result(s.join("")).error == E.COORDINATOR_LOAD_IN_PROGRESS
    c2.load_partition(p, [], now_ms=0)
    assert s.result(s.join("")).error == E.MEMBER_ID_REQUIRED


def test_unload_fails_parked_requests_with_not_coordinator():
    s = shell()
    _, h = s.join_new()
    s.absorb(s.c.unload_partition(s.c.partition_for(GROUP)))
    assert s.result(h).error == E.NOT_COORDINATOR
    assert s.heartbeat("x", 0) == E.NOT_COORDINATOR


def test_next_deadline_tracks_sessions():
    s = shell()
    a, _ha = s.join_new(session=6000)
    s.advance(100)
    s.sync(a, 1, {a: b""})
    assert s.c.next_deadline_ms() == s.now + 6000 - 0 or s.c.next_deadline_ms() <= s.now + 6000
    s.advance(3000)
    s.heartbeat(a, 1)
    d = s.c.next_deadline_ms()
    assert d is not None and d >= s.now
    s.now = s.c.next_deadline_ms()
    s.absorb(s.c.tick(s.now))
    assert a in s.c.group(GROUP).members  # the early heap entry re-armed, nothing expired
    s.now = s.c.next_deadline_ms()
    s.absorb(s.c.tick(s.now))
    assert not s.c.group(GROUP).members
