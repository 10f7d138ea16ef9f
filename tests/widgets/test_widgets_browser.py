"""The widgets' front end in a real browser: each widget is exported as a standalone page (its ESM,
CSS and state inlined, no network), rendered by headless Chromium (Debian's ``chromium``), and the
numbers are read off the rendered DOM and checked against the broker, asked through kafka-python."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from pylog.widgets.views import LagWidget, PartitionsWidget, TopicBrowser
from widgets_helpers import create_topic, member, produce, to_commit

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
         "--virtual-time-budget=15000"]
VOID = {"meta", "br", "hr", "img", "input", "link", "area", "base", "col", "embed", "source", "wbr"}


class Node:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Node | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node | str] = []

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self) -> Iterator[Node]:
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.iter()

    def find_all(self, pred: Callable[[Node], bool]) -> list[Node]:
        return [n for n in self.iter() if pred(n)]

    def find(self, pred: Callable[[Node], bool]) -> Node:
        found = self.find_all(pred)
        assert found, "element not found in the rendered page"
        return found[0]


class _Tree(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = self.cur = Node("#document", {}, None)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs}, self.cur)
        self.cur.children.append(node)
        if tag not in VOID:
            self.cur = node

    def handle_endtag(self, tag: str) -> None:
        n: Node | None = self.cur
        while n is not None and n.tag != tag:
            n = n.parent
        if n is not None and n.parent is not None:
            self.cur = n.parent

    def handle_data(self, data: str) -> None:
        self.cur.children.append(data)


def rendered_dom(page: Path) -> Node:
    """`page` loaded in headless Chromium, scripts run, the DOM serialised and parsed."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: the browser test needs Debian's chromium package "
                    "(apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="pylog-chromium-") as profile:
        proc = subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                               page.as_uri()], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"chromium exited with {proc.returncode}: {proc.stderr[-2000:]}"
    tree = _Tree()
    tree.feed(proc.stdout)
    body = tree.root.find(lambda n: n.tag == "body")
    assert body.attrs.get("data-rendered") == "ok", (
        f"the widget did not render: {body.text()[:500]!r}\n{proc.stderr[-2000:]}")
    return tree.root


def attr(name: str, value: str) -> Callable[[Node], bool]:
    return lambda n: n.attrs.get(name) == value


def number(cell: Node) -> int:
    return int(cell.text().replace(",", ""))


