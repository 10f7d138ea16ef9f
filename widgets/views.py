"""The widgets: `LagWidget`, `PartitionsWidget`, `TopicBrowser`, `ClusterWidget`, `ClientMetricsWidget`
(anywidget; see the package doc).

Each holds its state in synced traits drawn by ``widget.js``, refreshes on demand (`refresh`, the
Refresh button) or live from a background thread (`start` / `stop`, the Pause / Resume button),
and carries a ``text/html`` rendering for front ends without widget support.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import traitlets
from pylog.widgets import browse, export, html
from pylog.widgets import client_metrics as clients_mod
from pylog.widgets import topic_partitions as partitions_mod
from pylog.widgets.admin import Admin
from pylog.widgets.burrow import LagWindow
from pylog.widgets.cluster import ClusterMonitor, brokers_frame
from pylog.widgets.consumer_lag import LagMonitor

from pylog._extras import require

if TYPE_CHECKING:
    import anywidget
else:
    anywidget = require("anywidget", "pylog.widgets")
_HERE = Path(__file__).parent


class _LiveWidget(anywidget.AnyWidget):
    """Shared plumbing: refresh under a lock, a stoppable refresh thread, HTML fallbacks."""

    _esm = _HERE / "widget.js"
    _css = _HERE / "widget.css"
    kind = traitlets.Unicode("").tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)
    running = traitlets.Bool(False).tag(sync=True)
    interval_s = traitlets.Float(2.0).tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._refresh_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop_event = threading.Event()
        self.on_msg(self._on_front_end_msg)

    def _fetch(self) -> None:
        raise NotImplementedError

    def refresh(self) -> None:
        """Query the source once and redraw; a failure is shown in the widget, not raised."""
        with self._refresh_lock:
            try:
                self._fetch()
                if self.error:
                    self.error = ""
            except Exception as exc:
                self.error = f"{type(exc).__name__}: {exc}"

    def start(self, interval_s: float | None = None) -> None:
        """Refresh every `interval_s` seconds in a background thread until `stop`."""
        if interval_s is not None:
            if interval_s <= 0:
                raise ValueError(f"interval_s must be positive, got {interval_s}")
            self.interval_s = float(interval_s)
        self.running = True

    def stop(self) -> None:
        """Stop live refreshing (waits for a refresh in progress)."""
        if getattr(self, "_thread", None) is not None or self.running:
            self.running = False

    @traitlets.observe("running")
    def _on_running(self, change: dict[str, Any]) -> None:
        if change["new"]:
            if self._thread is None or not self._thread.is_alive():
                self._stop_event = threading.Event()
                self._thread = threading.Thread(target=self._loop, args=(self._stop_event,),
                                                name=f"pylog-{self.kind}-refresh", daemon=True)
                self._thread.start()
        else:
            self._stop_event.set()
            thread = self._thread
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout=60)
            self._thread = None

    def _loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.refresh()
            stop.wait(self.interval_s)

    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "refresh":
            self.refresh()

    def close(self) -> None:
        self.stop()
        super().close()

    def _repr_html_(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._describe()}, running={self.running})"

    def _describe(self) -> str:
        return ""

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        data = {**data, "text/html": self._repr_html_()}
        return data, metadata

    def to_html(self, *, title: str | None = None) -> str:
        """This widget as a standalone, offline HTML page (its ESM, CSS and current state inlined)."""
        return export.to_html(self, title=title)

    def save_html(self, path: str | os.PathLike[str], *, title: str | None = None) -> str:
        return export.save_html(self, path, title=title)


class LagWidget(_LiveWidget):
    """Consumer lag of a group (or several, or all): state, members, coordinator, per-partition
    committed / log end / lag / owner / Burrow status, totals, and a lag-over-time chart.

    ``live=True`` (default) starts refreshing every `interval_s` seconds; `stop` ends it.
    ``window_size`` is Burrow's number of samples per partition. From a cluster
    (``bootstrap_servers``) or a pylog data directory (``data_dir``)."""

    snapshot = traitlets.Dict().tag(sync=True)
    history = traitlets.Dict().tag(sync=True)

    def __init__(self, group: str | list[str] | None = None, *, bootstrap_servers: Any = None,
                 data_dir: Any = None, interval_s: float = 2.0, live: bool = True, window_size: int = 10,
                 history_size: int = 240, security: Any = None) -> None:
        monitor = LagMonitor(group, bootstrap_servers=bootstrap_servers, data_dir=data_dir,
                             window=LagWindow(size=window_size), history_size=history_size, security=security)
        super().__init__(kind="lag", interval_s=float(interval_s))
        self.monitor = monitor
        self.refresh()
        if live:
            self.start()

    def _fetch(self) -> None:
        snap = self.monitor.poll()
        with self.hold_sync():
            self.history = self.monitor.history_json()
            self.snapshot = snap

    def _describe(self) -> str:
        groups = self.monitor.groups
        return f"group={'all' if groups is None else ', '.join(groups)!r}"

    def dataframe(self) -> Any:
        """The per-partition lag of the last refresh (as `pylog.widgets.lag`)."""
        return self.monitor.partitions_frame()

    def groups_dataframe(self) -> Any:
        return self.monitor.groups_frame()

    def close(self) -> None:
        super().close()
        monitor = getattr(self, "monitor", None)
        if monitor is not None:
            monitor.close()

    def _repr_html_(self) -> str:
        return html.lag_html(self.snapshot or {"groups": []}, self.history)


class PartitionsWidget(_LiveWidget):
    """A topic's partitions with a bar chart of records or bytes per partition (``metric``)."""

    snapshot = traitlets.Dict().tag(sync=True)
    metric = traitlets.Unicode("records").tag(sync=True)

    def __init__(self, topic: str, *, bootstrap_servers: Any = None, data_dir: Any = None,
                 metric: str = "records", interval_s: float = 5.0, live: bool = False,
                 security: Any = None) -> None:
        if bootstrap_servers is None and data_dir is None:
            raise ValueError("pass bootstrap_servers=, data_dir= or both")
        if metric not in ("records", "bytes"):
            raise ValueError(f"metric must be 'records' or 'bytes', got {metric!r}")
        super().__init__(kind="partitions", metric=metric, interval_s=float(interval_s))
        self.topic, self.bootstrap_servers, self.data_dir = topic, bootstrap_servers, data_dir
        self._admin = Admin(bootstrap_servers, security=security) if bootstrap_servers is not None else None
        self.refresh()
        if live:
            self.start()

    def _fetch(self) -> None:
        self.snapshot = partitions_mod.snapshot(self.topic, data_dir=self.data_dir, admin=self._admin)

    def _describe(self) -> str:
        return f"topic={self.topic!r}"

    def dataframe(self) -> Any:
        return partitions_mod.frame(self.snapshot)

    def close(self) -> None:
        super().close()
        admin = getattr(self, "_admin", None)
        if admin is not None:
            admin.close()

    def _repr_html_(self) -> str:
        return html.partitions_html(self.snapshot or {"partitions": [], "notes": []}, self.metric)


