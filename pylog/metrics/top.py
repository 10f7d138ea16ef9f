"""``pylog top``: a live table of a cluster's nodes, read from their metrics listeners.

Each refresh scrapes every node's ``/metrics`` and ``/v1/status/ready``; rates come from the
difference with the previous scrape (`rows` is the pure part: two snapshots in, table rows out).
Targets are metrics URLs (``http://HOST:PORT``) or the directory of a ``pylog cluster start``
cluster, whose nodes' properties name them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from pylog.clock import SYSTEM_CLOCK, Clock

Labels = tuple[tuple[str, str], ...]

COLUMNS = ("NODE", "STATE", "LEADERS", "REPLICAS", "URP", "MSG/S IN", "MB/S IN", "MB/S OUT", "REQ/S",
           "PRODUCE P99 MS", "LOOP LAG MS", "CPU %", "RSS MB")


@dataclass
class Snapshot:
    """One node's scrape: samples by name, then by their labels."""

    url: str
    at: float
    ready: str  # "ready", "not ready: <reason>", or "down: <error>"
    samples: dict[str, dict[Labels, float]] = field(default_factory=dict)

    def total(self, name: str, **where: str) -> float:
        """The sum of ``name``'s samples whose labels include ``where`` (an empty ``where`` value:
        the label must be absent, as ``{topic=""}`` in PromQL)."""
        out = 0.0
        for labels, v in self.samples.get(name, {}).items():
            d = dict(labels)
            if all(d.get(k, "") == x for k, x in where.items()):
                out += v
        return out

    def has(self, name: str) -> bool:
        return name in self.samples


def parse(url: str, at: float, ready: str, text: str) -> Snapshot:
    from prometheus_client.parser import text_string_to_metric_families

    snap = Snapshot(url, at, ready)
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            snap.samples.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return snap


def scrape(url: str, timeout_s: float = 5.0, clock: Clock = SYSTEM_CLOCK) -> Snapshot:
    at = clock.monotonic_s()
    try:
        with urllib.request.urlopen(url + "/metrics", timeout=timeout_s) as r:
            text = r.read().decode()
    except (OSError, ValueError) as exc:
        return Snapshot(url, at, f"down: {getattr(exc, 'reason', exc)}")
    try:
        with urllib.request.urlopen(url + "/v1/status/ready", timeout=timeout_s) as r:
            ready = json.loads(r.read())["status"]
    except urllib.error.HTTPError as exc:
        try:
            ready = "not ready: " + "; ".join(json.loads(exc.read())["reasons"])
        except (ValueError, KeyError):
            ready = f"not ready ({exc.code})"
    except (OSError, ValueError) as exc:
        ready = f"unknown: {exc}"
    return parse(url, at, ready, text)


def _rate(new: Snapshot, old: Snapshot | None, name: str, **where: str) -> float | None:
    if old is None or not old.has(name) or new.at <= old.at:
        return None
    return max(0.0, new.total(name, **where) - old.total(name, **where)) / (new.at - old.at)


def _p99_ms(new: Snapshot, old: Snapshot | None, name: str, request: str) -> float | None:
    """The 99th percentile of a histogram's observations between two scrapes (the bucket's bound)."""
    if old is None:
        return None
    buckets: dict[float, float] = {}
    for snap, sign in ((new, 1), (old, -1)):
        for labels, v in snap.samples.get(name + "_bucket", {}).items():
            d = dict(labels)
            if d.get("request") == request:
                le = float(d["le"])
                buckets[le] = buckets.get(le, 0.0) + sign * v
    if not buckets:
        return None
    bounds = sorted(buckets)
    count = buckets[bounds[-1]]
    if count <= 0:
        return None
    for le in bounds:
        if buckets[le] >= 0.99 * count:
            return le
    return math.inf


