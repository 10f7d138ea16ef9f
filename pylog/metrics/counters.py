"""Counters the data path bumps: plain ints in dicts and lists, no locks, no label lookups.

They are written on the event loop and read by the metrics collector on another thread;
a read may miss the increment in flight, which the next scrape sees (counters only grow).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Sequence
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
    """One API's requests: count per version, the times Kafka splits a request into (request queue,
    local, remote, response queue, response send, and their total), the throttle times of
    throttled answers, error codes answered."""

    __slots__ = (
        "by_version", "errors", "local", "queue", "remote", "response_queue", "response_send",
        "throttle", "total",
    )

    def __init__(self) -> None:
        self.by_version: dict[int, int] = {}
        self.total = TimeHistogram()
        self.queue = TimeHistogram()
        self.local = TimeHistogram()
        self.remote = TimeHistogram()
        self.response_queue = TimeHistogram()
        self.response_send = TimeHistogram()
        # only throttled answers are observed; every other request counts as a 0 ms throttle
        self.throttle = TimeHistogram()
        self.errors: dict[int, int] = {}

    def sent(self, read_ns: int, ready_ns: int, written_ns: int, done_ns: int) -> None:
        """The answer read at ``read_ns`` was ready (encoded) at ``ready_ns``, handed to the
        transport at ``written_ns``, and left its buffer by ``done_ns``."""
        # inlined observes: this runs once per answer on the event loop
        ns = written_ns - ready_ns if written_ns > ready_ns else 0
        h = self.response_queue
        h.buckets[bisect_left(_BOUNDS_NS, ns)] += 1
        h.sum_ns += ns
        ns = done_ns - written_ns if done_ns > written_ns else 0
        h = self.response_send
        h.buckets[bisect_left(_BOUNDS_NS, ns)] += 1
        h.sum_ns += ns
        ns = done_ns - read_ns if done_ns > read_ns else 0
        h = self.total
        h.buckets[bisect_left(_BOUNDS_NS, ns)] += 1
        h.sum_ns += ns

    def unanswered(self, total_ns: int) -> None:
        """A request answered by silence (acks=0) or by a close: nothing queued, nothing sent."""
        _observe(self.response_queue, 0)
        _observe(self.response_send, 0)
        _observe(self.total, total_ns)


def _observe(h: TimeHistogram, ns: int) -> None:
    h.buckets[bisect_left(_BOUNDS_NS, ns)] += 1
    h.sum_ns += ns


PRODUCE = 0
MAX_PARTITION_ERROR_SERIES = 10_000
"""Partition error counters kept at most; past it errors count under topic "" and partition -1."""

MAX_THROTTLED_CLIENTS = 10_000
"""(request, user, client id) throttle counters kept at most; past it under user and client id ""."""


class RequestStats:
    """Requests served by a node's listeners, by API key.

    ``record`` runs once per request on the event loop, when its answer is ready: local time (the
    handler's synchronous part), remote time (what the handler waited for: replicas for acks=all,
    a long poll, the controller) and request queue time (from the read that brought the request to
    its dispatch: requests before it in the same read, or a throttle that held it). The connection
    then reports the response queue and send times and the total (`ApiStats.sent`).

    Produce and Fetch answers carry an error code per partition: those count in ``errors`` as
    Kafka's ErrorsPerSec counts them, and in ``partition_errors`` by (API key, topic, partition,
    code)."""

    __slots__ = ("apis", "partition_errors", "throttled_clients")

    def __init__(self) -> None:
        self.apis: dict[int, ApiStats] = {}
        self.partition_errors: dict[tuple[int, str, int, int], int] = {}
        # (API key, user, client id) -> [answers throttled, throttle ms]
        self.throttled_clients: dict[tuple[int, str, str], list[int]] = {}

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
        handled_ns: int,
        local_ns: int,
        response: Any,
        request: Any = None,
        queue_ns: int = 0,
    ) -> ApiStats:
        """Count a request whose answer is ready ``handled_ns`` after its dispatch; its stats, for
        the times of sending the answer."""
        stats = self._api(api_key, request)
        versions = stats.by_version
        versions[version] = versions.get(version, 0) + 1
        # the histograms' observe, inlined: this runs once per request on the event loop
        remote_ns = handled_ns - local_ns if handled_ns > local_ns else 0
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
        if api_key == PRODUCE:  # one pass over the answer's partitions, none over records
            for t in getattr(response, "responses", ()):
                for p in t.partition_responses:
                    if p.error_code:
                        self._partition_error(api_key, t.name, p.index, p.error_code, stats.errors)
        elif api_key == FETCH:
            for t in getattr(response, "responses", ()):
                for p in t.partitions:
                    if p.error_code:
                        self._partition_error(api_key, t.topic, p.partition_index, p.error_code, stats.errors)
        return stats

    def _partition_error(
        self, api_key: int, topic: str, index: int, code: int, errors: dict[int, int]
    ) -> None:
        """A partition of a Produce or Fetch answer carried ``code``."""
        code = int(code)
        errors[code] = errors.get(code, 0) + 1
        counts = self.partition_errors
        key = (api_key, topic, index, code)
        if key not in counts and len(counts) >= MAX_PARTITION_ERROR_SERIES:
            key = (api_key, "", -1, code)
        counts[key] = counts.get(key, 0) + 1

    def forget(self, known: set[str]) -> None:
        """Drop the partition error counters of topics not in ``known`` (deleted, or never there)."""
        counts = self.partition_errors
        for key in [k for k in list(counts) if k[1] not in known and k[1]]:
            counts.pop(key, None)

    def throttled(
        self, api_key: int, request: Any, throttle_ms: int, user: str = "", client_id: str = ""
    ) -> None:
        """A quota throttled the answer to this request (of ``user``'s ``client_id``) by ``throttle_ms``."""
        self._api(api_key, request).throttle.observe(throttle_ms * 1_000_000)
        clients = self.throttled_clients
        key = (api_key, user, client_id)
        counts = clients.get(key)
        if counts is None:
            if len(clients) >= MAX_THROTTLED_CLIENTS:
                key = (api_key, "", "")
            counts = clients.setdefault(key, [0, 0])
        counts[0] += 1
        counts[1] += throttle_ms

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


def _none_adding(topic: str, index: int) -> Collection[int]:
    return ()


class TopicStats:
    """Per topic: records and bytes appended as leader, bytes read by consumers and by followers,
    bytes this broker appended as a follower; of those, the bytes read by or written to replicas a
    reassignment is adding (Kafka's ReassignmentBytesOut / ReassignmentBytesIn)."""

    __slots__ = ("adding_replicas", "bytes_in", "bytes_out", "messages_in", "reassignment_bytes_in",
                 "reassignment_bytes_out", "replication_bytes_in", "replication_bytes_out")

    def __init__(self) -> None:
        self.messages_in: dict[str, int] = {}
        self.bytes_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.replication_bytes_out: dict[str, int] = {}
        self.reassignment_bytes_out = 0
        self.replication_bytes_in: dict[str, int] = {}
        self.reassignment_bytes_in = 0
        # the replicas a reassignment is adding to a partition (the metadata's addingReplicas); the
        # node's metrics set it to read the node's metadata image
        self.adding_replicas: Callable[[str, int], Collection[int]] = _none_adding

    def appended(self, topic: str, records: int, nbytes: int) -> None:
        self.messages_in[topic] = self.messages_in.get(topic, 0) + records
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + nbytes

    def fetched(
        self, wanted: Iterable[tuple[str, Any]], answer: Iterable[Any], *, follower: bool,
        replica_id: int = -1,
    ) -> None:
        """The bytes of one fetch answer (of follower ``replica_id``): ``wanted`` (topic, partition
        fetch) pairs and ``answer``'s partition data (``.size`` bytes) in step."""
        out = self.replication_bytes_out if follower else self.bytes_out
        adding = self.adding_replicas
        for (topic, fetch), data in zip(wanted, answer):
            size = data.size
            if size:
                out[topic] = out.get(topic, 0) + size
                if follower and replica_id in adding(topic, fetch.partition):
                    self.reassignment_bytes_out += size

    def replicated(self, topic: str, partition: int, nbytes: int, node_id: int) -> None:
        """Follower ``node_id`` appended ``nbytes`` of its leader's batches to ``partition``."""
        self.replication_bytes_in[topic] = self.replication_bytes_in.get(topic, 0) + nbytes
        if node_id in self.adding_replicas(topic, partition):
            self.reassignment_bytes_in += nbytes

    def forget(self, known: Sequence[str] | set[str]) -> None:
        """Drop the counters of topics no longer in ``known`` (deleted topics)."""
        for counts in (self.messages_in, self.bytes_in, self.bytes_out, self.replication_bytes_out,
                       self.replication_bytes_in):
            for topic in [t for t in list(counts) if t not in known]:
                counts.pop(topic, None)