def broker_lag(bootstrap: str, group: str, topic: str) -> dict[int, tuple[int, int]]:
    """{partition: (committed, log end offset)} as kafka-python's admin and consumer see them."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        listed = admin.list_group_offsets({group: None})[group]
        committed = {tp.partition: om.offset for tp, om in listed.items() if tp.topic == topic}
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in committed])
        return {p: (committed[p], ends[TopicPartition(topic, p)]) for p in committed}
    finally:
        consumer.close()
        admin.close()


def test_lag_widget_renders_the_brokers_numbers(broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap_servers
    create_topic(bs, "payments", 3)
    produce(bs, "payments", [40, 25, 10])
    consumer = member(bs, "settlement", "payments", "settle-1")
    widget = LagWidget("settlement", bootstrap_servers=bs, live=False)
    try:
        consumer.commit(to_commit({("payments", 0): 10, ("payments", 1): 25, ("payments", 2): 3}))
        widget.refresh()
        produce(bs, "payments", [10, 0, 0], start=1000)
        consumer.commit(to_commit({("payments", 0): 15}))
        widget.refresh()
        expected = broker_lag(bs, "settlement", "payments")
        page = Path(widget.save_html(tmp_path / "lag.html"))
    finally:
        widget.close()
        consumer.close()
    assert expected == {0: (15, 50), 1: (25, 25), 2: (3, 10)}

    dom = rendered_dom(page)
    group = dom.find(attr("data-group", "settlement"))
    lags = {p: end - committed for p, (committed, end) in expected.items()}
    assert group.find(attr("data-field", "total-lag")).text() == f"{sum(lags.values()):,}"
    assert group.find(attr("data-field", "max-lag")).text() == f"{max(lags.values()):,}"
    assert group.find(attr("data-field", "state")).text() == "Stable"
    assert group.find(attr("data-field", "members")).text() == "1"
    assert group.find(attr("data-field", "coordinator")).text().endswith("(node 1)")
    rows = group.find_all(lambda n: n.tag == "tr" and "data-partition" in n.attrs)
    seen = {}
    for row in rows:
        cells = {c.attrs["data-col"]: c for c in row.find_all(lambda n: n.tag == "td")}
        p = int(row.attrs["data-partition"])
        seen[p] = (number(cells["committed"]), number(cells["log_end"]), number(cells["lag"]),
                   cells["status"].find(lambda n: "data-status" in n.attrs).attrs["data-status"],
                   cells["owner"].text())
    assert {p: s[:3] for p, s in seen.items()} == {p: (c, e, e - c) for p, (c, e) in expected.items()}
    # Burrow over the two samples: p0 moved but fell further behind, p1 is caught up, p2 never moved
    assert {p: s[3] for p, s in seen.items()} == {0: "WARN", 1: "OK", 2: "STALL"}
    badge = group.find(lambda n: n.tag == "span" and "pl-badge" in n.attrs.get("class", ""))
    assert badge.attrs["data-status"] == "ERR"
    assert all(s[4] == "settle-1 / 127.0.0.1" for s in seen.values())
    line = dom.find(lambda n: n.tag == "polyline" and n.attrs.get("data-series") == "settlement")
    assert len(line.attrs["points"].split()) == 3  # construction + two refreshes


def test_partitions_and_browser_render(broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap_servers
    create_topic(bs, "invoices", 2)
    produce(bs, "invoices", [7, 3])
    consumer = KafkaConsumer(bootstrap_servers=bs)
    try:
        ends = consumer.end_offsets([TopicPartition("invoices", p) for p in (0, 1)])
    finally:
        consumer.close()
    parts = PartitionsWidget("invoices", bootstrap_servers=bs, data_dir=broker.data_dir)
    browser = TopicBrowser("invoices", 4, bootstrap_servers=bs)
    try:
        parts_page = Path(parts.save_html(tmp_path / "partitions.html"))
        browser_page = Path(browser.save_html(tmp_path / "browser.html"))
    finally:
        parts.close()
        browser.close()

    dom = rendered_dom(parts_page)
    rects = dom.find_all(lambda n: n.tag == "rect")
    bars = {b.attrs["data-label"]: int(b.attrs["data-value"]) for b in rects}
    assert bars == {f"p{tp.partition}": end for tp, end in ends.items()}
    for tp, end in ends.items():
        row = dom.find(lambda n, p=tp.partition: n.tag == "tr" and n.attrs.get("data-partition") == str(p))
        cells = {c.attrs["data-col"]: c.text() for c in row.find_all(lambda n: n.tag == "td")}
        assert cells["log_end_offset"] == str(end) and cells["leader"] == "1" and cells["isr"] == "1"
        assert cells["segments"] == "1" and cells["bytes"].endswith("B")

    dom = rendered_dom(browser_page)
    rows = dom.find_all(lambda n: n.tag == "tr" and "data-offset" in n.attrs)
    assert len(rows) == 4
    for row in rows:
        p, o = int(row.attrs["data-partition"]), int(row.attrs["data-offset"])
        assert ends[TopicPartition("invoices", p)] - 4 <= o < ends[TopicPartition("invoices", p)]
        value = row.find(attr("data-col", "value")).text()
        assert value.startswith('{"i": ')


def test_cluster_widget_renders_the_brokers_and_partitions(broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from pylog.widgets.views import ClusterWidget

    bs = broker.bootstrap_servers
    create_topic(bs, "fleet", 4)
    widget = ClusterWidget(bootstrap_servers=bs, live=False)
    try:
        page = Path(widget.save_html(tmp_path / "cluster.html"))
        fallback = widget._repr_html_()
        frame = widget.dataframe()
    finally:
        widget.close()
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        topics = admin.describe_topics()
        cluster = admin.describe_cluster()
    finally:
        admin.close()
    partitions = sum(len(t["partitions"]) for t in topics)
    leaders: dict[int, int] = {}
    replicas: dict[int, int] = {}
    for t in topics:
        for p in t["partitions"]:
            leaders[p["leader_id"]] = leaders.get(p["leader_id"], 0) + 1
            for r in p["replica_nodes"]:
                replicas[r] = replicas.get(r, 0) + 1
    dom = rendered_dom(page)
    assert dom.find(attr("data-field", "partitions")).text() == f"{partitions:,}"
    assert dom.find(attr("data-field", "controller")).text() == str(cluster["controller_id"])
    assert dom.find(attr("data-field", "brokers")).text() == str(len(cluster["brokers"]))
    assert dom.find(attr("data-field", "moving")).text() == "0"
    for b in cluster["brokers"]:
        node = b["broker_id"]
        bars = dom.find_all(lambda n, node=node: n.tag == "rect" and n.attrs.get("data-broker") == str(node))
        got = {bar.attrs["data-metric"]: int(bar.attrs["data-value"]) for bar in bars}
        assert got == {"replicas": replicas[node], "leaders": leaders[node]}
        row = dom.find(lambda n, node=node: n.tag == "tr" and n.attrs.get("data-broker") == str(node))
        cells = {c.attrs["data-col"]: c for c in row.find_all(lambda n: n.tag == "td")}
        assert number(cells["replicas"]) == replicas[node]
    assert 'data-kind="cluster"' in fallback and f"{partitions:,} partitions" in fallback
    assert list(frame["replicas"]) == [replicas[b["broker_id"]] for b in cluster["brokers"]]
