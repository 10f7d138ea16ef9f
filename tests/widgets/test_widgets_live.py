"""`pw.live_table` against a real broker while kafka-python produces: the newest rows and the total
follow the topic, the rate series has points, pausing stops the follower thread, the group's
offsets are committed, the fallback HTML, and the front end drawn by headless Chromium."""

from __future__ import annotations

import time
from pathlib import Path

import pylog.widgets as pw
from kafka import KafkaAdminClient
from test_widgets_browser import attr, number, rendered_dom
from widgets_helpers import create_topic, produce

import pylog

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def wait_until(check, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_live_table_follows_a_producer(broker: pylog.LocalBroker, tmp_path: Path) -> None:
    bs = broker.bootstrap_servers
    create_topic(bs, "live-clicks", 2)
    w = pw.live_table("live-clicks", 5, bootstrap_servers=bs, group="screen", starting_offsets="earliest",
                      interval_s=0.2)
    t0 = time.monotonic()
    try:
        assert w.kind == "live" and w.running and w.total == 0 and w.records == []
        produce(bs, "live-clicks", [30, 20])
        wait_until(lambda: w.total == 50, 60, "the widget did not see the 50 records")
        produce(bs, "live-clicks", [0, 10], start=50)
        wait_until(lambda: w.total == 60, 60, "the widget did not see the next 10 records")
        print(f"60 records shown {time.monotonic() - t0:.1f}s after the start")
        assert len(w.records) == 5
        assert {(r["partition"], r["offset"]) for r in w.records} == {(1, o) for o in range(25, 30)}
        assert all(r["value"].startswith('{"i": ') for r in w.records)
        assert max(rate for _t, rate in w.rates) > 0 and len(w.rates) >= 3
        w.stop()
        assert not w.running and w._thread is None
        last = w.rates[-1][0]
        time.sleep(0.5)
        assert w.rates[-1][0] == last  # paused: nothing polls
        data, _meta = w._repr_mimebundle_()
        assert {"text/html", WIDGET_VIEW} <= set(data)
        assert 'data-field="total">60<' in data["text/html"] and "<svg" in data["text/html"]
        assert w.dataframe()["offset"].tolist() == [r["offset"] for r in w.records]
        page = Path(w.save_html(tmp_path / "live.html"))
        w.start()  # the next request commits what the last batch showed
        wait_until(lambda: w.rates[-1][0] > last, 30, "the widget did not resume")
    finally:
        w.close()
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        listed = admin.list_group_offsets({"screen": None})["screen"]
        assert {tp.partition: om.offset for tp, om in listed.items()} == {0: 30, 1: 30}
    finally:
        admin.close()

    dom = rendered_dom(page)
    assert number(dom.find(attr("data-field", "total"))) == 60
    rows = dom.find_all(lambda n: n.tag == "tr" and "data-offset" in n.attrs)
    assert sorted(int(r.attrs["data-offset"]) for r in rows) == list(range(25, 30))
    line = dom.find(lambda n: n.tag == "polyline" and n.attrs.get("data-series") == "records/s")
    assert len(line.attrs["points"].split()) >= 3
