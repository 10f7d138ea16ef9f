"""Voter changes in the Raft core (KIP-853), on the seeded simulated network of raft_sim.py.

A new controller is caught up as an observer before it may become a voter; changes go one at a
time, committed through the log, and take effect when appended; a leader that removes itself
resigns once the change commits and a remaining voter takes over; a replaced disk (same node id,
new directory id) never counts as the voter it replaces. The randomised schedules add and remove
voters while the network drops, delays and partitions, checking Raft's safety after every step
(one leader per term, log matching, leader completeness) and that committed voter sets differ by
one voter at a time; each prints its seed (``PYLOG_RAFT_MEMBERSHIP_SEED=N`` replays one).
"""

from __future__ import annotations

import os
import random
from collections import Counter

import pytest
from pylog.protocol.errors import ErrorCode
from raft_sim import SimCluster

from pylog.cluster.raft import MemoryStorage, NotLeader, RaftNode, Role, VoterChangeRefused
from pylog.cluster.voters import (
    KRAFT_VERSION_DYNAMIC,
    ControlBatch,
    Endpoint,
    VoterHistory,
    VoterNode,
    VoterSet,
    VoterState,
    decode_control,
    encode_control,
)

BOUND = 400  # ticks (election timeout 10)
SCHEDULES = int(os.environ.get("PYLOG_RAFT_MEMBERSHIP_SCHEDULES", "120"))
REPLAY = os.environ.get("PYLOG_RAFT_MEMBERSHIP_SEED")


def leader(sim: SimCluster) -> RaftNode:
    assert sim.run_until(lambda: sim.stable_leader() is not None, BOUND), "no stable leader"
    lead = sim.stable_leader()
    assert lead is not None
    return lead


def commit(sim: SimCluster, data: bytes) -> int:
    """Propose ``data`` until a leader commits it everywhere; its index."""
    for _ in range(5):
        lead = leader(sim)
        index = lead.propose(data)
        sim.process(lead)
        applied = isinstance(index, int) and sim.run_until(lambda: sim.all_applied(index), BOUND)  # noqa: B023
        if applied and sim.checker.committed[index][1] == data:
            return index
    raise AssertionError(f"{data!r} did not commit")


def change(sim: SimCluster, op: str, *args: object) -> int:
    """Run a voter change on the leader until it is appended and committed everywhere."""
    for _ in range(50):
        lead = leader(sim)
        result = getattr(lead, op)(*args)
        sim.process(lead)
        if isinstance(result, int):
            assert sim.run_until(lambda: sim.all_applied(result) or lead.role is not Role.LEADER, BOUND)  # noqa: B023
            if sim.all_applied(result):
                return result
        elif isinstance(result, VoterChangeRefused) and result.error != ErrorCode.REQUEST_TIMED_OUT:
            raise AssertionError(f"{op}{args} refused: {result}")
        sim.run(5)
    raise AssertionError(f"{op}{args} never committed")


def test_control_entries_round_trip_and_history() -> None:
    vs = VoterSet(
        (
            VoterNode(1, None, (Endpoint("CONTROLLER", "127.0.0.1", 9093),)),
            VoterNode(2, VoterSet.of_ids([1]).voters[0].directory_id),
        )
    )
    batch = ControlBatch(KRAFT_VERSION_DYNAMIC, vs)
    assert decode_control(encode_control(batch)) == batch
    h = VoterHistory(VoterState(0, None, 0))
    assert h.append(3, batch) and h.latest.voters == vs and h.latest.kraft_version == 1
    smaller = vs.remove(2, None)
    assert smaller is not None and h.append(7, ControlBatch(voters=smaller))
    assert h.at(5).voters == vs and h.at(7).voters == smaller
    assert h.truncate_from(7) and h.latest.voters == vs
    h.compact(5)
    assert h.latest.index <= 5 and h.at(100).voters == vs
    assert vs.add(VoterNode(1)) is None and vs.remove(1, None) is not None
    assert VoterSet.of_ids([1]).remove(1, None) is None  # never the last voter


def test_a_new_voter_is_caught_up_as_an_observer_first() -> None:
    sim = SimCluster(3, seed=11, dynamic=True, max_delay=2)
    for i in range(20):
        commit(sim, f"before-{i}".encode())
    new = sim.add_node()
    node4 = sim.nodes[new]
    assert not node4.is_voter and node4.voter_set is None  # an empty log knows no voters
    lead = leader(sim)
    refused = lead.add_voter(sim.voter_node(new))
    assert isinstance(refused, VoterChangeRefused) and refused.error == ErrorCode.REQUEST_TIMED_OUT
    assert sim.run_until(lambda: node4.applied >= lead.committed, BOUND)  # it fetched as an observer
    assert not node4.is_voter and node4.role is Role.FOLLOWER
    index = change(sim, "add_voter", sim.voter_node(new))
    assert sim.nodes[new].is_voter and sim.nodes[new].voter_set is not None
    assert set(leader(sim).voters) == {1, 2, 3, 4}
    after = commit(sim, b"with-four")
    assert after > index and sim.all_applied(after)
    sim.check_everything()
    print(f"\nseed 11: observer fetches {sim.stats['observer_fetches']}")


