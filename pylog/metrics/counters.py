"""Counters the data path bumps: plain ints in dicts and lists, no locks, no label lookups.

They are written on the event loop and read by the metrics collector on another thread;
a read may miss the increment in flight, which the next scrape sees (counters only grow).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import Any

TIME_BUCKETS_MS: tuple[float, ...] = (
    0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000,
)
"""Upper bounds (ms) of the request time histograms; one more bucket holds the rest (+Inf)."""

_BOUNDS_NS = tuple(int(b * 1_000_000) for b in TIME_BUCKETS_MS)

FETCH = 1
FETCH_CONSUMER, FETCH_FOLLOWER = -1001, -1002
"""Fetch requests are counted apart, as Kafka's FetchConsumer and FetchFollower request metrics."""


class TimeHistogram:
    """Counts per bucket (not cumulative) and the sum, in nanoseconds."""

    __slots__ = ("buckets", "sum_ns")

    def __init__(self) -> None:
        self.buckets = [0] * (len(_BOUNDS_NS) + 1)
        self.sum_ns = 0

    def observe(self, ns: int) -> None:
        self.buckets[bisect_left(_BOUNDS_NS, ns)] += 1
        self.sum_ns += ns


class ApiStats:
    """One API's requests: count per version, request queue / local / remote / total time, the
    throttle times of throttled answers, error codes answered."""

    __slots__ = ("by_version", "errors", "local", "queue", "remote", "throttle", "total")

    def __init__(self) -> None:
        self.by_version: dict[int, int] = {}
        self.total = TimeHistogram()
        self.queue = TimeHistogram()
        self.local = TimeHistogram()
        self.remote = TimeHistogram()
        # only throttled answers are observed; every other request counts as a 0 ms throttle
        self.throttle = TimeHistogram()
        self.errors: dict[int, int] = {}


class RequestStats:
    """Requests served by a node's listeners, by API key.

    ``record`` runs once per request on the event loop: total time from dispatch to the encoded
    answer, local time (the handler's synchronous part), remote time (what the handler waited
    for: replicas for acks=all, a long poll, the controller) and request queue time (from the read
    that brought the request to its dispatch: requests before it in the same read, or a throttle
    that held it)."""

    __slots__ = ("apis",)

    def __init__(self) -> None:
        self.apis: dict[int, ApiStats] = {}

    def _api(self, api_key: int, request: Any) -> ApiStats:
        if api_key == FETCH:
            api_key = FETCH_FOLLOWER if _from_follower(request) else FETCH_CONSUMER
        stats = self.apis.get(api_key)
        if stats is None:
            stats = self.apis[api_key] = ApiStats()
        return stats

    def record(
        self,
        api_key: int,
        version: int,
        total_ns: int,
        local_ns: int,
        response: Any,
        request: Any = None,
        queue_ns: int = 0,
    ) -> None:
        stats = self._api(api_key, request)
        versions = stats.by_version
        versions[version] = versions.get(version, 0) + 1
        # the histograms' observe, inlined: this runs once per request on the event loop
        remote_ns = total_ns - local_ns if total_ns > local_ns else 0
        h = stats.total
        h.buckets[bisect_left(_BOUNDS_NS, total_ns)] += 1
        h.sum_ns += total_ns
        h = stats.local
        h.buckets[bisect_left(_BOUNDS_NS, local_ns)] += 1
        h.sum_ns += local_ns
        h = stats.remote
        h.buckets[bisect_left(_BOUNDS_NS, remote_ns)] += 1
        h.sum_ns += remote_ns
        h = stats.queue
        h.buckets[bisect_left(_BOUNDS_NS, queue_ns)] += 1
        h.sum_ns += queue_ns
        code = response.get("error_code", 0) if type(response) is dict else getattr(response, "error_code", 0)
        if code and isinstance(code, int):  # ErrorCode members too
            code = int(code)
            stats.errors[code] = stats.errors.get(code, 0) + 1

    def throttled(self, api_key: int, request: Any, throttle_ms: int) -> None:
        """A quota throttled the answer to this request by ``throttle_ms``."""
        self._api(api_key, request).throttle.observe(throttle_ms * 1_000_000)

    def failed(self, api_key: int, code: int) -> None:
        """A request answered with ``code`` for every entry (its handler failed)."""
        stats = self.apis.get(api_key)
        if stats is None:
            stats = self.apis[api_key] = ApiStats()
        stats.errors[code] = stats.errors.get(code, 0) + 1


def _from_follower(request: Any) -> bool:
    """A Fetch from a replica: ``replica_id`` (up to v14) or ``replica_state`` (v15+) names it."""
    if getattr(request, "replica_id", -1) >= 0:
        return True
    state = getattr(request, "replica_state", None)
    return state is not None and state.replica_id >= 0


class ListenerStats:
    """A listener's authentications (KIP-306 counts the failures as Kafka's socket server does)."""

    __slots__ = ("failed_authentications", "successful_authentications")

    def __init__(self) -> None:
        self.failed_authentications = 0
        self.successful_authentications = 0


class TopicStats:
    """Per topic: records and bytes appended as leader, bytes read by consumers and by followers."""

    __slots__ = ("bytes_in", "bytes_out", "messages_in", "replication_bytes_out")

    def __init__(self) -> None:
        self.messages_in: dict[str, int] = {}
        self.bytes_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.replication_bytes_out: dict[str, int] = {}

    def appended(self, topic: str, records: int, nbytes: int) -> None:
        self.messages_in[topic] = self.messages_in.get(topic, 0) + records
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + nbytes

    def fetched(self, wanted: Iterable[tuple[str, Any]], answer: Iterable[Any], *, follower: bool) -> None:
        """The bytes of one fetch answer: ``wanted`` (topic, partition fetch) pairs and ``answer``'s
        partition data (``.size`` bytes) in step."""
        out = self.replication_bytes_out if follower else self.bytes_out
        for (topic, _), data in zip(wanted, answer):
            size = data.size
            if size:
                out[topic] = out.get(topic, 0) + size

    def forget(self, known: Sequence[str] | set[str]) -> None:
        """Drop the counters of topics no longer in ``known`` (deleted topics)."""
        for counts in (self.messages_in, self.bytes_in, self.bytes_out, self.replication_bytes_out):
            for topic in [t for t in list(counts) if t not in known]:
                counts.pop(topic, None)
