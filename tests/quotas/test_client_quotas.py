"""Which quota applies to a request (Kafka's precedence of user / client-id entities and their
defaults), who shares its rate, and the per-API accounting (deterministic)."""

from __future__ import annotations

import pytest

from pylog.config import BrokerConfig, ConfigError
from pylog.quotas.client import ClientQuotas
from pylog.quotas.entity import CLIENT_ID, IP, USER
from pylog.security.quotas import ConnectionQuotas

P, C, R = "producer_byte_rate", "consumer_byte_rate", "request_percentage"


def quotas(entries: dict[tuple, dict[str, float]], samples: int = 11) -> ClientQuotas:
    q = ClientQuotas(samples, 1)
    q.update({tuple(sorted(e, key=lambda p: p[0])): v for e, v in entries.items()})
    return q


ALL = {
    ((USER, "alice"), (CLIENT_ID, "app")): 1.0,
    ((USER, "alice"), (CLIENT_ID, None)): 2.0,
    ((USER, "alice"),): 3.0,
    ((USER, None), (CLIENT_ID, "app")): 4.0,
    ((USER, None), (CLIENT_ID, None)): 5.0,
    ((USER, None),): 6.0,
    ((CLIENT_ID, "app"),): 7.0,
    ((CLIENT_ID, None),): 8.0,
}


@pytest.mark.parametrize("level", range(1, 9))
def test_precedence_of_entities(level: int) -> None:
    """Remove the more specific entities one level at a time: the next one in Kafka's order applies."""
    entries = {e: {P: v} for e, v in ALL.items() if v >= level}
    q = quotas(entries)
    assert q.produce.quota("alice", "app") == float(level)


def test_who_shares_a_rate() -> None:
    # a quota on one user is shared by all its client ids
    q = quotas({((USER, "alice"),): {P: 100.0}})
    assert q.produce.metric_tags("alice", "a") == q.produce.metric_tags("alice", "b") == ("alice", "")
    assert q.produce.quota("bob", "a") is None
    # a default user quota is one rate per user, never one for all users
    q = quotas({((USER, None),): {P: 100.0}})
    assert q.produce.metric_tags("alice", "a") == ("alice", "")
    assert q.produce.metric_tags("bob", "a") == ("bob", "")
    assert q.produce.quota("bob", "a") == 100.0
    # client-id quotas: one rate per client id, whatever the user
    q = quotas({((CLIENT_ID, None),): {P: 100.0}})
    assert q.produce.metric_tags("alice", "a") == q.produce.metric_tags("bob", "a") == ("", "a")
    assert q.produce.quota("ANONYMOUS", "") is None  # no client id, no client-id quota
    # user and client id together
    q = quotas({((USER, "alice"), (CLIENT_ID, None)): {P: 100.0}})
    assert q.produce.metric_tags("alice", "a") == ("alice", "a")
    assert q.produce.quota("alice", "anything") == 100.0
    assert q.produce.quota("bob", "a") is None


def test_each_key_has_its_own_quotas() -> None:
    q = quotas({((CLIENT_ID, "app"),): {P: 100.0, R: 50.0}, ((USER, "alice"),): {C: 200.0}})
    assert q.produce.quota("alice", "app") == 100.0
    assert q.fetch.quota("alice", "app") == 200.0  # the client-id entity has no fetch quota
    assert q.request.quota("alice", "app") == 50.0
    assert q.fetch.quota("bob", "app") is None


def test_produce_is_throttled_over_its_byte_rate_and_nothing_else_is_measured() -> None:
    q = quotas({((CLIENT_ID, "noisy"),): {P: 1000.0}})
    assert q.enabled
    assert q.on_produce("ANONYMOUS", "quiet", 10**9, 0, False, 0) == 0  # no quota: never throttled
    assert q.on_produce("ANONYMOUS", "noisy", 5000, 0, False, 0) == 0  # 5000 over 10 s: 500/s
    # 15000 more: 20000 over 10 s = 2000/s -> (2000 - 1000) / 1000 * 10 s
    assert q.on_produce("ANONYMOUS", "noisy", 15000, 0, False, 0) == 10_000
    assert q.produce.rate("ANONYMOUS", "noisy", 0) == pytest.approx(2000.0)


