"""The windowed rate quotas are measured with, and the throttle time it gives (deterministic:
time is passed in)."""

from __future__ import annotations

import random

import pytest

from pylog.quotas.rate import SampledRate, throttle_time_ms


def test_a_young_rate_is_measured_over_samples_minus_one_windows() -> None:
    r = SampledRate(samples=11, window_ms=1000)
    r.record(1000.0, 0)
    # 1000 units after 0 ms: the span is taken as 10 whole windows, not as an instant
    assert r.span_ms(0) == 10_000
    assert r.measure(0) == pytest.approx(100.0)
    r.record(1000.0, 500)
    assert r.span_ms(500) == 10_500  # the half window elapsed counts on top
    assert r.measure(500) == pytest.approx(2000 / 10.5)


def test_old_windows_stop_counting() -> None:
    r = SampledRate(samples=3, window_ms=1000)
    r.record(300.0, 0)
    r.record(300.0, 1000)
    r.record(300.0, 2000)
    assert r.total(2500) == 900
    # after samples * window without news, a window counts nothing
    assert r.total(3000) == 600
    assert r.total(5000) == 0
    assert r.measure(5000) == 0


def test_a_burst_is_throttled_for_the_time_that_brings_it_back_to_the_bound() -> None:
    r = SampledRate(samples=11, window_ms=1000)
    r.record(30_000.0, 0)  # 3000/s over the assumed 10 s span, against a bound of 1000/s
    # X = (O - T) / T * W = (3000 - 1000) / 1000 * 10000 ms
    assert throttle_time_ms(r, 1000.0, 0) == 20_000
    assert throttle_time_ms(r, 1000.0, 0, max_ms=1000) == 1000  # request time is bounded
    assert throttle_time_ms(r, 5000.0, 0) == 0  # within the bound
    # after waiting that long, the same total is within the bound again
    assert r.measure(20_000 - 1) == pytest.approx(0.0)  # all windows expired by then (11 s)


def test_a_client_that_waits_its_throttle_time_holds_the_bound() -> None:
    """A client sending as fast as it may, waiting out every throttle, gets the bound on average."""
    seed = 20251125
    print(f"seed={seed}")
    rng = random.Random(seed)
    bound = 1000.0
    r = SampledRate(samples=11, window_ms=1000)
    now, sent = 0, 0.0
    while now < 120_000:
        size = rng.uniform(50, 400)
        r.record(size, now)
        sent += size
        wait = throttle_time_ms(r, bound, now)
        now += max(wait, rng.randint(1, 20))
    # the first 10 windows' allowance comes on top of the steady bound
    assert sent / (now / 1000) == pytest.approx(bound * (1 + 10 / 120), rel=0.05)


def test_a_rate_needs_a_window() -> None:
    with pytest.raises(ValueError, match="at least one window"):
        SampledRate(samples=0, window_ms=1000)


def test_simple_rate_measures_over_the_time_elapsed() -> None:
    """Kafka's SimpleRate (replication quotas): a fresh rate is measured over one window, not over
    the ``samples - 1`` windows of a quiet past that ``Rate`` assumes."""
    kafka_rate, simple = SampledRate(11, 1000), SampledRate(11, 1000, simple=True)
    for r in (kafka_rate, simple):
        r.record(1000, 0)
    assert kafka_rate.measure(500) == pytest.approx(1000 / 10.5)  # ten quiet windows before
    assert simple.measure(500) == 1000.0  # 1000 over one window
    assert simple.measure(4000) == 250.0  # 1000 over the four seconds elapsed
