"""Liveness and readiness of a node (the model of Redpanda's ``/v1/status/ready``).

Live: the process answers and its event loop runs. Ready: the node may take traffic. A broker
must have caught up with the metadata log, be registered and unfenced, and host every partition
the image gives it (a replica the image names here but not opened here cannot be served); a
controller must know the quorum's leader.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from pylog.metrics.loop_lag import LoopLag

if TYPE_CHECKING:
    from pylog.metrics.observed import ObservedNode

LOOP_STALL_S = 30.0
"""A node whose event loop has not run for this long is no longer live."""

MAX_REASONS = 10
"""At most this many partitions named in a not-ready answer (the count says how many)."""

OPEN_GRACE_S = 10.0
"""A partition the image just gave this node is being opened: not ready only if it stays unopened."""


def liveness(loop_lag: LoopLag | None) -> list[str]:
    """Why the node is not live (empty: live)."""
    if loop_lag is not None and (stalled := loop_lag.stalled_s()) > LOOP_STALL_S:
        return [f"the event loop has not run for {stalled:.0f} s"]
    return []


class Readiness:
    """Why the node is not ready to serve (empty: ready); called from the metrics threads."""

    def __init__(self, broker: ObservedNode) -> None:
        self.broker = broker
        self._lock = threading.Lock()
        self._missing_since: dict[str, float] = {}

    def __call__(self) -> list[str]:
        with self._lock:  # one check at a time: they share the partitions' first-missing times
            for _ in range(3):
                try:
                    return readiness(self.broker, self._missing_since, self.broker.clock.monotonic_s())
                except (RuntimeError, KeyError):  # the image changed while it was read: read again
                    continue
            return ["the metadata image changes too fast to check it"]


def readiness(broker: ObservedNode, missing_since: dict[str, float], now: float) -> list[str]:
    """Why the node is not ready; ``missing_since`` remembers since when each assigned partition
    has not been open here (a partition being opened gets ``OPEN_GRACE_S``)."""
    reasons: list[str] = []
    if broker.stopping:
        return ["the node is shutting down"]
    s = broker.settings
    quorum = broker.quorum
    if s.is_controller and (quorum is None or quorum.leader_id is None):
        reasons.append("the metadata quorum has no leader")
    if not s.is_broker:
        return reasons
    lifecycle = broker.lifecycle
    if lifecycle is None or lifecycle.broker_epoch < 0:
        return [*reasons, "not registered with the controller"]
    if not lifecycle.ready:
        reasons.append("catching up with the metadata log")
    if lifecycle.fenced:
        reasons.append("fenced by the controller")
    if not broker.servers or not all(srv.serving for srv in broker.servers):
        reasons.append("the client listeners do not accept connections yet")
    metadata = broker.metadata
    if metadata is None:
        return [*reasons, "no metadata image"]
    image = metadata.image
    node = broker.node_id
    missing: list[str] = []
    seen: set[str] = set()
    for topic in list(image.topics.values()):
        for index, p in list(image.partitions(topic.topic_id).items()):
            if node in p.replicas and broker.replicas.get(topic.name, index) is None:
                name = f"{topic.name}-{index}"
                seen.add(name)
                if now - missing_since.setdefault(name, now) >= OPEN_GRACE_S or not lifecycle.ready:
                    missing.append(name)
    for name in [n for n in missing_since if n not in seen]:
        del missing_since[name]
    if missing:
        named = ", ".join(missing[:MAX_REASONS]) + (", ..." if len(missing) > MAX_REASONS else "")
        reasons.append(f"{len(missing)} partition(s) assigned here are not open: {named}")
    return reasons
