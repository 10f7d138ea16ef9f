"""Rack-aware placement and rebalance plans (sans-IO), with seeded property tests."""

from __future__ import annotations

import os
import random
from collections import Counter

import pytest

from pylog.cluster.placement import place_replicas, rack_alternated
from pylog.cluster.rebalance_plan import PlanError, leader_counts, plan, replica_counts


def seed_of(name: str) -> int:
    seed = int(os.environ.get("PYLOG_TEST_SEED", random.randrange(2**32)))
    print(f"{name} seed={seed}")
    return seed


def test_rack_alternated_interleaves_racks() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    assert rack_alternated(racks) == [1, 3, 5, 2, 4, 6]
    assert rack_alternated({3: None, 1: None, 2: None}) == [1, 2, 3]


def test_placement_puts_replicas_on_distinct_racks() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    out = place_replicas(racks, 12, 3, start=0, shift=0)
    for replicas in out:
        assert len({racks[b] for b in replicas}) == 3
    assert Counter(r[0] for r in out) == dict.fromkeys(racks, 2)
    assert Counter(b for r in out for b in r) == dict.fromkeys(racks, 6)


def test_placement_without_racks_is_round_robin() -> None:
    out = place_replicas(dict.fromkeys([1, 2, 3]), 3, 2, start=0, shift=0)
    assert [r[0] for r in out] == [1, 2, 3] and all(len(set(r)) == 2 for r in out)


def test_placement_property() -> None:
    rng = random.Random(seed_of("placement property"))
    for _ in range(300):
        n = rng.randint(1, 9)
        nracks = rng.randint(0, 4)
        racks = {b: (f"r{rng.randrange(nracks)}" if nracks else None) for b in range(1, n + 1)}
        rf = rng.randint(1, n)
        parts = rng.randint(1, 40)
        out = place_replicas(racks, parts, rf, rng.randrange(n), rng.randrange(n))
        distinct = len({racks[b] or "" for b in racks})
        for replicas in out:
            assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(racks)
            assert len({racks[b] or "" for b in replicas}) == min(rf, distinct), (racks, replicas)
        if nracks == 0 and parts % n == 0:
            assert len(set(Counter(r[0] for r in out).values())) == 1  # leaders evenly spread


def test_plan_moves_replicas_and_leaders_onto_a_new_broker() -> None:
    brokers = dict.fromkeys([1, 2, 3])
    current = {("t", p): r for p, r in enumerate(place_replicas(brokers, 12, 3, 0, 0))}
    p = plan(current, dict.fromkeys([1, 2, 3, 4]))
    target = p.target
    counts = replica_counts(target, [1, 2, 3, 4])
    leaders = leader_counts(target, [1, 2, 3, 4])
    assert counts == dict.fromkeys([1, 2, 3, 4], 9)
    assert leaders == dict.fromkeys([1, 2, 3, 4], 3)
    assert p.replica_moves() == 9  # only what the new broker gains is copied
    for tp, replicas in p.moves.items():
        assert set(current[tp]) - set(replicas) <= {1, 2, 3} and len(replicas) == 3


def test_plan_removes_a_broker() -> None:
    brokers = dict.fromkeys([1, 2, 3, 4])
    current = {("t", p): r for p, r in enumerate(place_replicas(brokers, 12, 3, 0, 0))}
    p = plan(current, brokers, remove=[1])
    assert all(1 not in r for r in p.target.values())
    assert replica_counts(p.target, [2, 3, 4]) == dict.fromkeys([2, 3, 4], 12)


def test_plan_refuses_what_would_lose_data() -> None:
    current = {("t", 0): (1,), ("t", 1): (2,)}
    with pytest.raises(PlanError, match="t-0: its only in-sync replica"):
        plan(current, dict.fromkeys([1, 2]), remove=[1], isr={("t", 0): (1,)}, alive=[2])
    moved = plan(current, dict.fromkeys([1, 2]), remove=[1], isr={("t", 0): (1,)}, alive=[1, 2])
    assert moved.moves == {("t", 0): (2,)}  # alive: its copy moves off
    with pytest.raises(PlanError, match="only 1 broker"):
        plan({("t", 0): (1, 2)}, dict.fromkeys([1, 2]), remove=[1])
    with pytest.raises(PlanError, match="no broker"):
        plan(current, {1: None}, remove=[1])


def test_plan_spreads_racks() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    p = plan({("t", 0): (1, 2), ("t", 1): (3, 4)}, racks)
    for replicas in p.target.values():
        assert len({racks[b] for b in replicas}) == 2


def test_plan_property() -> None:
    rng = random.Random(seed_of("rebalance plan property"))
    for _ in range(150):
        n = rng.randint(2, 8)
        nracks = rng.choice([0, 0, 2, 3])
        racks = {b: (f"r{b % nracks}" if nracks else None) for b in range(1, n + 1)}
        current = {}
        for p in range(rng.randint(1, 30)):
            rf = rng.randint(1, min(3, n))
            pool = list(range(1, n + 1))[: rng.randint(rf, n)]  # skewed towards low ids
            current[("t", p)] = tuple(rng.sample(pool, rf))
        remove = [rng.randint(1, n)] if rng.random() < 0.3 else []
        keep = [b for b in racks if b not in remove]
        if any(len(r) > len(keep) for r in current.values()):
            continue
        result = plan(current, racks, remove=remove)
        target = result.target
        for tp, replicas in target.items():
            assert len(replicas) == len(current[tp]) and len(set(replicas)) == len(replicas)
            assert not set(replicas) & set(remove)
            if nracks:
                spread = len({racks[b] for b in replicas})
                assert spread >= min(len(replicas), len({racks[b] for b in keep})), (tp, replicas)
        counts = replica_counts(target, keep)
        if not nracks:
            assert max(counts.values()) - min(counts.values()) <= 1, (current, target)
        for tp, replicas in result.moves.items():
            assert replicas != current[tp]
        again = plan(target, racks, remove=remove)
        assert again.replica_moves() == 0  # a balanced cluster needs no data moved
