"""`MetricHistoryWidget`: a `MetricsHistory` drawn as plotly charts that follow the scrapes live.

plotly's ``FigureWidget`` is itself an anywidget (its front end ships inside the plotly package), so
the charts render in JupyterLab, Notebook 7 and VS Code with no server, extension or CDN; `to_html`
writes the same figure as a standalone page with plotly.js inlined. Above the charts a line per node
says whether it answered the last scrape; a node that did not is shown as such, not raised.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from pylog.widgets.history import DEFAULT_QUANTILES, DEFAULT_REQUESTS, MetricsHistory, node_status

from pylog._extras import require

if TYPE_CHECKING:
    import ipywidgets
else:
    ipywidgets = require("ipywidgets", "pylog.widgets")

# panel -> (row, col, title); the rows of the subplot grid
PANELS = {
    "messages": (1, 1, "Messages in /s"),
    "bytes": (1, 2, "Bytes in and out /s"),
    "latency": (2, 1, "Request time (ms)"),
    "lag": (2, 2, "Consumer lag (records)"),
    "health": (3, 1, "Partitions at risk"),
}
MAX_LINES = 10  # topics and groups drawn at most, the busiest / most lagging
HEALTH_NAMES = {"under_replicated": "under-replicated", "under_min_isr": "under min ISR",
                "offline": "offline"}


def _times(ts: Sequence[float]) -> list[str]:
    """Unix times as plotly's date strings, local time (what the notebook's clock says)."""
    return [dt.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] for t in ts]


def _top(totals: dict[str, float], n: int) -> set[str]:
    """The `n` names with the largest totals, ignoring those at zero."""
    ranked = sorted((v, k) for k, v in totals.items() if v > 0)
    return {k for _, k in ranked[-n:]} if n > 0 else set()


def traces(series: dict[str, Any], max_lines: int = MAX_LINES) -> list[tuple[str, str, list[float],
                                                                           list[float | None]]]:
    """(panel, trace name, times, values) for every line to draw, in a stable order: the
    `max_lines` busiest topics of the window (internal ``__`` topics and the all-topics total left
    out) and the `max_lines` groups with the most lag, so a large cluster stays readable."""
    out: list[tuple[str, str, list[float], list[float | None]]] = []
    traffic: dict[str, float] = {}
    for (_, topic), (_, vs) in series["throughput"].items():
        if topic and not topic.startswith("__"):
            traffic[topic] = traffic.get(topic, 0.0) + sum(v or 0.0 for v in vs)
    busy = _top(traffic, max_lines)
    for (name, topic), (ts, vs) in sorted(series["throughput"].items()):
        if topic not in busy:
            continue
        if name == "messages_in":
            out.append(("messages", topic, ts, vs))
        else:
            out.append(("bytes", f"{topic} {name.removeprefix('bytes_')}", ts, vs))
    for (request, q), (ts, vs) in series["latency"].items():
        out.append(("latency", f"{request} p{q * 100:g}", ts, vs))
    lagging = _top({g: max((v or 0.0 for v in vs), default=0.0) for g, (_, vs) in series["lag"].items()},
                   max_lines)
    for group, (ts, vs) in sorted(series["lag"].items()):
        if group in lagging or (len(series["lag"]) <= max_lines):
            out.append(("lag", group, ts, vs))
    for name, (ts, vs) in series["health"].items():
        out.append(("health", HEALTH_NAMES.get(name, name), ts, vs))
    return out


def status_html(nodes: list[dict[str, Any]], running: bool, interval_s: float) -> str:
    """One badge per node: up with its id, or down with the reason."""
    if not nodes:
        return '<div class="pylog-history-status" data-field="status">no scrape yet</div>'
    parts = []
    for n in nodes:
        label = f"node {n['node_id']}" if n.get("node_id") else n["url"]
        if n["up"]:
            parts.append(f'<span data-node="{escape(n["url"])}" data-up="1" style="color:#1a7f37">'
                         f'&#9679; {escape(label)}</span>')
        else:
            parts.append(f'<span data-node="{escape(n["url"])}" data-up="0" style="color:#cf222e">'
                         f'&#9679; {escape(n["url"])}: {escape(str(n["error"]))}</span>')
    mode = f"every {interval_s:g} s" if running else "paused"
    return (f'<div class="pylog-history-status" data-field="status">{" &nbsp; ".join(parts)}'
            f' &nbsp; <span style="color:#666">({mode})</span></div>')


class MetricHistoryWidget(ipywidgets.VBox):
    """Throughput per topic, request time percentiles, lag per group and partitions at risk over the
    last ``window_s`` seconds, scraped from ``metrics_urls`` every ``interval_s`` seconds."""

    def __init__(self, metrics_urls: str | Sequence[str], *, interval_s: float = 5.0, window_s: float = 600.0,
                 live: bool = True, requests: Sequence[str] = DEFAULT_REQUESTS,
                 quantiles: Sequence[float] = DEFAULT_QUANTILES,
                 history: MetricsHistory | None = None) -> None:
        go = require("plotly.graph_objects", "pylog.widgets")
        self.history = history or MetricsHistory(metrics_urls, interval_s=interval_s, window_s=window_s,
                                                  requests=requests, quantiles=quantiles)
        self._draw_lock = threading.Lock()
        self._keys: list[tuple[str, str]] = []
        self.figure = go.FigureWidget(self._empty_figure())
        self.status = ipywidgets.HTML(status_html([], False, self.history.interval_s))
        self.toggle = ipywidgets.Button(description="Pause" if live else "Resume", layout={"width": "90px"})
        self.toggle.on_click(lambda _b: self.stop() if self.history.running else self.start())
        super().__init__([ipywidgets.HBox([self.toggle, self.status]), self.figure])
        self.history.on_update(lambda _h: self.redraw())
        if live:
            self.start()

    def _empty_figure(self) -> Any:
        subplots = require("plotly.subplots", "pylog.widgets")
        titles = [t for _, _, t in sorted(PANELS.values())]
        fig = subplots.make_subplots(rows=3, cols=2, subplot_titles=titles, vertical_spacing=0.09,
                                     horizontal_spacing=0.08,
                                     specs=[[{}, {}], [{}, {}], [{"colspan": 2}, None]])
        fig.update_layout(height=780, margin={"l": 50, "r": 20, "t": 40, "b": 30},
                          legend={"orientation": "h", "y": -0.06}, template="plotly_white")
        return fig

    def to_figure(self) -> Any:
        """A fresh `plotly.graph_objects.Figure` of the current series (for export)."""
        fig = self._empty_figure()
        for panel, name, ts, vs in traces(self.history.series()):
            row, col, _ = PANELS[panel]
            fig.add_scatter(x=_times(ts), y=vs, name=name, mode="lines", row=row, col=col)
        return fig

    def redraw(self) -> None:
        """Redraw from the history: new points on the lines there are, the figure rebuilt when a
        topic, request or group appears."""
        series = self.history.series()
        lines = traces(series)
        with self._draw_lock:
            keys = [(panel, name) for panel, name, _, _ in lines]
            with self.figure.batch_update():
                if keys != self._keys:
                    self.figure.data = ()
                    for panel, name, ts, vs in lines:
                        row, col, _ = PANELS[panel]
                        self.figure.add_scatter(x=_times(ts), y=vs, name=name, mode="lines", row=row, col=col)
                    self._keys = keys
                else:
                    for trace, (_, _, ts, vs) in zip(self.figure.data, lines):
                        trace.x, trace.y = _times(ts), vs
            self.status.value = status_html(series["nodes"], self.history.running, self.history.interval_s)

    def refresh(self) -> None:
        """Scrape now (the listeners redraw)."""
        self.history.scrape()

    def start(self) -> None:
        self.history.start()
        self.toggle.description = "Pause"

    def stop(self) -> None:
        self.history.stop()
        self.toggle.description = "Resume"
        self.status.value = status_html(node_status(self.history.latest()), False, self.history.interval_s)

    def close(self) -> None:
        self.history.close()
        for w in (self.figure, self.status, self.toggle, *self.children):
            w.close()
        super().close()

    def dataframe(self) -> Any:
        return self.history.dataframe()

    def to_html(self) -> str:
        """A standalone page (no network) of the current charts, drawn by plotly's own widget front end
        as in a notebook, with the node status above."""
        from pylog.widgets import export

        go = require("plotly.graph_objects", "pylog.widgets")
        # a FigureWidget carries later changes as messages to its views; a new one holds them in its state
        figure = go.FigureWidget(self.to_figure())
        try:
            page = export.to_html(figure, title="pylog metric history")
        finally:
            figure.close()
        status = status_html(self.history.series()["nodes"], self.history.running, self.history.interval_s)
        return page.replace("<body>", "<body>" + status, 1)

    def save_html(self, path: str | os.PathLike[str]) -> str:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_html())
        return os.fspath(path)
