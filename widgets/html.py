"""Static HTML of the views, drawn in Python: the ``text/html`` fallback a front end without
widget support (nbviewer, GitHub, a saved notebook) shows. Inline SVG, no scripts."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from html import escape
from typing import Any

_STATUS_CLASS = {"OK": "ok", "WARN": "warn", "ERR": "err", "STOP": "err", "STALL": "err"}
_STYLE = (
    "<style>.pylog-static table{border-collapse:collapse;margin:4px 0 10px}"
    ".pylog-static th,.pylog-static td{padding:2px 8px;border-bottom:1px solid #e5e7eb;text-align:left}"
    ".pylog-static td.n{text-align:right}.pylog-static .b{padding:0 6px;border-radius:8px;font-size:11px;"
    "font-weight:700}.pylog-static .ok{background:#d1fae5;color:#065f46}.pylog-static .warn{background:"
    "#fef3c7;color:#92400e}.pylog-static .err{background:#fee2e2;color:#991b1b}.pylog-static .m{color:"
    "#6b7280}</style>"
)


def _n(v: Any) -> str:
    return "–" if v is None else f"{v:,}"


def _bytes(v: Any) -> str:
    if v is None:
        return "–"
    value, unit = float(v), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"


def _time(ms: Any) -> str:
    if ms is None:
        return "–"
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _badge(status: str | None) -> str:
    if not status:
        return '<span class="b m">–</span>'
    cls = _STATUS_CLASS.get(status, "m")
    return f'<span class="b {cls}" data-status="{escape(status)}">{escape(status)}</span>'


def _table(cls: str, head: Sequence[str], rows: Sequence[Sequence[tuple[str, str, bool]]]) -> str:
    """rows of (column key, html, numeric) cells."""
    out = [f'<table class="{cls}"><thead><tr>', *(f"<th>{escape(h)}</th>" for h in head),
           "</tr></thead><tbody>"]
    for row in rows:
        out.append("<tr>")
        out.extend(f'<td data-col="{k}"{" class=n" if num else ""}>{v}</td>' for k, v, num in row)
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def sparkline(points: Sequence[Sequence[float]], width: int = 320, height: int = 60) -> str:
    """An SVG polyline of [(t_ms, value)]."""
    if not points:
        return ""
    t0, t1 = points[0][0], points[-1][0]
    vmax = max(1, *(p[1] for p in points))
    xs = [4 + (0 if t1 == t0 else (p[0] - t0) / (t1 - t0)) * (width - 8) for p in points]
    ys = [height - 4 - p[1] / vmax * (height - 8) for p in points]
    pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys))
    return (f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
            f'<polyline points="{pts}" fill="none" stroke="#3b82f6" stroke-width="2"/>'
            f'<text x="4" y="10" font-size="10" fill="#6b7280">max {vmax:,}</text></svg>')


def bars(items: Sequence[tuple[str, Any, str]], width: int = 420) -> str:
    """Horizontal SVG bars of (label, value, text)."""
    height = max(24, 22 * len(items) + 4)
    vmax = max([1, *(v or 0 for _l, v, _t in items)])
    out = [f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}">']
    for i, (label, value, text) in enumerate(items):
        y = 4 + i * 22
        w = (value or 0) / vmax * (width - 130)
        out.append(f'<text x="34" y="{y + 13}" font-size="11" text-anchor="end">{escape(label)}</text>'
                   f'<rect x="40" y="{y}" width="{w:.1f}" height="16" fill="#3b82f6"/>'
                   f'<text x="{46 + w:.1f}" y="{y + 13}" font-size="11">{escape(text)}</text>')
    out.append("</svg>")
    return "".join(out)


def lag_html(snapshot: dict[str, Any], history: dict[str, Sequence[Sequence[int]]]) -> str:
    parts = [_STYLE, '<div class="pylog-static" data-kind="lag"><b>Consumer lag</b> '
             f'<span class="m">updated {_time(snapshot.get("updated_ms") or None)}</span>']
    if snapshot.get("error"):
        parts.append(f'<div class="err">{escape(snapshot["error"])}</div>')
    if not snapshot.get("groups"):
        parts.append('<div class="m">no consumer groups</div>')
    for g in snapshot.get("groups", []):
        parts.append(
            f'<div data-group="{escape(g["group"])}"><p><b>{escape(g["group"])}</b> {_badge(g["status"])} '
            f'state <b>{escape(g["state"])}</b> · members <b>{len(g["members"])}</b> · coordinator '
            f'<b>{escape(g["coordinator"])}</b> · total lag '
            f'<b data-field="total-lag">{_n(g["total_lag"])}</b> · max lag '
            f'<b data-field="max-lag">{_n(g["max_lag"])}</b></p>')
        parts.append(sparkline(history.get(g["group"], [])))
        rows = [[("topic", escape(p["topic"]), False), ("partition", str(p["partition"]), True),
                 ("committed", _n(p["committed"]), True), ("log_end", _n(p["log_end"]), True),
                 ("lag", _n(p["lag"]), True), ("status", _badge(p["status"]), False),
                 ("owner", escape(f'{p["client_id"] or p["member_id"]} / {p["host"]}') if p["member_id"]
                  else "–", False)] for p in g["partitions"]]
        parts.append(_table("pl-lag-partitions", ["topic", "partition", "committed", "log end", "lag",
                                                  "status", "owner (client / host)"], rows))
        parts.append("</div>")
    parts.append("</div>")
    return "".join(parts)


def partitions_html(snapshot: dict[str, Any], metric: str = "records") -> str:
    rows_in = snapshot.get("partitions", [])
    fmt = _bytes if metric == "bytes" else _n
    items = [(f'p{r["partition"]}', r.get(metric), fmt(r.get(metric))) for r in rows_in]

    def lst(v: Any) -> str:
        return "–" if v is None else escape(", ".join(map(str, v)))

    rows = [[("partition", str(r["partition"]), True), ("leader", _n(r["leader"]), True),
             ("replicas", lst(r["replicas"]), False), ("isr", lst(r["isr"]), False),
             ("log_start_offset", _n(r["log_start_offset"]), True),
             ("log_end_offset", _n(r["log_end_offset"]), True),
             ("records", _n(r["records"]), True), ("bytes", _bytes(r["bytes"]), True),
             ("segments", _n(r["segments"]), True)] for r in rows_in]
    notes = "".join(f'<div class="m">{escape(n)}</div>' for n in snapshot.get("notes", []))
    return (f'{_STYLE}<div class="pylog-static" data-kind="partitions"><b>Partitions of '
            f'{escape(str(snapshot.get("topic")))}</b><br>{bars(items)}'
            + _table("pl-partitions", ["partition", "leader", "replicas", "ISR", "log start", "log end",
                                       "records", "bytes", "segments"], rows) + notes + "</div>")


def records_html(topic: str, records: Sequence[dict[str, Any]]) -> str:
    def code(v: Any) -> str:
        return "<code>null</code>" if v is None else f"<code>{escape(str(v))}</code>"

    rows = [[("partition", str(r["partition"]), True), ("offset", str(r["offset"]), True),
             ("timestamp", _time(r["timestamp"]), False), ("key", code(r["key"]), False),
             ("value", code(r["value"]), False)] for r in records]
    body = _table("pl-records", ["partition", "offset", "timestamp", "key", "value"], rows) if rows else \
        '<div class="m">no records</div>'
    return (f'{_STYLE}<div class="pylog-static" data-kind="browser"><b>Latest records of {escape(topic)}</b>'
            f"{body}</div>")


def cluster_html(snapshot: dict[str, Any]) -> str:
    brokers = snapshot.get("brokers", [])
    controller = snapshot.get("controller_id")
    urp, offline, moving = (snapshot.get(k, []) for k in ("under_replicated", "offline", "reassignments"))
    rows = [[("node_id", f'{b["node_id"]}{"*" if b["node_id"] == controller else ""}', True),
             ("host", escape(f'{b["host"]}:{b["port"]}'), False),
             ("rack", escape(str(b["rack"] or "–")), False),
             ("replicas", _n(b["replicas"]), True), ("leaders", _n(b["leaders"]), True)] for b in brokers]

    def lst(v: Any) -> str:
        return escape(", ".join(map(str, v))) if v else "–"

    def parts(items: Sequence[dict[str, Any]], cls: str) -> str:
        return _table(cls, ["topic", "partition", "leader", "replicas", "ISR", "adding", "removing"], [
            [("topic", escape(p["topic"]), False), ("partition", str(p["partition"]), True),
             ("leader", str(p["leader"]), True), ("replicas", lst(p["replicas"]), False),
             ("isr", lst(p["isr"]), False), ("adding", lst(p["adding_replicas"]), False),
             ("removing", lst(p["removing_replicas"]), False)] for p in items])

    name = escape(str(snapshot.get("cluster_id")))
    summary = (f'controller {controller} · {_n(snapshot.get("partitions"))} partitions · '
               f"{len(urp)} under-replicated · {len(offline)} offline · {len(moving)} moving")
    out = [_STYLE, f'<div class="pylog-static" data-kind="cluster"><b>Cluster {name}</b> ',
           f'<span class="m">{summary}</span><br>',
           bars([(f'b{b["node_id"]}', b["replicas"], f'{b["replicas"]} replicas, {b["leaders"]} leaders')
                 for b in brokers]),
           _table("pl-brokers", ["broker", "address", "rack", "replicas", "leaders"], rows)]
    for title, items, cls in (("Reassignments in progress", moving, "pl-moving"),
                              ("Under-replicated", urp, "pl-urp"), ("Offline", offline, "pl-offline")):
        if items:
            out.append(f"<b>{title}</b>" + parts(items, cls))
    out.append("</div>")
    return "".join(out)


def _num(v: Any) -> str:
    if v is None:
        return "–"
    return f"{v:,.0f}" if abs(v) >= 100 or float(v).is_integer() else f"{v:,.3g}"


def clients_html(snapshot: dict[str, Any]) -> str:
    columns = snapshot.get("columns", [])
    parts = [_STYLE, '<div class="pylog-static" data-kind="clients"><b>Client metrics</b> '
             f'<span class="m">updated {_time(snapshot.get("updated_ms"))}</span>']
    clients = snapshot.get("clients", [])
    if not clients:
        parts.append('<div class="m">no client has asked for a telemetry subscription yet</div></div>')
        return "".join(parts)
    rows = [[("client_id", escape(str(c["client_id"] or "–")), False), ("kind", escape(c["kind"]), False),
             ("software", escape(f'{c["client_software_name"] or "?"} {c["client_software_version"] or ""}'),
              False),
             ("address", escape(str(c["client_source_address"] or "–")), False),
             ("broker", str(c["broker"]), True), ("pushed_at", _time(c["pushed_at_ms"]), False),
             *((col["metric"], _num(c["highlights"].get(col["metric"])), True) for col in columns)]
            for c in clients]
    parts.append(_table("pl-clients", ["client id", "kind", "software", "address", "broker", "last push",
                                       *(col["label"] for col in columns)], rows))
    for c in clients:
        metric_rows = [[("metric", escape(m["metric"]), False), ("node", escape(str(m["node"] or "")), False),
                        ("value", _num(m["value"]), True), ("unit", escape(m["unit"]), False)]
                       for m in c["metrics"]]
        if metric_rows:
            parts.append(f'<details data-client="{escape(c["client_instance_id"])}"><summary>'
                         f'{escape(str(c["client_id"]))}: {len(metric_rows)} metrics</summary>'
                         + _table("pl-client-metrics", ["metric", "node", "value", "unit"], metric_rows)
                         + "</details>")
    parts.append("</div>")
    return "".join(parts)


def live_html(topic: str, records: Sequence[dict[str, Any]], rates: Sequence[Sequence[float]],
              total: int) -> str:
    rate = rates[-1][1] if rates else 0
    head = (f'{_STYLE}<div class="pylog-static" data-kind="live"><b>Following {escape(topic)}</b> '
            f'<span class="m">records <b data-field="total">{_n(total)}</b> · now '
            f'<b data-field="rate">{rate:,.1f}</b>/s</span><br>{sparkline(rates)}</div>')
    return head + records_html(topic, records)
