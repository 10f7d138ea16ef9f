"""The materialiser's plan, driven directly (no I/O, no clock), and a seeded simulation that crashes a
materialiser at every step of its commits and checks each table holds every record exactly once."""

from __future__ import annotations

import os
import random

import pytest

from pylog.iceberg.plan import MIN_COMMIT_GAP_MS, CommitPlan, MaterializerPlan


def test_start_resumes_at_the_tables_offsets_inside_the_log() -> None:
    plan = MaterializerPlan(interval_ms=5000)
    positions = plan.start({0: 40, 1: 5, 2: 90}, {}, {0: (0, 100), 1: (10, 50), 2: (0, 80), 3: (7, 9)})
    assert positions == {0: 40, 1: 10, 2: 80, 3: 7}
    assert len(plan.notes) == 2
    assert "5..9 were removed" in plan.notes[0] and "past the log end" in plan.notes[1]


def test_dead_letter_offsets_only_count_where_ahead_of_the_table() -> None:
    plan = MaterializerPlan(interval_ms=5000)
    plan.start({0: 40, 1: 30}, {0: 50, 1: 10}, {0: (0, 100), 1: (0, 100)})
    assert plan.positions == {0: 40, 1: 30}  # read from the table's offsets
    c = plan.commit_plan()
    assert c.main_from == {0: 40, 1: 30}
    assert c.dlq_from == {0: 50, 1: 30}  # a crash between the two commits: p0's failures are there


def test_commit_due_after_the_interval_or_when_full() -> None:
    plan = MaterializerPlan(interval_ms=5000, max_buffer_records=100)
    plan.start({}, {}, {0: (0, 0)})
    assert not plan.commit_due(1_000)
    plan.fetched({0: 10}, 10, 1000, oldest_timestamp_ms=900, caught_up=True, now_ms=1_000)
    assert not plan.commit_due(5_899)
    assert plan.wait_ms(1_000) == 4_900  # the oldest record is 100 ms old already
    assert plan.commit_due(5_900)  # caught up, the oldest record is 5 s old
    plan.committed(plan.commit_plan(), 5_900)
    assert plan.main == {0: 10} and plan.buffered_records == 0
    plan.fetched({0: 110}, 100, 10_000, oldest_timestamp_ms=6_000, caught_up=False, now_ms=6_000)
    assert plan.full and plan.commit_due(6_000)  # full: no waiting, not even the commit gap


def test_records_found_on_restart_are_committed_at_once() -> None:
    plan = MaterializerPlan(interval_ms=60_000)
    plan.start({0: 0}, {}, {0: (0, 500)})
    plan.fetched({0: 500}, 500, 5000, oldest_timestamp_ms=0, caught_up=True, now_ms=100_000)
    assert plan.commit_due(100_000)


def test_behind_the_log_the_interval_counts_from_the_first_fetch() -> None:
    plan = MaterializerPlan(interval_ms=10_000)
    plan.start({0: 0}, {}, {0: (0, 10**6)})
    plan.fetched({0: 1000}, 1000, 10, oldest_timestamp_ms=0, caught_up=False, now_ms=50_000)
    assert not plan.commit_due(59_999)
    assert plan.commit_due(60_000)


def test_commits_keep_a_gap_unless_full() -> None:
    plan = MaterializerPlan(interval_ms=100)
    plan.start({0: 0}, {}, {0: (0, 10)})
    plan.fetched({0: 5}, 5, 5, oldest_timestamp_ms=0, caught_up=True, now_ms=1_000)
    assert plan.commit_due(1_000)
    plan.committed(plan.commit_plan(), 1_000)
    plan.fetched({0: 10}, 5, 5, oldest_timestamp_ms=0, caught_up=True, now_ms=1_050)
    assert not plan.commit_due(1_050)
    assert plan.commit_due(1_000 + min(MIN_COMMIT_GAP_MS, 100))


def test_nothing_to_commit_without_records() -> None:
    plan = MaterializerPlan(interval_ms=100)
    plan.start({0: 0}, {}, {0: (0, 10)})
    plan.fetched({0: 10}, 0, 0, oldest_timestamp_ms=None, caught_up=True, now_ms=10_000)  # control records
    assert not plan.commit_due(20_000) and plan.wait_ms(20_000) == 100


