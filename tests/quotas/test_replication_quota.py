"""The replication throttle core (KIP-73): which replicas are throttled, when one is held back,
and the rate a throttled move reaches, on a manual clock."""

from __future__ import annotations

import pytest

from pylog.clock import ManualClock
from pylog.quotas.replication import (
    ALL_REPLICAS,
    ReplicationQuota,
    parse_throttled_replicas,
    should_throttle,
)

MiB = 1 << 20


def test_parse_throttled_replicas_keeps_this_brokers_partitions() -> None:
    assert parse_throttled_replicas("0:1,0:2,1:2,2:3", 2) == frozenset({0, 1})
    assert parse_throttled_replicas(" 0:1 , 3:1", 1) == frozenset({0, 3})
    assert parse_throttled_replicas("0:1", 9) == frozenset()
    assert parse_throttled_replicas("*", 5) == ALL_REPLICAS
    assert parse_throttled_replicas("", 1) == frozenset()
    assert parse_throttled_replicas(None, 1) == frozenset()


def test_parse_throttled_replicas_ignores_malformed_entries() -> None:
    assert parse_throttled_replicas("x:1,0:1,2,3:y", 1) == frozenset({0})


def test_is_throttled_by_topic_and_partition() -> None:
    q = ReplicationQuota(11, 1000, 1000)
    q.mark_throttled("a", frozenset({1}))
    q.mark_throttled("b", ALL_REPLICAS)
    assert q.is_throttled("a", 1) and not q.is_throttled("a", 0)
    assert q.is_throttled("b", 7)
    assert not q.is_throttled("c", 0)
    q.mark_throttled("a", frozenset())
    assert not q.is_throttled("a", 1)


def test_unbounded_quota_never_throttles() -> None:
    clock = ManualClock()
    q = ReplicationQuota(11, 1000)
    q.mark_throttled("t", ALL_REPLICAS)
    assert not q.bounded
    q.record(10**12, clock.monotonic_ms())
    assert not should_throttle(q, "t", 0, False, clock.monotonic_ms())


def test_held_only_when_throttled_over_the_rate_and_out_of_sync() -> None:
    clock = ManualClock()
    q = ReplicationQuota(2, 1000, 1000)
    q.mark_throttled("t", frozenset({0}))
    now = clock.monotonic_ms()
    assert not should_throttle(q, "t", 0, False, now)  # nothing measured yet
    q.record(5000, now)
    assert should_throttle(q, "t", 0, False, now)
    assert not should_throttle(q, "t", 0, True, now), "an in-sync replica is never held"
    assert not should_throttle(q, "t", 1, False, now), "an unthrottled partition is never held"
    assert q.delay_ms(now) > 0
    clock.advance(3000)  # the windows expire
    assert not should_throttle(q, "t", 0, False, clock.monotonic_ms())


def test_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        ReplicationQuota(11, 1000).update_bound(0)


def _move(samples: int, total: int, bound: int, chunk: int, fetch_ms: int, wait_ms: int) -> float:
    """A follower pulling ``chunk`` bytes per fetch from a throttling leader until ``total`` moved;
    a held fetch waits ``wait_ms`` (replica.fetch.wait.max.ms). Returns the move's bytes/s."""
    clock = ManualClock()
    q = ReplicationQuota(samples, 1000, bound)
    q.mark_throttled("t", ALL_REPLICAS)
    moved = 0
    start = clock.monotonic_ms()
    while moved < total:
        if should_throttle(q, "t", 0, False, clock.monotonic_ms()):
            clock.advance(wait_ms)
            continue
        q.record(chunk, clock.monotonic_ms())
        moved += chunk
        clock.advance(fetch_ms)
    return moved / ((clock.monotonic_ms() - start) / 1000)


@pytest.mark.parametrize("samples", [2, 3, 11])
@pytest.mark.parametrize("total_mib", [20, 60, 400])
def test_a_throttled_move_keeps_to_the_rate(samples: int, total_mib: int) -> None:
    """Measured over the time actually elapsed (Kafka's SimpleRate), a move keeps to the bound
    from its start, short or long, whatever the number of windows."""
    rate = _move(samples, total=total_mib * MiB, bound=2 * MiB, chunk=MiB, fetch_ms=20, wait_ms=500)
    print(f"windows={samples}, {total_mib} MiB: {rate / MiB:.2f} MiB/s for a 2 MiB/s throttle")
    assert 0.8 * 2 * MiB <= rate <= 1.2 * 2 * MiB


def test_a_malformed_throttled_replicas_list_is_refused() -> None:
    from pylog.config import ConfigError, validate_topic_configs

    for good in ("0:1,1:2", "*", "", " 3:4 "):
        validate_topic_configs({"leader.replication.throttled.replicas": good})
    for bad in ("0-1", "a:b", "0:1,*", "1"):
        with pytest.raises(ConfigError, match=r"\[partitionId\]:\[brokerId\]"):
            validate_topic_configs({"follower.replication.throttled.replicas": bad})