def test_a_throttled_fetch_is_taken_back_and_fetch_sizes_are_capped() -> None:
    q = quotas({((USER, "alice"),): {C: 1000.0}}, samples=4)
    # at most bound * (samples - 1) windows from a quiet start
    assert q.fetch_max_bytes("alice", "c") == 3000
    assert q.fetch_max_bytes("bob", "c") is None
    assert q.on_fetch("alice", "c", 3000, 0, 0) == 0
    throttle = q.on_fetch("alice", "c", 3000, 0, 0)  # 6000 / 3 s = 2000/s
    assert throttle == 3000
    # the second response is not sent, so it does not count
    assert q.fetch.rate("alice", "c", 0) == pytest.approx(1000.0)


def test_request_time_is_in_percent_of_a_thread_and_bounded_by_a_window() -> None:
    q = quotas({((USER, None),): {R: 10.0}})
    busy_ns = 3 * 10**9  # 3 s of work: 300 %-seconds over the 10 s span = 30 %
    assert q.on_request("alice", "c", busy_ns, 0) == 1000  # (30 - 10) / 10 * 10 s, bounded to 1 s
    assert q.on_request("bob", "c", 10**6, 0) == 0  # bob has his own default quota
    # acks=0 produce requests do not count request time
    assert q.on_produce("carol", "c", 10, busy_ns, True, 0) == 0


def test_quota_changes_keep_the_rates() -> None:
    q = quotas({((CLIENT_ID, "c"),): {P: 1000.0}})
    assert q.on_produce("u", "c", 5000, 0, False, 0) == 0
    q.update({((CLIENT_ID, "c"),): {P: 100.0}})
    assert q.on_produce("u", "c", 1, 0, False, 0) == 40_010  # (500.1 - 100) / 100 * 10 s
    q.update({})
    assert not q.enabled and q.on_produce("u", "c", 10**9, 0, False, 0) == 0


def test_ip_connection_creation_rate() -> None:
    rate = "connection_creation_rate"
    q = quotas({((IP, "10.0.0.1"),): {rate: 1.0}, ((IP, None),): {rate: 5.0}})
    conns = ConnectionQuotas(quota_samples=11, quota_window_ms=1000)
    conns.set_ip_rates(q.ip_rates)
    assert conns.ip_rate("10.0.0.1") == 1.0 and conns.ip_rate("10.0.0.2") == 5.0
    # 10 connections pass the young window (10 s x 1/s), the 11th is held one window at most
    assert [conns.throttle_ip("10.0.0.1", 0) for _ in range(10)] == [0] * 10
    assert conns.throttle_ip("10.0.0.1", 0) == 1000
    assert conns.throttled == 1
    # a refused connection does not count: another is refused until the first ones age out
    assert conns.throttle_ip("10.0.0.1", 5000) == 1000
    assert conns.throttle_ip("10.0.0.1", 11_000) == 0
    assert all(conns.throttle_ip("10.0.0.2", 0) == 0 for _ in range(50))
    conns.set_ip_rates({})
    assert conns.throttle_ip("10.0.0.1", 0) == 0


def test_window_settings_are_checked_at_start() -> None:
    cfg = BrokerConfig({"quota.window.num": "0"})
    with pytest.raises(ConfigError, match=r"quota\.window\.num"):
        ClientQuotas.from_config(cfg)
    q = ClientQuotas.from_config(BrokerConfig({"quota.window.num": "4", "quota.window.size.seconds": "2"}))
    assert (q.samples, q.window_ms) == (4, 2000)
