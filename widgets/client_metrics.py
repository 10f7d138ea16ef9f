"""Client metrics (KIP-714) for the notebook: what every client connected to a pylog cluster
reports about itself, through the SDK's `pylog.client_metrics`.

`clients` is one row per client instance, with its identity and a few telling metrics side by side
(queue and request latencies and throttle times of producers, fetch latencies and assigned
partitions of consumers, rates where the client reports them); `snapshot` is the same for the
`ClientMetricsWidget`, with every metric of every client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pylog._extras import require
from pylog.clock import SYSTEM_CLOCK, Clock

PREFIX = "org.apache.kafka."

# (short metric name, column label): the metrics shown beside each client, when it reports them
# (librdkafka's and the Java client's names under org.apache.kafka.)
HIGHLIGHTS: tuple[tuple[str, str], ...] = (
    ("producer.record.send.rate", "records sent/s"),
    ("producer.outgoing.byte.rate", "bytes out/s"),
    ("producer.record.queue.time.avg", "queue time ms"),
    ("producer.request.latency.avg", "request latency ms"),
    ("producer.node.request.latency.avg", "node latency ms"),
    ("producer.produce.throttle.time.avg", "throttle ms"),
    ("consumer.fetch.manager.records.consumed.rate", "records read/s"),
    ("consumer.fetch.manager.bytes.consumed.rate", "bytes in/s"),
    ("consumer.fetch.manager.fetch.latency.avg", "fetch latency ms"),
    ("consumer.node.request.latency.avg", "node latency ms"),
    ("consumer.coordinator.assigned.partitions", "partitions"),
    ("consumer.coordinator.rebalance.latency.avg", "rebalance ms"),
    ("consumer.coordinator.commit.latency.avg", "commit ms"),
    ("consumer.poll.idle.ratio.avg", "poll idle"),
    ("consumer.share.fetch.manager.fetch.latency.avg", "share fetch latency ms"),
)
IDENTITY = ("client_instance_id", "client_id", "kind", "client_software_name", "client_software_version",
            "client_source_address", "principal", "broker", "pushes", "push_interval_ms", "pushed_at_ms")


def short(metric: str) -> str:
    return metric[len(PREFIX):] if metric.startswith(PREFIX) else metric


def _kind(names: set[str]) -> str:
    kinds = (("consumer.share.", "share consumer"), ("producer.", "producer"), ("consumer.", "consumer"))
    for prefix, kind in kinds:
        if any(n.startswith(prefix) for n in names):
            return kind
    return "–" if not names else "other"


def _ms(value: Any) -> int | None:
    if value is None:
        return None
    try:
        return int(value.timestamp() * 1000)
    except (AttributeError, ValueError):
        return None


def snapshot(*, bootstrap_servers: Any, security: Mapping[str, Any] | None = None,
             clock: Clock = SYSTEM_CLOCK) -> dict[str, Any]:
    """Every client instance with its identity, highlighted values and all its metrics (JSON-able)."""
    import pylog

    table = pylog.client_metrics(bootstrap_servers=bootstrap_servers, security=security)
    by_client: dict[str, dict[str, Any]] = {}
    for row in table.to_pylist():
        c = by_client.get(row["client_instance_id"])
        if c is None:
            c = by_client[row["client_instance_id"]] = {
                **{k: row.get(k) for k in IDENTITY if k in row},
                "pushed_at_ms": _ms(row["pushed_at"]),
                "error": row["error"],
                "metrics": [],
            }
        if row["metric"] is not None:
            attrs = dict(row["attributes"] or [])
            point = {"metric": short(row["metric"]), "type": row["type"], "unit": row["unit"] or "",
                     "value": row["value"], "node": attrs.get("node.id")}
            c["metrics"].append(point)
    clients = []
    for c in by_client.values():
        names = {m["metric"] for m in c["metrics"]}
        c["kind"] = _kind(names)
        values: dict[str, list[float]] = {}
        for m in c["metrics"]:
            if m["value"] is not None:
                values.setdefault(m["metric"], []).append(m["value"])
        # a metric reported per broker connection (node.id) is shown as the mean over them
        c["highlights"] = {name: sum(v) / len(v) for name, v in values.items() if name in dict(HIGHLIGHTS)}
        c["metrics"].sort(key=lambda m: (m["metric"], str(m["node"])))
        clients.append(c)
    clients.sort(key=lambda c: (c["client_id"] or "", c["client_instance_id"]))
    shown = [{"metric": name, "label": label} for name, label in HIGHLIGHTS
             if any(name in c["highlights"] for c in clients)]
    return {"updated_ms": clock.wall_ms(), "clients": clients, "columns": shown}


def frame(snap: Mapping[str, Any]) -> Any:
    """A snapshot's clients as a pandas DataFrame, one row per client instance."""
    pd = require("pandas", "pylog.widgets.clients")
    columns = [*IDENTITY, *(c["metric"] for c in snap["columns"])]
    rows = [{**{k: c.get(k) for k in IDENTITY}, **c["highlights"]} for c in snap["clients"]]
    df = pd.DataFrame(rows, columns=columns)
    df["pushed_at"] = pd.to_datetime(df.pop("pushed_at_ms"), unit="ms", utc=True)
    return df


def clients(*, bootstrap_servers: Any, security: Mapping[str, Any] | None = None) -> Any:
    """One row per client instance of the cluster: who it is and the metrics it reports that tell most
    (see `HIGHLIGHTS`); every data point is in `pylog.client_metrics`."""
    return frame(snapshot(bootstrap_servers=bootstrap_servers, security=security))