class TopicBrowser(_LiveWidget):
    """The latest `n` records of a topic, decoded (``decode``: auto / registry / utf8 / json / hex; Schema
    Registry wire-format records are decoded through ``schema_registry_url`` or the ``_schemas`` topic)."""

    topic = traitlets.Unicode("").tag(sync=True)
    n = traitlets.Int(20).tag(sync=True)
    decode = traitlets.Unicode("auto").tag(sync=True)
    records: traitlets.List[Any] = traitlets.List().tag(sync=True)

    def __init__(self, topic: str, n: int = 20, *, bootstrap_servers: Any = None, data_dir: Any = None,
                 decode: str = "auto", partitions: list[int] | None = None, interval_s: float = 5.0,
                 live: bool = False, schema_registry_url: str | None = None, security: Any = None) -> None:
        if decode not in browse.DECODINGS:
            raise ValueError(f"decode must be one of {browse.DECODINGS}, got {decode!r}")
        super().__init__(kind="browser", topic=topic, n=int(n), decode=decode, interval_s=float(interval_s))
        self.bootstrap_servers, self.data_dir, self.partitions = bootstrap_servers, data_dir, partitions
        self.schema_registry_url = schema_registry_url
        self.security = security
        self._table: Any = None
        self._decoded: dict[str, list[str | None]] = {}
        self.refresh()
        if live:
            self.start()

    def _fetch(self) -> None:
        self._table = browse.latest_table(self.topic, self.n, bootstrap_servers=self.bootstrap_servers,
                                          data_dir=self.data_dir, partitions=self.partitions,
                                          security=self.security)
        self._decoded = browse.registry_texts(
            self._table, self.topic, bootstrap_servers=self.bootstrap_servers, data_dir=self.data_dir,
            schema_registry_url=self.schema_registry_url, security=self.security)
        self.records = browse.records_json(self._table, self.decode, self._decoded)

    @traitlets.observe("decode")
    def _on_decode(self, change: dict[str, Any]) -> None:
        if change["new"] not in browse.DECODINGS:
            self.decode = change["old"]
            return
        if getattr(self, "_table", None) is not None:
            self.records = browse.records_json(self._table, change["new"], self._decoded)

    def _describe(self) -> str:
        return f"topic={self.topic!r}, n={self.n}"

    def dataframe(self) -> Any:
        pd = require("pandas", "the widget's DataFrame")

        df = pd.DataFrame(self.records, columns=browse.COLUMNS)
        df["timestamp"] = pd.to_datetime(df["timestamp"], unit="ms", utc=True)
        return df

    def _repr_html_(self) -> str:
        return html.records_html(self.topic, self.records)


