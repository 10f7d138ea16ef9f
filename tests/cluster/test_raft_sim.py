"""Thousands of seeded schedules of 3- and 5-node clusters on a faulty network, with crashes and snapshots.

Safety is checked after every step (see ``raft_sim.SafetyChecker``); liveness after
the faults stop: a leader is elected, a proposal commits everywhere within a bound,
and every storage's snapshot plus tail replays to the committed log.

``PYLOG_RAFT_SIM_SCHEDULES=N`` sets how many schedules run (default 2000, about a
minute on two cores); ``PYLOG_RAFT_SIM_SEED=kind:seed`` replays one schedule (a
failure prints this line).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from raft_sim import SimCluster

from pylog.cluster.raft import Role

ELECTION_BOUND = 300  # ticks (election timeout is 10)
COMMIT_BOUND = 100
TICKS = 200  # ticks of faults per schedule
CHUNK = 50  # schedules per test case

# kind -> share of the schedules; see ``schedule`` for what each kind varies.
KINDS = {"net3": 0.35, "crash3": 0.30, "crash5": 0.25, "disk3": 0.10}
SCHEDULES = int(os.environ.get("PYLOG_RAFT_SIM_SCHEDULES", "2000"))
REPLAY = os.environ.get("PYLOG_RAFT_SIM_SEED")


def flow_control(rng: random.Random) -> dict[str, int]:
    """Half the runs use tiny batches and windows, which exposes partial replication."""
    if rng.random() < 0.5:
        return {"max_entries": rng.randint(1, 3), "max_inflight": rng.randint(1, 4)}
    return {}


def chaos(sim: SimCluster, rng: random.Random, ticks: int, *, crashes: bool) -> int:
    """Random faults, proposals and snapshots; returns how many proposals were accepted."""
    accepted = 0
    n = len(sim.ids)
    for t in range(ticks):
        r = rng.random()
        if r < 0.02:
            sim.heal()
            g = rng.sample(sim.ids, rng.randint(1, n // 2))
            sim.partition(g, [i for i in sim.ids if i not in g])
        elif r < 0.03:
            leaders = sim.leaders()
            sim.isolate(leaders[0].id if leaders and rng.random() < 0.5 else rng.choice(sim.ids))
        elif r < 0.04:
            a, b = rng.sample(sim.ids, 2)
            sim.cut(a, b)
        elif r < 0.07:
            sim.heal()
        elif r < 0.09:
            sim.compact(rng.choice(sim.ids))  # the application snapshots at a random point
        elif crashes and r < 0.10 and len(sim.down) < n // 2:
            leaders = sim.leaders()
            sim.crash(leaders[0].id if leaders and rng.random() < 0.5 else rng.choice(sim.ids))
        elif crashes and r < 0.13 and sim.down:
            sim.restart(rng.choice(sorted(sim.down)))
        if rng.random() < 0.3:
            accepted += sim.propose(f"p{t}-{rng.getrandbits(16)}".encode()) is not None
        sim.tick()
    return accepted


def heal_and_check_liveness(sim: SimCluster) -> None:
    """After the faults stop, a leader is elected and a proposal commits on every node.

    A proposal is lost, legitimately, when its leader steps down before committing it
    (e.g. check-quorum, having heard from too few followers just before the heal):
    then it is proposed again to the next leader, a bounded number of times.
    """
    sim.heal()
    sim.drop = sim.dup = sim.crash_in_ready = 0.0
    for i in sorted(sim.down):
        sim.restart(i)
    for attempt in range(3):
        lead = sim.nodes[_leader(sim)]
        data = f"after-heal-{attempt}".encode()
        index = sim.propose(data)
        assert index is not None
        # Small batches / windows catch up a lagging follower slowly: scale the bound with the backlog.
        backlog = index - min(n.applied for n in sim.live_nodes())
        bound = COMMIT_BOUND + 10 * backlog // min(sim.max_entries, sim.max_inflight)
        term = lead.term
        deposed = lambda: lead.role is not Role.LEADER or lead.term != term  # noqa: E731, B023
        assert sim.run_until(lambda: sim.all_applied(index) or deposed(), bound), "proposal did not commit"  # noqa: B023
        if sim.all_applied(index) and sim.checker.committed[index] == (term, data):
            break
        assert deposed()
    else:
        raise AssertionError("three leaders in a row lost their proposal after the heal")
    sim.check_everything()
    lead = sim.stable_leader()
    assert lead is not None
    sim.checker.check_leader_completeness(lead)


def schedule(kind: str, seed: int, tmp: Path) -> Counter[str]:
    """One seeded schedule of ``kind``:

    net3   3 nodes in memory: drops, duplicates, delays, partitions; snapshots;
    crash3 the same, plus crashes at any point of Ready processing and crash-restarts;
    crash5 the same with 5 nodes;
    disk3  crash3 on the real MetadataLogStore (crashes cut the unsynced log tail).
    """
    rng = random.Random(f"{kind}:{seed}")
    crashes = kind != "net3"
    data_dir = tmp / f"{kind}-{seed}" if kind == "disk3" else None
    sim = SimCluster(
        5 if kind == "crash5" else 3,
        seed=rng.getrandbits(64),
        drop=rng.choice((0.0, 0.05, 0.15)),
        dup=rng.choice((0.0, 0.05)),
        max_delay=rng.randint(1, 5),
        snapshot_every=rng.choice((0, 3, 10, 40)),
        crash_in_ready=rng.choice((0.005, 0.02, 0.05)) if crashes else 0.0,
        data_dir=data_dir,
        **flow_control(rng),
    )
    try:
        chaos(sim, rng, TICKS, crashes=crashes)
        heal_and_check_liveness(sim)
    finally:
        sim.close()
        if data_dir is not None:
            shutil.rmtree(data_dir, ignore_errors=True)
    sim.stats["schedules"] += 1
    sim.stats["committed"] += len(sim.checker.committed)
    return sim.stats


def run_schedules(kind: str, seeds: range | list[int], tmp: Path) -> Counter[str]:
    total: Counter[str] = Counter()
    for seed in seeds:
        try:
            total += schedule(kind, seed, tmp)
        except Exception as e:
            line = f"PYLOG_RAFT_SIM_SEED={kind}:{seed}"
            print(f"\nraft simulation failed: replay with {line} pytest tests/cluster/test_raft_sim.py")
            raise AssertionError(f"schedule {kind}:{seed} failed ({line}): {e}") from e
    return total


def _cases() -> list[tuple[str, int, int]]:
    if REPLAY:
        kind, seed = REPLAY.split(":")
        return [(kind, int(seed), int(seed) + 1)]
    cases = []
    for kind, share in KINDS.items():
        count = max(1, round(SCHEDULES * share))
        cases += [(kind, lo, min(lo + CHUNK, count)) for lo in range(0, count, CHUNK)]
    return cases


@pytest.fixture
def sim_dir(tmp_path: Path) -> Iterator[Path]:
    """Where disk schedules keep their stores: tmpfs when there is one (crashes are
    simulated, not real, and a rename there costs a tenth of one on disk)."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    d = Path(tempfile.mkdtemp(prefix="pylog-raft-sim-", dir=shm))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize(("kind", "lo", "hi"), _cases(), ids=lambda v: str(v))
