"""Metric history for notebooks: the nodes' ``/metrics`` scraped every few seconds into a bounded
ring buffer, turned into time series of throughput per topic, request time percentiles, lag per
group and partitions at risk.

The core is pure: `reduce_scrape` turns one node's exposition text into a small `NodeSample`
(only the families plotted, already aggregated per topic, request or group by the broker, so no
per-partition work), and `throughput`, `latency`, `group_lag` and `partition_health` turn a
sequence of scrapes into series, rates from counter deltas and percentiles from the histogram
buckets' deltas, as Prometheus' ``rate`` and ``histogram_quantile`` compute them. `MetricsHistory`
is the thin shell: HTTP scrapes on a timer thread, the ring buffer, callbacks for a widget.
"""

from __future__ import annotations

import itertools
import math
import re
import threading
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pylog.clock import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:
    import pandas

# counter family (as sampled, with _total) -> the series' name
COUNTERS = {
    "kafka_server_brokertopicmetrics_messagesin_total": "messages_in",
    "kafka_server_brokertopicmetrics_bytesin_total": "bytes_in",
    "kafka_server_brokertopicmetrics_bytesout_total": "bytes_out",
}
REQUEST_TIME = "kafka_network_requestmetrics_totaltimems"
GROUP_LAG = "kafka_consumergroup_lag_sum"
# gauge -> (series name, how nodes combine): each broker counts the partitions it leads; offline
# partitions are counted by every controller alike, so the cluster's figure is their maximum
HEALTH = {
    "kafka_server_replicamanager_underreplicatedpartitions": ("under_replicated", "sum"),
    "kafka_server_replicamanager_underminisrpartitioncount": ("under_min_isr", "sum"),
    "kafka_controller_kafkacontroller_offlinepartitionscount": ("offline", "max"),
}
NODE_INFO = "pylog_node_info"
DEFAULT_REQUESTS = ("Produce", "FetchConsumer", "FetchFollower")
DEFAULT_QUANTILES = (0.5, 0.99)

# Only these families' lines reach the parser: a node with many partitions exposes thousands of
# per-partition lines that the history never reads, and a regular expression drops them in C.
_WANTED = re.compile(
    r"^(?:# (?:HELP|TYPE) )?(?:" + "|".join(re.escape(n.removesuffix("_total")) for n in COUNTERS)
    + "|" + "|".join(re.escape(n) for n in (REQUEST_TIME, GROUP_LAG, NODE_INFO, *HEALTH))
    + r")[_{ ][^\n]*$", re.M)

Series = tuple[list[float], list[float | None]]  # (unix times, values; None where unknown)


