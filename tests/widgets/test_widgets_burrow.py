"""Burrow's partition rules (`evaluate_partition`), the group fold and the poll-fed `LagWindow`."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st
from pylog.widgets.burrow import LagWindow, OffsetSample, Status, evaluate_group, evaluate_partition


def samples(*rows: tuple[int, int, int]) -> list[OffsetSample]:
    """(offset, timestamp_ms, lag) rows."""
    return [OffsetSample(o, t, lag) for o, t, lag in rows]


# a consumer committing every second, oldest first
SLOW = samples((10, 0, 20), (20, 1000, 30), (30, 2000, 40), (40, 3000, 50))
CATCHING_UP = samples((10, 0, 50), (40, 1000, 40), (70, 2000, 30), (100, 3000, 20))


def test_no_samples_or_no_lag_is_ok() -> None:
    assert evaluate_partition([], 100, 10_000) is Status.OK
    assert evaluate_partition(SLOW, 0, 1_000_000) is Status.OK  # stopped long ago, but caught up
    assert evaluate_partition(SLOW, 5, 3000, allowed_lag=5) is Status.OK


def test_warn_when_offsets_move_but_lag_never_drops() -> None:
    assert evaluate_partition(SLOW, 50, 3000) is Status.WARN
    flat = samples((10, 0, 20), (20, 1000, 20), (30, 2000, 20))
    assert evaluate_partition(flat, 20, 2000) is Status.WARN


def test_ok_when_lag_drops_somewhere() -> None:
    assert evaluate_partition(CATCHING_UP, 20, 3000) is Status.OK
    dip = samples((10, 0, 20), (20, 1000, 30), (30, 2000, 25), (40, 3000, 50))
    assert evaluate_partition(dip, 50, 3000) is Status.OK


def test_stall_when_offset_never_moves() -> None:
    stuck = samples((10, 0, 20), (10, 1000, 30), (10, 2000, 40))
    assert evaluate_partition(stuck, 40, 2000) is Status.STALL
    assert evaluate_partition(samples((10, 0, 20)), 20, 0) is Status.STALL


def test_zero_lag_in_window_is_ok() -> None:
    was_caught_up = samples((10, 0, 0), (10, 1000, 30), (10, 2000, 40))
    assert evaluate_partition(was_caught_up, 40, 2000) is Status.OK
    assert evaluate_partition(was_caught_up, 40, 2000, allowed_lag=0) is Status.OK
    within_allowed = samples((10, 0, 3), (10, 1000, 30))
    assert evaluate_partition(within_allowed, 30, 1000, allowed_lag=3) is Status.OK


def test_stop_when_silent_longer_than_the_window_spans() -> None:
    # last commit at 3000, window spans 3000 ms: silent for more than that is STOP
    assert evaluate_partition(SLOW, 50, 6001) is Status.STOP
    assert evaluate_partition(SLOW, 50, 6000) is Status.WARN
    # even a window that once had zero lag: the history may be old
    old_ok = samples((10, 0, 0), (20, 1000, 30))
    assert evaluate_partition(old_ok, 30, 5000) is Status.STOP


def test_no_stop_when_broker_offsets_show_it_caught_up_lately() -> None:
    assert evaluate_partition(SLOW, 50, 60_000, broker_offsets=[40, 60, 90]) is Status.WARN
    assert evaluate_partition(SLOW, 50, 60_000, broker_offsets=[60, 90]) is Status.STOP


def test_rewind_is_err_until_recovered() -> None:
    rewound = samples((100, 0, 10), (120, 1000, 20), (50, 2000, 90), (60, 3000, 90))
    assert evaluate_partition(rewound, 90, 3000) is Status.ERR
    recovered = samples((100, 0, 10), (120, 1000, 20), (50, 2000, 90), (130, 3000, 30))
    assert evaluate_partition(recovered, 30, 3000) is Status.OK  # the lag dropped after the rewind
    # the rewind rule comes before the zero-lag rule: a rewind to the start after being caught up
    to_start = samples((100, 0, 0), (0, 1000, 100), (10, 2000, 90))
    assert evaluate_partition(to_start, 90, 2000) is Status.ERR


def test_stop_comes_before_rewind() -> None:
    rewound = samples((100, 0, 10), (50, 1000, 60))
    assert evaluate_partition(rewound, 60, 5000) is Status.STOP


def test_group_status_is_worst_partition_folded_to_err() -> None:
    assert evaluate_group([]) is Status.OK
    assert evaluate_group([Status.OK, None, Status.OK]) is Status.OK
    assert evaluate_group([Status.OK, Status.WARN]) is Status.WARN
    for bad in (Status.STOP, Status.STALL, Status.ERR):
        assert evaluate_group([Status.WARN, bad, Status.OK]) is Status.ERR
    assert str(Status.WARN) == "WARN"


def test_window_needs_two_polls_unless_caught_up() -> None:
    w = LagWindow(size=5)
    assert w.observe(("g", "t", 0), 10, 30, 0, committing=True) is None
    assert w.observe(("g", "t", 1), 30, 30, 0, committing=True) is Status.OK
    assert w.observe(("g", "t", 0), 20, 50, 1000, committing=True) is Status.WARN
    assert w.complete(("g", "t", 0)) == 2 / 5


def test_committing_partitions_sample_every_poll() -> None:
    w = LagWindow(size=3)
    key = ("g", "t", 0)
    for i in range(5):
        status = w.observe(key, 10, 30 + i, 1000 * i, committing=True)
    assert status is Status.STALL  # a live member that does not move: never STOP
    assert [s.timestamp_ms for s in w.samples(key)] == [2000, 3000, 4000]


def test_partitions_nobody_commits_age_into_stop() -> None:
    w = LagWindow(size=2)
    key = ("g", "t", 0)
    assert w.observe(key, 10, 20, 0, committing=False) is None
    assert w.observe(key, 20, 30, 1000, committing=False) is Status.WARN  # it moved: a commit
    # nobody commits any more: no new samples; silent for longer than the window spans
    assert w.observe(key, 20, 40, 2000, committing=False) is Status.WARN  # 1000 ms: not longer
    assert w.observe(key, 20, 40, 2001, committing=False) is Status.STOP
    assert len(w.samples(key)) == 2


def test_recent_catch_up_delays_stop() -> None:
    w = LagWindow(size=3)
    key = ("g", "t", 0)
    w.observe(key, 10, 10, 0, committing=False)
    w.observe(key, 10, 12, 1000, committing=False)  # broker offsets seen: 10, 12
    assert w.observe(key, 10, 15, 2000, committing=False) is Status.OK  # 10 <= last commit: not STOP
    assert w.observe(key, 10, 20, 3000, committing=False) is Status.STOP  # 10 aged out of the window


def test_min_distance_replaces_close_samples_and_forget() -> None:
    w = LagWindow(size=10, min_distance_ms=500)
    key = ("g", "t", 0)
    for t in (0, 100, 200, 1000):
        w.observe(key, t, 5000, t, committing=True)
    assert [s.timestamp_ms for s in w.samples(key)] == [200, 1000]  # each close one replaced the last
    w.observe(("g", "t", 1), 1, 1, 0, committing=True)
    w.forget_except([("g", "t", 1)])
    assert w.samples(key) == [] and w.complete(key) == 0.0


rows = st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 10_000), st.integers(0, 500)),
                min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(rows, st.integers(0, 500), st.integers(0, 30_000))
def test_properties(raw: list[tuple[int, int, int]], lag: int, now: int) -> None:
    s = samples(*sorted(raw, key=lambda r: r[1]))
    now = max(now, s[-1].timestamp_ms)
    status = evaluate_partition(s, lag, now)
    assert isinstance(status, Status)
    if lag == 0:
        assert status is Status.OK
    if status is Status.WARN:
        assert all(b.lag >= a.lag for a, b in pairwise(s))
        assert any(b.offset != a.offset for a, b in pairwise(s))
    if status is Status.STALL:
        assert len({x.offset for x in s}) == 1