def test_schedules(kind: str, lo: int, hi: int, sim_dir: Path) -> None:
    started = time.perf_counter()
    stats = run_schedules(kind, range(lo, hi), sim_dir)
    print(f"\n{kind} {lo}..{hi - 1} in {time.perf_counter() - started:.1f}s: {dict(sorted(stats.items()))}")
    assert stats["schedules"] == hi - lo and stats["committed"] > 0
    if (hi - lo) >= 20:  # the faults this kind is about did happen
        assert stats["compactions"] > 0 and stats["snapshots_sent"] > 0 and stats["snapshots_restored"] > 0
        if kind != "net3":
            assert stats["crash_in_save"] > 0 and stats["crash_in_send"] > 0 and stats["crash_in_advance"] > 0


def _leader(sim: SimCluster) -> int:
    assert sim.run_until(lambda: sim.stable_leader() is not None, ELECTION_BOUND), "no leader"
    lead = sim.stable_leader()
    assert lead is not None
    return lead.id


@pytest.mark.parametrize("on_disk", [False, True], ids=["memory", "disk"])
def test_lagging_follower_catches_up_through_a_snapshot(on_disk: bool, tmp_path: Path) -> None:
    sim = SimCluster(3, seed=77, max_delay=2, data_dir=tmp_path if on_disk else None)
    lead = _leader(sim)
    follower = next(i for i in sim.ids if i != lead)
    sim.crash(follower)
    last = 0
    for i in range(30):
        last = sim.propose(f"while-down-{i}".encode()) or last
        sim.tick()
    assert sim.run_until(lambda: sim.nodes[lead].applied >= last, COMMIT_BOUND)
    assert sim.compact(lead)
    start = sim.nodes[lead].log.start_index
    sim.restart(follower)
    assert sim.nodes[follower].last_index < start  # behind the leader's log start
    assert sim.run_until(lambda: sim.all_applied(last), COMMIT_BOUND)
    assert sim.stats["snapshots_sent"] >= 1 and sim.stats["snapshots_restored"] == 1
    node = sim.nodes[follower]
    assert node.snapshot is not None and node.snapshot.index == start
    assert sim.storages[follower].snapshot() == node.snapshot
    sim.check_everything()
    sim.close()


