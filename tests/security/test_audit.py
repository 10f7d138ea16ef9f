"""The audit trail's core: events as JSON keyed by principal, and the token bucket per kind of
event and client address that bounds them, with what it drops reported in one summary event."""

from __future__ import annotations

import json

from pylog.security.audit import (
    AUTHENTICATION,
    AUTHORIZATION,
    DENIED,
    DROPPED,
    FAILURE,
    SUMMARY,
    AuditEvent,
    AuditLimiter,
    authentication,
    denial,
)


def _failure(address: str, t: int = 0) -> AuditEvent:
    return authentication(False, "", address, "SASL_SSL", "SASL_AUTHENTICATE", "bad password", t)


def test_an_event_is_json_keyed_by_its_principal() -> None:
    e = denial("User:eve", "10.0.0.7", "SASL_SSL", "PRODUCE", "TOPIC:orders", "WRITE", 1234)
    assert e.key == b"User:eve"
    body = json.loads(e.to_json())
    assert body == {
        "kind": AUTHORIZATION, "outcome": DENIED, "principal": "User:eve", "client_address": "10.0.0.7",
        "listener": "SASL_SSL", "operation": "PRODUCE", "resource": "TOPIC:orders", "acl_operation": "WRITE",
        "time_ms": 1234,
    }
    failed = json.loads(_failure("10.0.0.8").to_json())
    assert failed["kind"] == AUTHENTICATION and failed["outcome"] == FAILURE and failed["principal"] == ""


def test_a_hammering_address_is_bounded_and_the_drops_are_summarized() -> None:
    limiter = AuditLimiter(rate_per_s=5)
    admitted = [limiter.admit(_failure("10.0.0.9"), now_s=100.0) for _ in range(50)]
    assert admitted.count(True) == 5
    assert limiter.admit(_failure("10.0.0.10"), now_s=100.0)  # another address
    assert limiter.admit(_failure("10.0.0.9"), now_s=100.2)  # refilled: one token
    summary = limiter.summary(time_ms=5000)
    assert summary is not None and summary.kind == SUMMARY and summary.outcome == DROPPED
    assert summary.dropped == {"authentication.failure 10.0.0.9": 45}
    assert limiter.summary(time_ms=6000) is None  # nothing dropped since


def test_a_rate_of_zero_keeps_everything_and_buckets_are_bounded() -> None:
    assert all(AuditLimiter(0).admit(_failure("a"), 0.0) for _ in range(100))
    limiter = AuditLimiter(rate_per_s=1, max_buckets=3)
    for i in range(10):
        limiter.admit(_failure(f"10.0.1.{i}"), 0.0)
        limiter.admit(_failure(f"10.0.1.{i}"), 0.0)
    summary = limiter.summary(0)
    assert summary is not None and len(summary.dropped) == 4  # three addresses, then the rest as "*"
    assert summary.dropped["authentication.failure *"] == 7