def rows(new: Sequence[Snapshot], old: dict[str, Snapshot]) -> list[list[str]]:
    """A table row per node: its state, partitions and the rates since its previous snapshot."""
    out = []
    for s in new:
        node = s.url.split("://", 1)[-1]
        ids = [dict(lv).get("node_id") for lv in s.samples.get("pylog_node_info", {})]
        if ids:
            node = f"{ids[0]} {node}"
        elif s.url in old:  # down now: the id it had
            ids = [dict(lv).get("node_id") for lv in old[s.url].samples.get("pylog_node_info", {})]
            node = f"{ids[0]} {node}" if ids else node
        if not s.samples:
            out.append([node, s.ready, *["-"] * (len(COLUMNS) - 2)])
            continue
        prev = old.get(s.url)
        mb = 1_000_000
        cpu = _rate(s, prev, "process_cpu_seconds_total")
        vals: list[float | None] = [
            s.total("kafka_server_replicamanager_leadercount"),
            s.total("kafka_server_replicamanager_partitioncount"),
            s.total("kafka_server_replicamanager_underreplicatedpartitions"),
            _rate(s, prev, "kafka_server_brokertopicmetrics_messagesin_total", topic=""),
            _mb(_rate(s, prev, "kafka_server_brokertopicmetrics_bytesin_total", topic=""), mb),
            _mb(_rate(s, prev, "kafka_server_brokertopicmetrics_bytesout_total", topic=""), mb),
            _rate(s, prev, "kafka_network_requestmetrics_requests_total"),
            _p99_ms(s, prev, "kafka_network_requestmetrics_totaltimems", "Produce"),
            s.total("pylog_eventloop_lag_last_seconds") * 1000,
            None if cpu is None else cpu * 100,
            s.total("process_resident_memory_bytes") / mb,
        ]
        out.append([node, s.ready, *(_fmt(v) for v in vals)])
    return out


def cluster_lines(new: Sequence[Snapshot]) -> list[str]:
    """The active controller, offline partitions and the groups with the most lag."""
    up = [s for s in new if s.samples]
    active = [s.url.split("://", 1)[-1] for s in up
              if s.total("kafka_controller_kafkacontroller_activecontrollercount") >= 1]
    offline = max((s.total("kafka_controller_kafkacontroller_offlinepartitionscount") for s in up), default=0)
    lags: dict[str, float] = {}
    for s in up:
        for labels, v in s.samples.get("kafka_consumergroup_lag_sum", {}).items():
            g = dict(labels).get("group", "")
            lags[g] = lags.get(g, 0.0) + v
    top = sorted(lags.items(), key=lambda kv: -kv[1])[:5]
    lines = [
        f"nodes up {len(up)}/{len(new)}   active controller {', '.join(active) or 'none'}   "
        f"offline partitions {offline:.0f}"
    ]
    if top:
        lines.append("group lag: " + ", ".join(f"{g} {v:,.0f}" for g, v in top))
    return lines


def _mb(v: float | None, mb: int) -> float | None:
    return None if v is None else v / mb


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if math.isinf(v):
        return ">max"
    if v >= 100 or v == int(v):
        return f"{v:,.0f}"
    return f"{v:.2f}"


def table(body: list[list[str]]) -> str:
    lines = [list(COLUMNS), *body]
    widths = [max(len(str(r[i])) for r in lines) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in lines)


def targets(given: Sequence[str]) -> list[str]:
    """Metrics URLs from URLs and cluster directories (their ``node-*.properties``)."""
    urls = []
    for t in given:
        if t.startswith(("http://", "https://")):
            urls.append(t.rstrip("/"))
            continue
        path = Path(t)
        props = sorted(path.glob("node-*.properties"), key=lambda p: int(p.stem.split("-")[1]))
        if not props:
            raise ValueError(f"{t} is neither http://HOST:PORT nor a cluster directory (no node-N.properties "
                             "files)")
        for p in props:
            for line in p.read_text("utf-8").splitlines():
                if line.startswith("pylog.metrics.listeners="):
                    first = line.split("=", 1)[1].split(",")[0].strip()
                    if first:
                        urls.append(first.rstrip("/"))
    if not urls:
        raise ValueError("no metrics listener to read (pylog.metrics.listeners unset?)")
    return urls


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("targets", nargs="+", metavar="URL_OR_DIR",
                   help="metrics listeners (http://HOST:PORT) or a `pylog cluster start` data directory")
    p.add_argument("-n", "--interval", type=float, default=2.0, help="seconds between refreshes")
    p.add_argument("--once", action="store_true", help="print one table (rates over one interval) and exit")


def run(args: argparse.Namespace) -> int:
    try:
        urls = targets(args.targets)
    except ValueError as exc:
        print(f"pylog: {exc}", file=sys.stderr)
        return 2
    old: dict[str, Snapshot] = {}
    with ThreadPoolExecutor(max(1, min(len(urls), 16))) as pool:
        try:
            first = True
            while True:
                new = list(pool.map(scrape, urls))
                if not (args.once and first):
                    text = "\n".join([*cluster_lines(new), "", table(rows(new, old))])
                    if not args.once:
                        print("\033[H\033[2J", end="")
                    print(text, flush=True)
                    if args.once:
                        return 0
                old = {s.url: s for s in new if s.samples}
                first = False
                time.sleep(max(args.interval, 0.1))
        except KeyboardInterrupt:
            return 0