def test_one_change_at_a_time_and_kafkas_errors() -> None:
    sim = SimCluster(3, seed=12, dynamic=True, max_delay=1)
    lead = leader(sim)
    commit(sim, b"x")
    lead = leader(sim)
    other = next(i for i in sim.ids if i != lead.id)
    first = lead.remove_voter(other, sim.dirs[other])
    assert isinstance(first, int)
    second = lead.remove_voter(next(i for i in sim.ids if i not in (lead.id, other)), None)
    assert isinstance(second, VoterChangeRefused) and second.error == ErrorCode.REQUEST_TIMED_OUT
    sim.process(lead)
    assert sim.run_until(lambda: lead.committed >= first, BOUND)
    assert set(lead.voters) == set(sim.ids) - {other}
    dup = lead.add_voter(sim.voter_node(lead.id))
    assert isinstance(dup, VoterChangeRefused) and dup.error == ErrorCode.DUPLICATE_VOTER
    missing = lead.remove_voter(other, sim.dirs[other])
    assert isinstance(missing, VoterChangeRefused) and missing.error == ErrorCode.VOTER_NOT_FOUND
    wrong_dir = lead.remove_voter(lead.id, sim.dirs[other])
    assert isinstance(wrong_dir, VoterChangeRefused) and wrong_dir.error == ErrorCode.VOTER_NOT_FOUND
    follower = next(n for n in sim.live_nodes() if n.role is not Role.LEADER)
    assert isinstance(follower.remove_voter(lead.id, sim.dirs[lead.id]), NotLeader)
    # static voters (kraft.version 0): no changes at all
    static = SimCluster(3, seed=13)
    slead = leader(static)
    refused = slead.add_voter(VoterNode(4))
    assert isinstance(refused, VoterChangeRefused) and refused.error == ErrorCode.UNSUPPORTED_VERSION


def test_a_removed_leader_resigns_once_committed_and_follows_as_an_observer() -> None:
    for seed in range(20, 26):
        sim = SimCluster(3, seed=seed, dynamic=True, max_delay=2)
        commit(sim, b"x")
        lead = leader(sim)
        old, term = lead.id, lead.term
        index = lead.remove_voter(old, sim.dirs[old])
        assert isinstance(index, int)
        sim.process(lead)
        assert lead.role is Role.LEADER  # leads until the change commits
        assert sim.run_until(lambda: lead.role is not Role.LEADER, BOUND), f"seed {seed}: no resignation"  # noqa: B023
        assert lead.committed >= index and not lead.is_voter
        new = leader(sim)
        assert new.id != old and new.term > term and old not in new.voters
        after = commit(sim, b"after-the-leader-left")
        assert sim.nodes[old].applied >= after  # the old leader follows the log as an observer
        for _ in range(50):
            sim.tick()
            assert sim.nodes[old].role is not Role.LEADER and not sim.nodes[old].is_voter
        sim.check_everything()


def test_a_replaced_disk_never_stands_in_for_the_voter_it_replaces() -> None:
    sim = SimCluster(3, seed=31, dynamic=True, max_delay=1)
    for i in range(10):
        commit(sim, f"e{i}".encode())
    lead = leader(sim)
    victim = next(i for i in sim.ids if i != lead.id)
    old_dir = sim.dirs[victim]
    sim.replace_disk(victim)
    replaced = sim.nodes[victim]
    assert replaced.last_index == 0 and not replaced.is_voter
    lead = leader(sim)
    before = lead.progress(victim)
    assert before is not None
    stale = before.match
    for i in range(5):
        commit(sim, f"while-replaced-{i}".encode())  # the two other voters commit alone
    lead = leader(sim)
    pr = lead.progress(victim)
    assert pr is None or pr.match <= stale < lead.committed  # its acks never count for the old disk
    assert sim.run_until(lambda: replaced.applied >= lead.committed, BOUND)  # it observes
    assert not replaced.is_voter  # the log's voter is (victim, old_dir)
    change(sim, "remove_voter", victim, old_dir)
    change(sim, "add_voter", sim.voter_node(victim))
    lead = leader(sim)
    assert lead.voter_set is not None and lead.voter_set.is_voter(victim, sim.dirs[victim])
    assert sim.nodes[victim].is_voter
    commit(sim, b"replaced")
    sim.check_everything()


