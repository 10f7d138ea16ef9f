"""Randomised runs of 3- and 5-node clusters on a faulty simulated network.

Safety is checked after every step (see raft_sim.SafetyChecker); liveness after the
network heals: a leader is elected and a proposal commits everywhere within a bound.
"""

from __future__ import annotations

import random

import pytest
from raft_sim import SimCluster

ELECTION_BOUND = 300  # ticks (election timeout is 10)
COMMIT_BOUND = 100


def flow_control(rng: random.Random) -> dict[str, int]:
    """Half the runs use tiny batches and windows, which exposes partial replication."""
    if rng.random() < 0.5:
        return {"max_entries": rng.randint(1, 3), "max_inflight": rng.randint(1, 4)}
    return {}


def chaos(sim: SimCluster, rng: random.Random, ticks: int, *, crashes: bool) -> int:
    """Random faults and proposals; returns how many proposals were accepted."""
    accepted = 0
    n = len(sim.ids)
    for t in range(ticks):
        r = rng.random()
        if r < 0.02:
            sim.heal()
            g = rng.sample(sim.ids, rng.randint(1, n // 2))
            sim.partition(g, [i for i in sim.ids if i not in g])
        elif r < 0.03:
            sim.isolate(rng.choice(sim.ids))
        elif r < 0.04:
            a, b = rng.sample(sim.ids, 2)
            sim.cut(a, b)
        elif r < 0.07:
            sim.heal()
        elif crashes and r < 0.08 and len(sim.down) < n // 2:
            leaders = sim.leaders()
            sim.crash(leaders[0].id if leaders and rng.random() < 0.5 else rng.choice(sim.ids))
        elif crashes and r < 0.10 and sim.down:
            sim.restart(rng.choice(sorted(sim.down)))
        if rng.random() < 0.3:
            accepted += sim.propose(f"p{t}-{rng.getrandbits(16)}".encode()) is not None
        sim.tick()
    return accepted


def heal_and_check_liveness(sim: SimCluster) -> None:
    sim.heal()
    for i in sorted(sim.down):
        sim.restart(i)
    sim.drop = 0.0
    assert sim.run_until(lambda: sim.stable_leader() is not None, ELECTION_BOUND), "no leader after healing"
    index = sim.propose(b"after-heal")
    assert index is not None
    # Small batches / windows catch up a lagging follower slowly: scale the bound with the backlog.
    backlog = index - min(n.applied for n in sim.live_nodes())
    bound = COMMIT_BOUND + 10 * backlog // min(sim.max_entries, sim.max_inflight)
    assert sim.run_until(lambda: sim.all_applied(index), bound), "proposal did not commit"
    sim.checker.check_log_matching(sim.live_nodes())
    lead = sim.stable_leader()
    assert lead is not None
    sim.checker.check_leader_completeness(lead)


@pytest.mark.parametrize("seed", range(60))
def test_three_nodes_drop_delay_partition(seed: int) -> None:
    rng = random.Random(seed)
    sim = SimCluster(3, seed=seed, drop=0.1, min_delay=0, max_delay=3, **flow_control(rng))
    chaos(sim, rng, 500, crashes=False)
    heal_and_check_liveness(sim)
    assert sim.checker.applied, "nothing was ever committed"


@pytest.mark.parametrize("seed", range(40))
def test_five_nodes_with_crashes(seed: int) -> None:
    rng = random.Random(1000 + seed)
    sim = SimCluster(5, seed=1000 + seed, drop=0.05, min_delay=0, max_delay=4, **flow_control(rng))
    chaos(sim, rng, 500, crashes=True)
    heal_and_check_liveness(sim)


@pytest.mark.parametrize("seed", range(10))
def test_five_nodes_progress_with_minority_down(seed: int) -> None:
    sim = SimCluster(5, seed=2000 + seed, drop=0.0, max_delay=2)
    assert sim.run_until(lambda: sim.stable_leader() is not None, ELECTION_BOUND)
    lead = sim.stable_leader()
    assert lead is not None
    # The leader and one more node crash: the other three must elect a leader and commit.
    sim.crash(lead.id)
    sim.crash(next(i for i in sim.ids if i != lead.id))
    assert sim.run_until(lambda: sim.stable_leader() is not None, ELECTION_BOUND)
    index = sim.propose(b"with-two-down")
    assert index is not None
    assert sim.run_until(lambda: sim.all_applied(index), COMMIT_BOUND)
    heal_and_check_liveness(sim)
