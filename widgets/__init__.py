"""Notebook widgets for a Kafka cluster or a pylog data directory: consumer lag, partitions, records.

    import pylog.widgets as pw
    pw.lag_widget("billing", bootstrap_servers="localhost:9092")      # live, Burrow statuses, chart
    pw.partitions_widget("clicks", bootstrap_servers="localhost:9092", data_dir="./pylog-data")
    pw.topic_browser("clicks", n=20, bootstrap_servers="localhost:9092")
    pw.cluster_widget(bootstrap_servers="localhost:9092")   # brokers, racks, moves in flight, live
    pw.live_table("clicks", bootstrap_servers="localhost:9092")      # newest rows and rate, as they arrive
    df = pw.lag("billing", bootstrap_servers="localhost:9092")         # the same, as pandas DataFrames
    df = pw.lag("billing", data_dir="./pylog-data")                   # offline, from __consumer_offsets
    df = pw.partitions("clicks", data_dir="./pylog-data")
    pw.client_metrics_widget(bootstrap_servers="localhost:9092")     # what every client reports (KIP-714)
    pw.metric_history(metrics_urls=cluster.metrics_urls)            # throughput, latency, lag, ISR over time
    df = pw.clients(bootstrap_servers="localhost:9092")               # the same, one row per client

Built on anywidget rather than a custom ipywidgets 8 widget: anywidget ships its front end inside the
Python package (the ES module in ``widget.js`` is sent to the browser with the widget's state), so it
renders in JupyterLab, Notebook 7, VS Code and Colab with no lab extension to build or install and no
CDN; a hand-written ipywidgets widget would need a separately built and installed front-end package.
Charts are inline SVG drawn by that module. Every widget also carries a ``text/html`` rendering (static
tables and SVG) for front ends without widget support, and ``to_html()`` exports a standalone page.

The DataFrame forms (`lag`, `groups`, `partitions`, `latest_records`, `clients`) return pandas
DataFrames: small tables with list and nullable integer columns, meant to be looked at; unknown values
are <NA>. Everything goes through the Kafka protocol via the SDK's client (`pylog.widgets.admin` adds
the group and cluster APIs, `pylog.client_metrics` reads client metrics) or reads a data directory
read-only.
"""

from __future__ import annotations

from typing import Any

from pylog._lazy import lazy_exports

_LAZY = {
    "lag": "pylog.widgets.consumer_lag",
    "groups": "pylog.widgets.consumer_lag",
    "LagMonitor": "pylog.widgets.consumer_lag",
    "partitions": "pylog.widgets.topic_partitions",
    "latest_records": "pylog.widgets.browse",
    "LagWidget": "pylog.widgets.views",
    "PartitionsWidget": "pylog.widgets.views",
    "TopicBrowser": "pylog.widgets.views",
    "ClusterWidget": "pylog.widgets.views",
    "ClusterMonitor": "pylog.widgets.cluster",
    "brokers": "pylog.widgets.cluster",
    "LiveTable": "pylog.widgets.live",
    "Status": "pylog.widgets.burrow",
    "OffsetSample": "pylog.widgets.burrow",
    "LagWindow": "pylog.widgets.burrow",
    "evaluate_partition": "pylog.widgets.burrow",
    "evaluate_group": "pylog.widgets.burrow",
    "to_html": "pylog.widgets.export",
    "clients": "pylog.widgets.client_metrics",
    "ClientMetricsWidget": "pylog.widgets.views",
    "MetricsHistory": "pylog.widgets.history",
    "MetricHistoryWidget": "pylog.widgets.history_view",
}

__all__ = sorted([*_LAZY, "client_metrics_widget", "cluster_widget", "lag_widget", "live_table",
                  "metric_history", "partitions_widget", "topic_browser"])


