"""The audit trail, sans-IO: the events (who authenticated or was refused, from where, on which
listener, for which API or HTTP route and resource) and the rate that bounds them.

Events are counted against a token bucket per kind of event and client address, so a client
hammering a listener with bad credentials fills neither the log nor the audit topic: what a bucket
refuses is counted, and `AuditLimiter.summary` turns the counts into one summary event. Nothing
here reads a clock (``now_s`` / ``time_ms`` are passed in) or does I/O; the broker's
``pylog.broker.access.audit_shell`` writes the events to the ``pylog.audit`` logger and the audit topic.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

AUDIT_LOGGER = "pylog.audit"

AUTHENTICATION = "authentication"
AUTHORIZATION = "authorization"
SUMMARY = "summary"

SUCCESS = "success"
FAILURE = "failure"
DENIED = "denied"
DROPPED = "dropped"

MAX_BUCKETS = 10_000
"""Client addresses tracked at once; the least recently seen one is forgotten beyond that."""


@dataclass(frozen=True)
class AuditEvent:
    kind: str  # AUTHENTICATION, AUTHORIZATION or SUMMARY
    outcome: str  # SUCCESS, FAILURE (authentication), DENIED (authorization), DROPPED (summary)
    principal: str  # "User:alice"; "" when the caller is not known (a failed authentication)
    client_address: str
    listener: str  # the Kafka listener's name, or "schema-registry"
    operation: str  # the API key ("SASL_AUTHENTICATE") or the HTTP route ("POST /subjects/{subject}")
    resource: str = ""  # "TOPIC:orders", "GROUP:g1", "CLUSTER:kafka-cluster", "SUBJECT:orders-value"
    acl_operation: str = ""  # what was refused ("WRITE"), for denials
    reason: str = ""
    time_ms: int = 0
    dropped: Mapping[str, int] = field(default_factory=dict)  # "<kind>.<outcome> <address>" -> count
    node_id: int | None = None  # the node that recorded it

    @property
    def key(self) -> bytes:
        """The audit topic's record key: the principal."""
        return self.principal.encode()

    def to_json(self) -> bytes:
        body = {k: v for k, v in asdict(self).items() if v not in ("", {}, None) or k == "principal"}
        return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def authentication(
    ok: bool, principal: str, client_address: str, listener: str, operation: str, reason: str, time_ms: int
) -> AuditEvent:
    return AuditEvent(AUTHENTICATION, SUCCESS if ok else FAILURE, principal, client_address, listener,
                      operation, reason=reason, time_ms=time_ms)


def denial(
    principal: str, client_address: str, listener: str, operation: str, resource: str,
    acl_operation: str, time_ms: int, reason: str = "",
) -> AuditEvent:
    return AuditEvent(AUTHORIZATION, DENIED, principal, client_address, listener, operation,
                      resource, acl_operation, reason, time_ms)


class AuditLimiter:
    """A token bucket of ``rate_per_s`` events (``burst`` at most at once) per event kind and
    outcome and client address; ``rate_per_s`` <= 0 admits everything."""

    def __init__(self, rate_per_s: float, burst: float | None = None, max_buckets: int = MAX_BUCKETS) -> None:
        self.rate = rate_per_s
        self.burst = max(1.0, burst if burst is not None else rate_per_s)
        self.max_buckets = max_buckets
        self._buckets: OrderedDict[tuple[str, str], tuple[float, float]] = OrderedDict()  # (tokens, at)
        self._dropped: dict[tuple[str, str], int] = {}
        self.dropped_total = 0

    def admit(self, event: AuditEvent, now_s: float) -> bool:
        if self.rate <= 0:
            return True
        key = (f"{event.kind}.{event.outcome}", event.client_address)
        tokens, at = self._buckets.pop(key, (self.burst, now_s))
        tokens = min(self.burst, tokens + (now_s - at) * self.rate)
        admitted = tokens >= 1.0
        if admitted:
            tokens -= 1.0
        else:
            counted = key if key in self._dropped or len(self._dropped) < self.max_buckets else (key[0], "*")
            self._dropped[counted] = self._dropped.get(counted, 0) + 1
            self.dropped_total += 1
        self._buckets[key] = (tokens, now_s)
        if len(self._buckets) > self.max_buckets:
            self._buckets.popitem(last=False)
        return admitted

    def summary(self, time_ms: int) -> AuditEvent | None:
        """The events dropped since the last summary, as one event (None when none were)."""
        if not self._dropped:
            return None
        counts = {f"{kind} {address}": n for (kind, address), n in sorted(self._dropped.items())}
        self._dropped = {}
        total = sum(counts.values())
        reason = f"{total} audit events over the rate limit"
        return AuditEvent(SUMMARY, DROPPED, "", "", "", "", reason=reason, time_ms=time_ms, dropped=counts)