def test_five_nodes_progress_with_minority_down() -> None:
    for seed in range(10):
        sim = SimCluster(5, seed=2000 + seed, drop=0.0, max_delay=2, snapshot_every=5)
        lead = _leader(sim)
        # The leader and one more node crash: the other three must elect a leader and commit.
        sim.crash(lead)
        sim.crash(next(i for i in sim.ids if i != lead))
        _leader(sim)
        index = sim.propose(b"with-two-down")
        assert index is not None
        assert sim.run_until(lambda: sim.all_applied(index), COMMIT_BOUND)  # noqa: B023
        heal_and_check_liveness(sim)


def test_same_seed_same_schedule(tmp_path: Path) -> None:
    assert schedule("disk3", 5, tmp_path) == schedule("disk3", 5, tmp_path)
    assert schedule("crash5", 5, tmp_path) != schedule("crash5", 6, tmp_path)


def test_voters_the_leader_cannot_push_to_elect_another_leader() -> None:
    """The leader's own messages to both followers are lost while the followers still reach it
    and still fetch committed entries from it (as a voter that knows no leader does). Fetched
    answers must not pass for the leader's contact: the followers elect a leader they can hear,
    and what is proposed then commits."""
    for seed in range(20):
        print(f"seed {3000 + seed}")
        sim = SimCluster(3, seed=3000 + seed, max_delay=2, dynamic=True, fetch_every=1)
        lead = _leader(sim)
        before = sim.propose(b"before")
        assert before is not None
        assert sim.run_until(lambda: sim.all_applied(before), COMMIT_BOUND)  # noqa: B023
        for f in sim.ids:
            if f != lead:
                sim.cut_pushes(lead, f)
        stranded = sim.propose(b"stranded")  # only the old leader ever holds it
        assert stranded is not None
        new_leader = sim.run_until(
            lambda: any(n.role.name == "LEADER" and n.id != lead for n in sim.live_nodes()),  # noqa: B023
            60,  # six election timeouts: a timeout and a pre-vote and a vote, with room to spare
        )
        assert new_leader, f"seed {3000 + seed}: no follower took over from the leader it cannot hear"
        sim.heal()
        after = sim.propose(b"after")
        assert after is not None
        assert sim.run_until(lambda: sim.all_applied(after), COMMIT_BOUND)  # noqa: B023
        sim.check_everything()