def lag_widget(group: str | list[str] | None = None, *, bootstrap_servers: Any = None, data_dir: Any = None,
               interval_s: float = 2.0, live: bool = True, security: Any = None) -> Any:
    """A `LagWidget` for `group` (None: all groups), refreshing every `interval_s` seconds.
    ``security``: Kafka client security settings, as for `pylog.read_topic` (every widget takes it)."""
    from pylog.widgets.views import LagWidget

    return LagWidget(group, bootstrap_servers=bootstrap_servers, data_dir=data_dir, interval_s=interval_s,
                     live=live, security=security)


def partitions_widget(topic: str, *, bootstrap_servers: Any = None, data_dir: Any = None,
                      metric: str = "records", security: Any = None) -> Any:
    """A `PartitionsWidget` for `topic` from a cluster, a data directory or both."""
    from pylog.widgets.views import PartitionsWidget

    return PartitionsWidget(topic, bootstrap_servers=bootstrap_servers, data_dir=data_dir, metric=metric,
                            security=security)


def topic_browser(topic: str, n: int = 20, *, bootstrap_servers: Any = None, data_dir: Any = None,
                  decode: str = "auto", schema_registry_url: str | None = None, security: Any = None) -> Any:
    """A `TopicBrowser` of the latest `n` records of `topic`."""
    from pylog.widgets.views import TopicBrowser

    return TopicBrowser(topic, n, bootstrap_servers=bootstrap_servers, data_dir=data_dir, decode=decode,
                        schema_registry_url=schema_registry_url, security=security)


def client_metrics_widget(*, bootstrap_servers: Any, interval_s: float = 5.0, live: bool = True,
                          security: Any = None) -> Any:
    """A `ClientMetricsWidget`: what every client of the cluster reports (KIP-714), refreshing every
    `interval_s` seconds."""
    from pylog.widgets.views import ClientMetricsWidget

    return ClientMetricsWidget(bootstrap_servers=bootstrap_servers, interval_s=interval_s, live=live,
                               security=security)


def live_table(topic: str, n: int = 20, *, bootstrap_servers: Any, group: str | None = None,
               starting_offsets: Any = "latest", decode: str = "auto", interval_s: float = 1.0,
               schema_registry_url: str | None = None, security: Any = None) -> Any:
    """A `LiveTable` following `topic` (`pylog.follow`): its newest `n` records and a records-per-second
    sparkline, refreshed as records arrive; with ``group`` the follower commits what it showed."""
    from pylog.widgets.live import LiveTable

    return LiveTable(topic, n, bootstrap_servers=bootstrap_servers, group=group,
                     starting_offsets=starting_offsets, decode=decode, interval_s=interval_s,
                     schema_registry_url=schema_registry_url, security=security)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


def cluster_widget(*, bootstrap_servers: Any, interval_s: float = 2.0, live: bool = True,
                   security: Any = None, metrics_urls: Any = None) -> Any:
    """A `ClusterWidget`: brokers (racks, replica and leader counts as bars), under-replicated and
    offline partitions, reassignments in flight; refreshing every `interval_s` seconds. With
    ``metrics_urls`` (the nodes' metrics listeners) a tab beside it holds their `metric_history`."""
    from pylog.widgets.views import ClusterWidget

    cluster = ClusterWidget(bootstrap_servers=bootstrap_servers, interval_s=interval_s, live=live,
                            security=security)
    if metrics_urls is None:
        return cluster
    import ipywidgets

    history = metric_history(metrics_urls=metrics_urls, live=live)
    return ipywidgets.Tab(children=[cluster, history], titles=("Cluster", "Metric history"))


def metric_history(*, metrics_urls: Any, interval_s: float = 5.0, window_s: float = 600.0,
                   live: bool = True) -> Any:
    """A `MetricHistoryWidget`: messages and bytes per second per topic, request time percentiles,
    lag per group and partitions at risk over the last `window_s` seconds, scraped from the nodes'
    metrics listeners (``LocalCluster.metrics_urls``, ``LocalBroker.metrics_url``, or
    ``http://HOST:PORT`` strings) every `interval_s` seconds."""
    from pylog.widgets.history_view import MetricHistoryWidget

    return MetricHistoryWidget(metrics_urls, interval_s=interval_s, window_s=window_s, live=live)