def test_lost_race_restarts_from_the_winners_offsets() -> None:
    plan = MaterializerPlan(interval_ms=100)
    plan.start({0: 0}, {}, {0: (0, 10)})
    plan.fetched({0: 10}, 10, 10, oldest_timestamp_ms=0, caught_up=True, now_ms=1_000)
    assert plan.lost_race({0: 7}, {}, {0: (0, 10)}) == {0: 7}
    assert plan.buffered_records == 0 and "committed to the table first" in plan.notes[-1]


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        MaterializerPlan(interval_ms=0)


# --- a seeded simulation ------------------------------------------------------------------------------


class FakeTables:
    """Two tables as a catalog holds them: rows and the offsets of the last commit, swapped atomically."""

    def __init__(self) -> None:
        self.main: list[tuple[int, int]] = []
        self.dlq: list[tuple[int, int]] = []
        self.main_offsets: dict[int, int] = {}
        self.dlq_offsets: dict[int, int] = {}


def _apply(tables: FakeTables, log: dict[int, list[bool]], fetched: list[tuple[int, int]], c: CommitPlan,
           crash_after_dlq: bool) -> None:
    """A materialiser's commit: failing records to the dead-letter table, then the rest to the table."""
    dead = [(p, o) for p, o in fetched if log[p][o] and o >= c.dlq_from.get(p, -1)]
    good = [(p, o) for p, o in fetched if not log[p][o] and o >= c.main_from.get(p, -1)]
    if dead:
        tables.dlq += dead
        tables.dlq_offsets = dict(c.dlq_offsets)
    if crash_after_dlq:
        raise RuntimeError("kill -9")
    tables.main += good
    tables.main_offsets = dict(c.offsets)


def test_simulated_crashes_keep_every_record_exactly_once() -> None:
    seed = int(os.environ.get("PYLOG_SEED", random.randrange(2**32)))
    print(f"seed {seed} (PYLOG_SEED={seed} repeats this run)")
    rng = random.Random(seed)
    for _run in range(200):
        parts = rng.randint(1, 3)
        # per partition, per offset: whether the record is poison
        log = {p: [rng.random() < 0.1 for _ in range(rng.randint(0, 60))] for p in range(parts)}
        tables = FakeTables()
        now = 0
        for _life in range(20):  # materialiser lifetimes, each ending in a crash or when done
            plan = MaterializerPlan(interval_ms=rng.choice([1, 50, 1000]),
                                    max_buffer_records=rng.randint(1, 30))
            positions = plan.start(tables.main_offsets, tables.dlq_offsets,
                                   {p: (0, len(recs)) for p, recs in log.items()})
            fetched: list[tuple[int, int]] = []
            alive = True
            while alive:
                p = rng.randrange(parts)
                end = len(log[p])
                if positions[p] < end:
                    n = rng.randint(1, end - positions[p])
                    fetched += [(p, o) for o in range(positions[p], positions[p] + n)]
                    positions[p] += n
                    plan.fetched(dict(positions), n, n, oldest_timestamp_ms=now, caught_up=False, now_ms=now)
                now += rng.randint(0, 700)
                done = all(positions[q] >= len(log[q]) for q in log)
                if plan.commit_due(now) or (done and plan.buffered_records):
                    c = plan.commit_plan()
                    crash = rng.random() < 0.2
                    try:
                        _apply(tables, log, fetched, c, crash_after_dlq=crash and rng.random() < 0.5)
                    except RuntimeError:
                        alive = False
                        continue
                    if crash:  # killed right after the commit landed
                        alive = False
                        continue
                    plan.committed(c, now)
                    fetched.clear()
                elif done:
                    break
                if rng.random() < 0.05:  # killed with records buffered
                    alive = False
            if all(tables.main_offsets.get(p, 0) >= len(recs) for p, recs in log.items()):
                break
        expected_main = sorted((p, o) for p, recs in log.items() for o, bad in enumerate(recs) if not bad)
        expected_dlq = sorted((p, o) for p, recs in log.items() for o, bad in enumerate(recs) if bad)
        assert sorted(tables.main) == expected_main, f"seed {seed}"
        assert sorted(tables.dlq) == expected_dlq, f"seed {seed}"
