"""The metric history against a real broker: scraped every 0.5 s from its metrics listener while
kafka-python produces and a consumer group reads, commits and stops. The messages-in rate integrated
over time gives back what was produced, the group's lag grows while it is stopped, and the widget's
charts render in headless Chromium with a node that cannot be reached shown as such."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pylog.widgets as pw
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic
from pylog.widgets.history import MetricsHistory
from test_widgets_browser import attr, rendered_dom
from widgets_helpers import commit, create_topic, produce


def wait_for_scrapes(history: MetricsHistory, n: int) -> None:
    """Until `n` more rounds than now are in the buffer (or 30 s)."""
    start = len(history.scrapes())
    deadline = time.monotonic() + 30
    while len(history.scrapes()) < start + n:
        assert time.monotonic() < deadline, "the history stopped scraping"
        time.sleep(0.1)


def consume_and_commit(bootstrap: str, group: str, topic: str, expected: int) -> None:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    try:
        seen, deadline = 0, time.monotonic() + 30
        while seen < expected:
            assert time.monotonic() < deadline, f"consumed {seen} of {expected}"
            seen += sum(len(r) for r in consumer.poll(timeout_ms=500).values())
        consumer.commit()
    finally:
        consumer.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_history_follows_throughput_and_a_stopped_groups_lag(broker) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap_servers
    create_topic(bs, "meter", 3)
    history = MetricsHistory(broker.metrics_url, interval_s=0.5, window_s=120)
    try:
        history.start()
        wait_for_scrapes(history, 2)
        produced = 0
        for _ in range(4):
            produce(bs, "meter", [100, 150, 50], start=produced)
            produced += 300
            time.sleep(0.8)
        consume_and_commit(bs, "meter-readers", "meter", produced)
        wait_for_scrapes(history, 2)
        stopped_at = time.time()
        for _ in range(3):
            produce(bs, "meter", [100, 100, 100], start=produced)
            produced += 300
            wait_for_scrapes(history, 2)
    finally:
        history.close()
    scrapes = history.scrapes()
    assert all(s.nodes[broker.metrics_url].up for s in scrapes)
    series = history.series()

    # sum of rate * dt over the history: every record produced, counted once
    times, rates = series["throughput"][("messages_in", "meter")]
    starts = [s.at for s in scrapes]
    counted = sum((r or 0.0) * (t - t0) for t0, t, r in zip(starts, times, rates))
    assert abs(counted - produced) <= 0.02 * produced, (counted, produced)
    _, bytes_in = series["throughput"][("bytes_in", "meter")]
    _, bytes_out = series["throughput"][("bytes_out", "meter")]
    assert max(r or 0 for r in bytes_in) > 0 and max(r or 0 for r in bytes_out) > 0  # the group read
    assert any(v is not None and v > 0 for v in series["latency"][("Produce", 0.99)][1])

    # the group committed everything, then stopped while 900 more records came in
    times, lags = series["lag"]["meter-readers"]
    before = [v for t, v in zip(times, lags) if t < stopped_at]
    after = [v for t, v in zip(times, lags) if t >= stopped_at]
    assert before[-1] == 0
    assert after == sorted(after) and after[-1] == 900
    assert len({v for v in after if v and v < 900}) >= 1  # seen growing, not only at its end
    assert {n: v[1][-1] for n, v in series["health"].items()} == {
        "under_replicated": 0, "under_min_isr": 0, "offline": 0}
    frame = history.dataframe()
    assert set(frame["panel"]) == {"throughput", "latency", "lag", "health"}


def test_history_widget_renders_its_charts_and_a_node_down(broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap_servers
    create_topic(bs, "gauge", 2)
    down = f"http://127.0.0.1:{free_port()}"
    widget = pw.metric_history(metrics_urls=[broker.metrics_url, down], interval_s=0.5, live=False)
    try:
        commit(bs, "gauge-readers", {("gauge", 0): 0, ("gauge", 1): 0})
        widget.refresh()
        for i in range(3):
            produce(bs, "gauge", [40, 20], start=60 * i)
            time.sleep(0.5)
            widget.refresh()
        live_names = [t.name for t in widget.figure.data]
        page = Path(widget.save_html(tmp_path / "history.html"))
        expected = widget.to_figure()
        tabs = pw.cluster_widget(bootstrap_servers=bs, metrics_urls=broker.metrics_url, live=False)
        try:
            assert tabs.titles == ("Cluster", "Metric history")
            assert isinstance(tabs.children[1], pw.MetricHistoryWidget)
        finally:
            for child in tabs.children:
                child.close()
    finally:
        widget.close()
    names = [t.name for t in expected.data]
    assert names == live_names  # the live figure and the export draw the same lines
    for name in ("gauge", "gauge in", "Produce p99", "gauge-readers", "under-replicated", "offline"):
        assert name in names
    lag = next(t for t in expected.data if t.name == "gauge-readers")
    assert list(lag.y) == [0, 60, 120, 180]

    dom = rendered_dom(page)
    status = dom.find(attr("data-field", "status"))
    assert status.find(attr("data-node", broker.metrics_url)).attrs["data-up"] == "1"
    gone = status.find(attr("data-node", down))
    assert gone.attrs["data-up"] == "0" and "unreachable" in gone.text()
    assert dom.find_all(lambda n: n.tag == "svg" and "main-svg" in n.attrs.get("class", ""))
    legend = [n.attrs["data-unformatted"] for n in dom.find_all(
        lambda n: n.tag == "text" and n.attrs.get("class") == "legendtext")]
    assert legend == names
    traces = dom.find_all(lambda n: n.tag == "g" and n.attrs.get("class", "").startswith("trace scatter"))
    assert len(traces) == len(names)
    for trace in traces:  # every line drawn (plotly joins collinear points into one segment)
        line = trace.find(lambda n: n.tag == "path" and n.attrs.get("class") == "js-line")
        assert line.attrs["d"].startswith("M") and "L" in line.attrs["d"]


def test_history_of_a_cluster_sums_its_nodes_and_sees_a_follower_stall(tmp_path: Path) -> None:
    import pylog

    config = {"replica.lag.time.max.ms": "2000", "num.partitions": "3", "default.replication.factor": "3"}
    with pylog.LocalCluster(3, data_dir=tmp_path / "cluster", config=config) as cluster:
        bs = cluster.bootstrap_servers
        admin = KafkaAdminClient(bootstrap_servers=bs)
        try:  # on every node, each leading two partitions
            admin.create_topics([NewTopic("spread", num_partitions=6, replication_factor=3)])
        finally:
            admin.close()
        history = MetricsHistory(cluster.metrics_urls, interval_s=0.5, window_s=120, timeout_s=1.0)
        try:
            history.start()
            wait_for_scrapes(history, 2)
            produce(bs, "spread", [50] * 6)
            wait_for_scrapes(history, 2)
            follower = next(n for n in sorted(cluster.nodes) if n != cluster.controller_id())
            paused_url = cluster.node(follower).metrics_url
            cluster.pause(follower)
            try:
                deadline = time.monotonic() + 30
                while not history.series()["health"]["under_replicated"][1][-1]:
                    assert time.monotonic() < deadline, "no under-replicated partition seen"
                    time.sleep(0.25)
            finally:
                cluster.resume(follower)
            deadline = time.monotonic() + 45
            while history.series()["health"]["under_replicated"][1][-1] != 0:
                assert time.monotonic() < deadline, "partitions stayed under-replicated"
                time.sleep(0.25)
        finally:
            history.close()
    scrapes = history.scrapes()
    assert {len(s.nodes) for s in scrapes} == {3}
    assert any(not s.nodes[paused_url].up and "unreachable" in (s.nodes[paused_url].error or "")
               for s in scrapes)  # the paused node's scrapes timed out
    series = history.series()
    times, rates = series["throughput"][("messages_in", "spread")]
    starts = [s.at for s in scrapes]
    counted = sum((r or 0.0) * (t - t0) for t0, t, r in zip(starts, times, rates))
    assert abs(counted - 300) <= 6, counted  # 300 records, led by three nodes, summed
    urp = [v for v in series["health"]["under_replicated"][1] if v is not None]
    assert urp[0] == 0 and max(urp) > 0 and urp[-1] == 0