@dataclass(frozen=True)
class NodeSample:
    """One node's scrape, reduced to what the history plots. ``error`` says why a node gave nothing."""

    url: str
    at: float
    error: str | None = None
    node_id: str | None = None
    counters: dict[tuple[str, str], float] = field(default_factory=dict)  # (series, topic) -> total
    buckets: dict[str, dict[float, float]] = field(default_factory=dict)  # request -> {le: cumulative}
    lag: dict[str, float] = field(default_factory=dict)  # group -> lag
    health: dict[str, float] = field(default_factory=dict)  # series -> partitions

    @property
    def up(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Scrape:
    """Every node's sample from one round."""

    at: float
    nodes: dict[str, NodeSample]


def reduce_scrape(url: str, at: float, text: str) -> NodeSample:
    """The families the history plots out of one node's Prometheus text exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = "\n".join(m.group(0) for m in _WANTED.finditer(text))
    counters: dict[tuple[str, str], float] = {}
    buckets: dict[str, dict[float, float]] = {}
    lag: dict[str, float] = {}
    health: dict[str, float] = {}
    node_id = None
    try:
        families = list(text_string_to_metric_families(wanted + "\n"))
    except ValueError as exc:
        return NodeSample(url, at, error=f"unreadable metrics: {exc}")
    for fam in families:
        for s in fam.samples:
            if s.name in COUNTERS:
                counters[(COUNTERS[s.name], s.labels.get("topic", ""))] = s.value
            elif s.name == REQUEST_TIME + "_bucket":
                req = buckets.setdefault(s.labels.get("request", ""), {})
                le = float(s.labels["le"])
                req[le] = req.get(le, 0.0) + s.value
            elif s.name == GROUP_LAG:
                lag[s.labels.get("group", "")] = s.value
            elif s.name in HEALTH:
                health[HEALTH[s.name][0]] = s.value
            elif s.name == NODE_INFO:
                node_id = s.labels.get("node_id")
    return NodeSample(url, at, node_id=node_id, counters=counters, buckets=buckets, lag=lag, health=health)


def _pairs(scrapes: Sequence[Scrape]) -> Iterable[tuple[Scrape, Scrape]]:
    return itertools.pairwise(scrapes)


def _delta(new: float, old: float | None) -> float:
    """A counter's increase; one that went down was reset (a node restarted) and counts from zero."""
    if old is None or new < old:
        return new
    return new - old


def throughput(scrapes: Sequence[Scrape]) -> dict[tuple[str, str], Series]:
    """{(series, topic): per-second rates} between consecutive scrapes, summed over the nodes up in
    both (``topic`` "" is all topics). A topic new since the previous scrape counts from zero."""
    keys = sorted({k for s in scrapes for n in s.nodes.values() for k in n.counters})
    out: dict[tuple[str, str], Series] = {k: ([], []) for k in keys}
    for old, new in _pairs(scrapes):
        rates: dict[tuple[str, str], float] = {}
        measured = False
        for url, n in new.nodes.items():
            o = old.nodes.get(url)
            if not n.up or o is None or not o.up or n.at <= o.at:
                continue
            measured = True
            dt = n.at - o.at
            for k, v in n.counters.items():
                rates[k] = rates.get(k, 0.0) + _delta(v, o.counters.get(k)) / dt
        for k in keys:
            out[k][0].append(new.at)
            out[k][1].append(rates.get(k, 0.0) if measured else None)
    return out


def histogram_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """The ``q`` quantile of cumulative ``{le: count}`` buckets, interpolated linearly inside the
    bucket holding it (Prometheus' ``histogram_quantile``); None without observations."""
    bounds = sorted(buckets)
    if not bounds:
        return None
    total = buckets[bounds[-1]]
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for le in bounds:
        count = buckets[le]
        if count >= rank:
            if math.isinf(le):
                return lower
            if count == below:
                return le
            return lower + (le - lower) * (rank - below) / (count - below)
        lower, below = le, count
    return lower


def latency(scrapes: Sequence[Scrape], requests: Sequence[str] = DEFAULT_REQUESTS,
            quantiles: Sequence[float] = DEFAULT_QUANTILES) -> dict[tuple[str, float], Series]:
    """{(request, q): milliseconds} of the requests answered between consecutive scrapes, from the
    ``totaltimems`` buckets' increase summed over the nodes; None where none was answered."""
    out: dict[tuple[str, float], Series] = {(r, q): ([], []) for r in requests for q in quantiles}
    for old, new in _pairs(scrapes):
        for r in requests:
            merged: dict[float, float] = {}
            for url, n in new.nodes.items():
                o = old.nodes.get(url)
                if not n.up or o is None or not o.up:
                    continue
                prev = o.buckets.get(r, {})
                for le, v in n.buckets.get(r, {}).items():
                    merged[le] = merged.get(le, 0.0) + _delta(v, prev.get(le))
            for q in quantiles:
                out[(r, q)][0].append(new.at)
                out[(r, q)][1].append(histogram_quantile(q, merged))
    return {k: v for k, v in out.items() if any(x is not None for x in v[1])}


def group_lag(scrapes: Sequence[Scrape]) -> dict[str, Series]:
    """{group: lag} at each scrape: each group's coordinator exports it, so the nodes' sum; None
    while no node is up."""
    groups = sorted({g for s in scrapes for n in s.nodes.values() for g in n.lag})
    out: dict[str, Series] = {g: ([], []) for g in groups}
    for s in scrapes:
        up = [n for n in s.nodes.values() if n.up]
        for g in groups:
            out[g][0].append(s.at)
            out[g][1].append(sum(n.lag.get(g, 0.0) for n in up) if up else None)
    return out


def partition_health(scrapes: Sequence[Scrape]) -> dict[str, Series]:
    """{under_replicated | under_min_isr | offline: partitions} at each scrape."""
    out: dict[str, Series] = {name: ([], []) for name, _ in HEALTH.values()}
    for s in scrapes:
        up = [n for n in s.nodes.values() if n.up]
        for name, how in HEALTH.values():
            vals = [n.health.get(name, 0.0) for n in up]
            out[name][0].append(s.at)
            out[name][1].append((max(vals) if how == "max" else sum(vals)) if up else None)
    return out


def node_status(scrape: Scrape | None) -> list[dict[str, Any]]:
    """Each node of a scrape: its URL, node id and whether it answered (and why not)."""
    if scrape is None:
        return []
    return [{"url": n.url, "node_id": n.node_id, "up": n.up, "error": n.error} for n in scrape.nodes.values()]


def fetch_sample(url: str, timeout_s: float, clock: Clock = SYSTEM_CLOCK) -> NodeSample:
    """Scrape one node; an unreachable or failing node is a sample with ``error`` set, never raises."""
    at = clock.wall_ms() / 1000
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=timeout_s) as r:
            text = r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return NodeSample(url, at, error=f"HTTP {exc.code}")
    except (OSError, ValueError) as exc:
        return NodeSample(url, at, error=f"unreachable: {getattr(exc, 'reason', exc)}")
    return reduce_scrape(url, at, text)