def test_a_partition_during_a_change_keeps_one_leader_and_the_change() -> None:
    sim = SimCluster(3, seed=41, dynamic=True, max_delay=2)
    commit(sim, b"x")
    new = sim.add_node()
    lead = leader(sim)
    assert sim.run_until(lambda: isinstance(lead.add_voter(sim.voter_node(new)), int), BOUND)
    index = lead.last_index
    sim.process(lead)
    sim.isolate(lead.id)  # the leader appended the change, then lost everyone
    sim.run(60)
    sim.heal()
    lead2 = leader(sim)
    # the change either survived (it reached a majority of the new set) or was replaced
    if lead2.log.term(index) == lead.log.term(index):
        assert sim.run_until(lambda: sim.all_applied(index), BOUND)
    commit(sim, b"after-heal")
    sim.check_everything()


def membership_schedule(seed: int) -> Counter[str]:
    """Random adds and removes (the leader too) of up to five nodes under drops, delays, cuts,
    partitions, crashes and restarts; then heal, and every node must apply a last proposal."""
    rng = random.Random(seed)
    sim = SimCluster(
        3,
        seed=rng.getrandbits(64),
        dynamic=True,
        drop=rng.choice((0.0, 0.05, 0.1)),
        max_delay=rng.randint(1, 4),
        snapshot_every=rng.choice((0, 5, 20)),
        crash_in_ready=rng.choice((0.0, 0.01)),
    )
    for _ in range(2):
        sim.add_node()
    changes = Counter[str]()
    for t in range(300):
        r = rng.random()
        if r < 0.02:
            sim.heal()
            g = rng.sample(sim.ids, rng.randint(1, 2))
            sim.partition(g, [i for i in sim.ids if i not in g])
        elif r < 0.03:
            sim.isolate(rng.choice(sim.ids))
        elif r < 0.07:
            sim.heal()
        elif r < 0.09:
            sim.compact(rng.choice(sim.ids))
        elif r < 0.10 and not sim.down:
            sim.crash(rng.choice(sim.ids))
        elif r < 0.12 and sim.down:
            sim.restart(rng.choice(sorted(sim.down)))
        elif r < 0.18:
            leaders = sim.leaders()
            if leaders:
                lead = leaders[0]
                voters = lead.voters
                outside = [i for i in sim.ids if i not in voters]
                if outside and (len(voters) < 3 or rng.random() < 0.5):
                    result = lead.add_voter(sim.voter_node(rng.choice(outside)), max_lag=3)
                    kind = "add"
                else:
                    victim = rng.choice(voters)
                    result = lead.remove_voter(victim, sim.dirs[victim])
                    kind = "remove"
                changes[f"{kind}_{'appended' if isinstance(result, int) else 'refused'}"] += 1
                sim.process(lead)
        if rng.random() < 0.3:
            sim.propose(f"p{t}".encode())
        sim.tick()
    sim.heal()
    sim.drop = sim.crash_in_ready = 0.0
    for i in sorted(sim.down):
        sim.restart(i)
    lead = leader(sim)
    index = lead.propose(b"final")
    sim.process(lead)
    assert isinstance(index, int)
    assert sim.run_until(lambda: sim.all_applied(index) or lead.role is not Role.LEADER, BOUND * 2)
    final = commit(sim, b"final-2")
    assert sim.all_applied(final)
    sim.check_everything()
    changes["schedules"] += 1
    changes["committed"] += len(sim.checker.committed)
    changes["observer_fetches"] += sim.stats["observer_fetches"]
    return changes


def _seeds() -> list[int]:
    if REPLAY:
        return [int(REPLAY)]
    return list(range(SCHEDULES))


@pytest.mark.parametrize("chunk", range(0, len(_seeds()), 20))
def test_membership_schedules(chunk: int) -> None:
    total = Counter[str]()
    for seed in _seeds()[chunk : chunk + 20]:
        try:
            total += membership_schedule(seed)
        except Exception as exc:
            line = f"PYLOG_RAFT_MEMBERSHIP_SEED={seed}"
            print(f"\nmembership schedule failed: replay with {line} pytest {__file__}")
            raise AssertionError(f"membership schedule {seed} failed ({line}): {exc}") from exc
    seeds = _seeds()[chunk : chunk + 20]
    print(f"\nmembership seeds {seeds[0]}..{seeds[-1]}: {dict(sorted(total.items()))}")
    assert total["schedules"] == len(seeds)
    if len(seeds) >= 20:
        assert total["add_appended"] > 0 and total["remove_appended"] > 0


def test_static_node_ignores_strangers_and_dynamic_node_without_voters_observes() -> None:
    node = RaftNode(1, None, MemoryStorage(), random.Random(1))
    for _ in range(100):
        node.tick()
    assert node.role is Role.FOLLOWER and not node.is_voter and not node.has_ready()
