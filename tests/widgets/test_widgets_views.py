"""The widget classes against a real broker: state, refresh from the front end, the live thread,
errors shown rather than raised, the text/html fallback and the standalone export."""

from __future__ import annotations

import json
import socket
import time

import pylog.widgets as pw
import pytest
from pylog.widgets.views import LagWidget, PartitionsWidget, TopicBrowser
from widgets_helpers import commit, create_topic, produce

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def clicks(broker):  # type: ignore[no-untyped-def]
    bs = broker.bootstrap_servers
    create_topic(bs, "clicks", 2)
    produce(bs, "clicks", [12, 8])
    commit(bs, "readers", {("clicks", 0): 2, ("clicks", 1): 8})
    return bs


def test_lag_widget_state_and_fallbacks(clicks: str) -> None:
    w = pw.lag_widget("readers", bootstrap_servers=clicks, live=False)
    try:
        assert w.kind == "lag" and not w.running and w.error == ""
        group = w.snapshot["groups"][0]
        assert group["group"] == "readers" and group["total_lag"] == 10 and group["max_lag"] == 10
        assert [(p["partition"], p["committed"], p["log_end"], p["lag"]) for p in group["partitions"]] == [
            (0, 2, 12, 10), (1, 8, 8, 0)]
        assert len(w.history["readers"]) == 1
        assert w.dataframe()["lag"].tolist() == [10, 0]
        assert w.groups_dataframe()["total_lag"].tolist() == [10]
        data, _meta = w._repr_mimebundle_()
        assert {"text/plain", "text/html", WIDGET_VIEW} <= set(data)
        assert 'data-field="total-lag">10<' in data["text/html"] and "<svg" in data["text/html"]
        assert data["text/plain"] == "LagWidget(group='readers', running=False)"
        page = w.to_html()
        assert "https://" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
        assert '"total_lag":10' in page and "export default" in page
        # the Refresh button sends {"type": "refresh"}
        w._on_front_end_msg(w, {"type": "refresh"}, [])
        assert len(w.history["readers"]) == 2
    finally:
        w.close()


def test_live_refresh_starts_and_stops(clicks: str) -> None:
    w = LagWidget("readers", bootstrap_servers=clicks, live=False)
    try:
        w.set_state({"running": True})  # what the front end's Resume button does
        assert w.running and w._thread is not None and w._thread.is_alive()
        deadline = time.monotonic() + 60
        while len(w.history["readers"]) < 3:
            assert time.monotonic() < deadline, "the live thread did not refresh"
            time.sleep(0.05)
        w.stop()
        assert w._thread is None and not w.running
        n = len(w.history["readers"])
        w.refresh()
        assert len(w.history["readers"]) == n + 1
        w.start(interval_s=0.05)
        assert w.interval_s == 0.05 and w.running
        with pytest.raises(ValueError):
            w.start(interval_s=0)
    finally:
        w.close()
    assert w._thread is None


def test_errors_are_shown_not_raised() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    w = LagWidget(bootstrap_servers=f"127.0.0.1:{port}", live=False)
    try:
        assert "cannot connect" in w.error or "no Kafka broker" in w.error
        assert w.snapshot == {}
        assert "no consumer groups" in w._repr_html_()
    finally:
        w.close()


def test_partitions_widget(clicks: str, broker) -> None:  # type: ignore[no-untyped-def]
    w = pw.partitions_widget("clicks", bootstrap_servers=clicks, data_dir=broker.data_dir)
    try:
        rows = w.snapshot["partitions"]
        assert [(r["partition"], r["records"], r["leader"]) for r in rows] == [(0, 12, 1), (1, 8, 1)]
        assert all(r["bytes"] > 0 and r["segments"] >= 1 for r in rows)
        assert w.dataframe()["records"].tolist() == [12, 8]
        assert "<svg" in w._repr_html_() and "p0" in w._repr_html_()
        assert repr(w) == "PartitionsWidget(topic='clicks', running=False)"
    finally:
        w.close()
    with pytest.raises(ValueError):
        PartitionsWidget("clicks", bootstrap_servers=clicks, metric="rows")
    with pytest.raises(ValueError):
        PartitionsWidget("clicks")
    missing = PartitionsWidget("nope", bootstrap_servers=clicks)
    assert "UnknownTopicError" in missing.error
    missing.close()


def test_topic_browser_redecodes_without_refetching(clicks: str) -> None:
    w = pw.topic_browser("clicks", n=3, bootstrap_servers=clicks)
    try:
        ends = {0: 12, 1: 8}
        assert len(w.records) == 3 and all(r["offset"] >= ends[r["partition"]] - 3 for r in w.records)
        assert all(r["key"] == f'k{json.loads(r["value"])["i"]}' for r in w.records)
        w.decode = "hex"
        assert all(r["key"].startswith("6b") for r in w.records)
        w.decode = "nonsense"
        assert w.decode == "hex"
        assert w.dataframe().columns.tolist() == ["partition", "offset", "timestamp", "key", "value"]
        assert "<code>" in w._repr_html_()
    finally:
        w.close()
    with pytest.raises(ValueError):
        TopicBrowser("clicks", bootstrap_servers=clicks, decode="rot13")


def test_topic_browser_shows_registry_records_decoded(broker) -> None:  # type: ignore[no-untyped-def]
    """LocalBroker serves a schema registry; wire-format records show as their typed fields."""
    import pyarrow as pa

    import pylog

    bs, url = broker.bootstrap_servers, broker.schema_registry_url
    frame = pa.table({"user": ["ann", "bob"], "n": pa.array([1, 2], pa.int64())})
    pylog.write_topic(frame, "typed", bootstrap_servers=bs, value_schema="registry", schema_registry_url=url)
    w = pw.topic_browser("typed", n=5, bootstrap_servers=bs)
    try:
        assert sorted(json.loads(r["value"])["user"] for r in w.records) == ["ann", "bob"]
        w.decode = "hex"
        assert all(r["value"].startswith("00 00 00 00") for r in w.records)
        w.decode = "registry"
        assert {json.loads(r["value"])["n"] for r in w.records} == {1, 2}
    finally:
        w.close()
    df = pw.latest_records("typed", 5, data_dir=broker.data_dir, decode="registry")  # schemas from _schemas
    assert sorted(json.loads(v)["user"] for v in df["value"]) == ["ann", "bob"]