def _urls(metrics_urls: str | Sequence[str]) -> list[str]:
    urls = metrics_urls.split(",") if isinstance(metrics_urls, str) else list(metrics_urls)
    urls = [u.strip() if "://" in u else "http://" + u.strip() for u in urls if u and u.strip()]
    if not urls:
        raise ValueError("pass metrics_urls=: the nodes' metrics listeners (http://HOST:PORT), e.g. "
                         "LocalCluster.metrics_urls or LocalBroker.metrics_url")
    return urls


class MetricsHistory:
    """The last ``window_s`` seconds of the nodes' metrics, scraped every ``interval_s`` seconds by a
    background thread (`start`) or on demand (`scrape`). Series are computed when asked for."""

    def __init__(self, metrics_urls: str | Sequence[str], *, interval_s: float = 5.0, window_s: float = 600.0,
                 timeout_s: float = 2.0, requests: Sequence[str] = DEFAULT_REQUESTS,
                 quantiles: Sequence[float] = DEFAULT_QUANTILES, clock: Clock = SYSTEM_CLOCK) -> None:
        if interval_s <= 0 or window_s <= 0:
            raise ValueError("interval_s and window_s must be positive")
        self.clock = clock
        self.urls = _urls(metrics_urls)
        self.interval_s, self.window_s, self.timeout_s = float(interval_s), float(window_s), float(timeout_s)
        self.requests, self.quantiles = tuple(requests), tuple(quantiles)
        # one more than the window holds at the interval, so a full window still has its first rate
        self._buffer: deque[Scrape] = deque(maxlen=int(window_s / interval_s) + 2)
        self._lock = threading.Lock()
        self._listeners: list[Callable[[MetricsHistory], None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(max_workers=min(8, len(self.urls)),
                                        thread_name_prefix="pylog-history")

    # the buffer -----------------------------------------------------------------------------------
    def add(self, scrape: Scrape) -> None:
        """Append a round and drop the ones older than the window (from the newest round's time)."""
        with self._lock:
            self._buffer.append(scrape)
            while self._buffer and self._buffer[0].at < scrape.at - self.window_s - self.interval_s:
                self._buffer.popleft()

    def scrapes(self) -> list[Scrape]:
        with self._lock:
            return list(self._buffer)

    def latest(self) -> Scrape | None:
        with self._lock:
            return self._buffer[-1] if self._buffer else None

    def series(self) -> dict[str, Any]:
        """Every plotted series of the buffer: ``throughput``, ``latency``, ``lag``, ``health``."""
        s = self.scrapes()
        return {"throughput": throughput(s), "latency": latency(s, self.requests, self.quantiles),
                "lag": group_lag(s), "health": partition_health(s),
                "nodes": node_status(s[-1] if s else None)}

    def dataframe(self) -> pandas.DataFrame:
        """The series in long form: panel, series, time (UTC), value."""
        from pylog._extras import require

        pd = require("pandas", "pylog.widgets")
        rows: list[tuple[str, str, float, float | None]] = []
        for panel, by_key in self.series().items():
            if panel == "nodes":
                continue
            for key, (ts, vs) in by_key.items():
                name = key if isinstance(key, str) else "/".join(str(k) for k in key)
                rows.extend((panel, name, t, v) for t, v in zip(ts, vs))
        frame = pd.DataFrame(rows, columns=["panel", "series", "time", "value"])
        frame["time"] = pd.to_datetime(frame["time"], unit="s", utc=True)
        return frame

    # the shell ------------------------------------------------------------------------------------
    def scrape(self) -> Scrape:
        """Scrape every node now (in parallel), add the round and tell the listeners."""
        at = self.clock.wall_ms() / 1000
        samples = list(self._pool.map(lambda u: fetch_sample(u, self.timeout_s, self.clock), self.urls))
        scrape = Scrape(at, {s.url: s for s in samples})
        self.add(scrape)
        for f in list(self._listeners):
            f(self)
        return scrape

    def on_update(self, callback: Callable[[MetricsHistory], None]) -> None:
        self._listeners.append(callback)

    def start(self) -> MetricsHistory:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="pylog-metric-history", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            started = self.clock.monotonic_s()
            try:
                self.scrape()
            except Exception:  # a listener's failure must not end the history
                import logging

                logging.getLogger(__name__).exception("metric history refresh failed")
            self._stop.wait(max(0.0, self.interval_s - (self.clock.monotonic_s() - started)))

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self.timeout_s + 5)

    def close(self) -> None:
        self.stop()
        self._pool.shutdown(wait=False)
