"""Replication throttles (KIP-73): a byte-rate quota on the replica traffic of chosen partitions.

Theory of operation
-------------------
A broker has two quotas, Kafka's ``ReplicationQuotaManager``s: the *leader* quota bounds the bytes
it returns to followers' fetches, the *follower* quota the bytes its replica fetchers take. Each is
a simple ``SampledRate`` (the client quotas' windowed rate, over ``replication.quota.window.num``
windows of ``replication.quota.window.size.seconds``, measured over the time actually elapsed as
Kafka's ``SimpleRate`` is) with the bound ``leader.replication.throttled.rate`` /
``follower.replication.throttled.rate`` (bytes/s, dynamic per broker or cluster-wide).

Only some replicas are throttled: the topic configs ``leader.replication.throttled.replicas`` and
``follower.replication.throttled.replicas`` list ``partition:broker`` pairs (or ``*``, every
replica); a broker throttles a partition when it names this broker. A move tool names the current
replicas as leaders and the new ones as followers, so only the move's traffic is bounded.

The rule (``should_throttle``): a replica is held back when its partition is throttled, the rate
already exceeds the bound, and the follower is not in sync. A replica in the ISR is never held, so
a throttle cannot push it out of the ISR (Kafka's ``shouldLeaderThrottle`` / follower
``shouldFollowerThrottle``). A held partition is simply left out (the leader answers it without
records; the follower does not ask for it), and every throttled byte that does move is recorded,
so the rate over the windows stays near the bound; a fresh quota lets one window's worth through.
"""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Mapping

from pylog.quotas.rate import SampledRate, throttle_time_ms

log = logging.getLogger(__name__)

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
WINDOW_NUM = "replication.quota.window.num"
WINDOW_SIZE_SECONDS = "replication.quota.window.size.seconds"
UNBOUNDED = 2**63 - 1  # Kafka's default rate: Long.MAX_VALUE, no throttle
# the most one answer carries of a throttled partition (Kafka's replica.fetch.max.bytes default), so
# the rate is held to within one such answer whatever a follower asks for
THROTTLED_PARTITION_MAX_BYTES = 1 << 20

ALL_REPLICAS = "*"
Throttled = frozenset[int] | str  # throttled partition indexes of a topic, or ALL_REPLICAS
_ENTRY = re.compile(r"(\d+:\d+)?")


def throttled_replicas_error(name: str, value: str) -> str | None:
    """Why ``value`` is not a ``*.throttled.replicas`` list (Kafka's ThrottledReplicaListValidator),
    or None."""
    entries = [e.strip() for e in value.split(",")]
    if value.strip() == ALL_REPLICAS or all(_ENTRY.fullmatch(e) for e in entries):
        return None
    return (
        f"{name} must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


def parse_throttled_replicas(value: str | None, broker_id: int) -> Throttled:
    """The partitions of a topic that ``broker_id`` throttles, from a ``*.throttled.replicas``
    value (``"0:1,1:2"`` or ``"*"``); entries that are not ``partition:broker`` are ignored."""
    if not value or not value.strip():
        return frozenset()
    if value.strip() == ALL_REPLICAS:
        return ALL_REPLICAS
    out = set()
    for entry in value.split(","):
        part, sep, broker = entry.strip().partition(":")
        try:
            if sep and int(broker) == broker_id:
                out.add(int(part))
        except ValueError:
            log.warning("ignoring %r in a throttled replicas list: not partition:broker", entry)
    return frozenset(out)


class ReplicationQuota:
    """One direction's throttle (leader or follower): which partitions, and the byte rate."""

    def __init__(self, samples: int, window_ms: int, bound: float = UNBOUNDED) -> None:
        self.rate = SampledRate(samples, window_ms, simple=True)
        self.bound = float(bound)
        self._throttled: dict[str, Throttled] = {}
        self.bytes_total = 0  # every throttled byte recorded since the start (only grows; pylog.metrics)

    def update_bound(self, bytes_per_s: float) -> None:
        """A new ``*.replication.throttled.rate`` (the measured past is kept, as in Kafka)."""
        if bytes_per_s <= 0:
            raise ValueError(f"a replication throttle rate must be positive: {bytes_per_s}")
        self.bound = float(bytes_per_s)

    def mark_throttled(self, topic: str, partitions: Throttled) -> None:
        if partitions:
            self._throttled[topic] = partitions
        else:
            self._throttled.pop(topic, None)

    def set_topics(self, throttled: Mapping[str, Throttled]) -> None:
        self._throttled = {t: p for t, p in throttled.items() if p}

    def is_throttled(self, topic: str, partition: int) -> bool:
        parts = self._throttled.get(topic)
        return parts is not None and (parts == ALL_REPLICAS or partition in parts)

    @property
    def bounded(self) -> bool:
        return self.bound < UNBOUNDED

    def exceeded(self, now_ms: int) -> bool:
        """The measured rate is over the bound (Kafka's ``isQuotaExceeded``)."""
        return self.bounded and self.rate.measure(now_ms) > self.bound

    def record(self, nbytes: int, now_ms: int) -> None:
        """Throttled bytes that moved (recorded even past the bound: they were sent)."""
        if nbytes > 0:
            self.rate.record(nbytes, now_ms)
            self.bytes_total += nbytes

    def byte_rate(self, now_ms: int) -> float:
        """Throttled bytes/s as `exceeded` measures them (Kafka's ``byte-rate``), measured on a copy
        of the windows: a reader on another thread (a metrics scrape) changes nothing the throttle
        decides on."""
        return copy.deepcopy(self.rate).measure(now_ms)

    def delay_ms(self, now_ms: int) -> int:
        """How long until the rate is back within the bound if nothing moves (0 within it)."""
        if not self.bounded:
            return 0
        return throttle_time_ms(self.rate, self.bound, now_ms)


def should_throttle(quota: ReplicationQuota, topic: str, partition: int, in_sync: bool, now_ms: int) -> bool:
    """Hold this partition's replica traffic back now: throttled, over the rate, and not in sync."""
    return not in_sync and quota.is_throttled(topic, partition) and quota.exceeded(now_ms)