class ClusterWidget(_LiveWidget):
    """Brokers with racks and per-broker replica and leader bars, under-replicated and offline
    partitions, and the reassignments in flight with a chart of how many are moving; live by
    default, so it follows a rebalance or a failed broker as it happens."""

    snapshot = traitlets.Dict().tag(sync=True)

    def __init__(self, *, bootstrap_servers: Any = None, interval_s: float = 2.0, live: bool = True,
                 security: Any = None) -> None:
        monitor = ClusterMonitor(bootstrap_servers=bootstrap_servers, security=security)
        super().__init__(kind="cluster", interval_s=float(interval_s))
        self.monitor = monitor
        self.refresh()
        if live:
            self.start()

    def _fetch(self) -> None:
        self.snapshot = self.monitor.poll()

    def _describe(self) -> str:
        return f"cluster={self.snapshot.get('cluster_id')!r}"

    def dataframe(self) -> Any:
        """The brokers of the last refresh (as `pylog.widgets.brokers`)."""
        return brokers_frame(self.snapshot)

    def close(self) -> None:
        super().close()
        monitor = getattr(self, "monitor", None)
        if monitor is not None:
            monitor.close()

    def _repr_html_(self) -> str:
        return html.cluster_html(self.snapshot or {"brokers": []})


class ClientMetricsWidget(_LiveWidget):
    """What every client of a pylog cluster reports about itself (KIP-714 client metrics): one row
    per client instance (client id, kind, software, address, broker, last push) with its telling
    metrics side by side, and every metric it pushed below. Clients push only what a CLIENT_METRICS
    subscription asks for (``metrics=*`` asks for everything), every ``interval.ms``."""

    snapshot = traitlets.Dict().tag(sync=True)

    def __init__(self, *, bootstrap_servers: Any, interval_s: float = 5.0, live: bool = True,
                 security: Any = None) -> None:
        if bootstrap_servers is None:
            raise ValueError("pass bootstrap_servers=: client metrics are read from a running cluster")
        super().__init__(kind="clients", interval_s=float(interval_s))
        self.bootstrap_servers, self.security = bootstrap_servers, security
        self.refresh()
        if live:
            self.start()

    def _fetch(self) -> None:
        self.snapshot = clients_mod.snapshot(bootstrap_servers=self.bootstrap_servers, security=self.security)

    def _describe(self) -> str:
        return f"clients={len((self.snapshot or {}).get('clients', []))}"

    def dataframe(self) -> Any:
        """The clients of the last refresh, one row each (as `pylog.widgets.clients`)."""
        return clients_mod.frame(self.snapshot or {"clients": [], "columns": []})

    def _repr_html_(self) -> str:
        return html.clients_html(self.snapshot or {"clients": [], "columns": []})
