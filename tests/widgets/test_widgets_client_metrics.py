"""The client metrics view against a real broker: a confluent-kafka producer and consumer push their
metrics (KIP-714) once a CLIENT_METRICS subscription asks for them; the DataFrame form, the widget's
state, its text/html fallback and its front end rendered in headless Chromium show them."""

from __future__ import annotations

import time
from pathlib import Path

import pylog.widgets as pw
from confluent_kafka import Consumer, Producer
from pylog.widgets.views import ClientMetricsWidget
from test_widgets_browser import attr, rendered_dom
from widgets_helpers import create_topic

from pylog.sdk import aio
from pylog.sdk.client import KafkaClient

INCREMENTAL_ALTER_CONFIGS, CLIENT_METRICS = 44, 16


def subscribe_everything(bootstrap: str) -> None:
    """A CLIENT_METRICS subscription of every metric every second (IncrementalAlterConfigs)."""

    async def run() -> None:
        client = KafkaClient(bootstrap)
        await client.start()
        try:
            body = {
                "resources": [
                    {
                        "resource_type": CLIENT_METRICS,
                        "resource_name": "notebook",
                        "configs": [
                            {"name": "metrics", "config_operation": 0, "value": "*"},
                            {"name": "interval.ms", "config_operation": 0, "value": "1000"},
                        ],
                    }
                ],
                "validate_only": False,
            }
            resp = await (await client.any_connection()).request(INCREMENTAL_ALTER_CONFIGS, 1, body)
            assert resp.responses[0].error_code == 0
        finally:
            await client.close()

    aio.run(run())


def test_client_metrics_view(broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap_servers
    empty = pw.client_metrics_widget(bootstrap_servers=bs, live=False)
    try:
        assert empty.snapshot["clients"] == [] and empty.error == ""
        assert "no client has asked" in empty._repr_html_()
    finally:
        empty.close()
    subscribe_everything(bs)
    create_topic(bs, "telemetry-orders", 1)
    producer = Producer({"bootstrap.servers": bs, "client.id": "orders-writer", "linger.ms": 5})
    consumer = Consumer({"bootstrap.servers": bs, "client.id": "orders-reader", "group.id": "orders",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["telemetry-orders"])
    widget = ClientMetricsWidget(bootstrap_servers=bs, live=False)
    try:
        deadline = time.monotonic() + 90
        while True:
            for i in range(10):
                producer.produce("telemetry-orders", f"order-{i}".encode())
            producer.poll(0)
            consumer.poll(0.2)
            widget.refresh()
            kinds = {c["client_id"]: c for c in widget.snapshot["clients"] if c["metrics"]}
            reader = kinds.get("orders-reader")
            if ({"orders-writer", "orders-reader"} <= set(kinds) and reader is not None
                    and reader["highlights"].get("consumer.coordinator.assigned.partitions") == 1):
                break
            assert time.monotonic() < deadline, f"no metrics from both clients: {widget.snapshot}"
            time.sleep(0.3)
        assert widget.error == ""
        writer = kinds["orders-writer"]
        assert writer["kind"] == "producer" and reader["kind"] == "consumer"
        assert writer["client_software_name"] == "confluent-kafka-python" and writer["broker"] == 1
        assert "producer.record.queue.time.avg" in writer["highlights"]
        assert "consumer.fetch.manager.fetch.latency.avg" in reader["highlights"]
        shown = {c["metric"] for c in widget.snapshot["columns"]}
        assert {"producer.record.queue.time.avg", "consumer.coordinator.assigned.partitions"} <= shown

        df = widget.dataframe()
        row = df[df["client_id"] == "orders-reader"].iloc[0]
        assert row["kind"] == "consumer" and row["consumer.coordinator.assigned.partitions"] == 1
        assert row["pushes"] >= 1 and str(row["pushed_at"].tz) == "UTC"
        assert set(pw.clients(bootstrap_servers=bs)["client_id"]) >= {"orders-writer", "orders-reader"}

        fallback = widget._repr_html_()
        assert 'data-kind="clients"' in fallback and "orders-writer" in fallback
        assert "producer.record.queue.time.avg" in fallback
        page = Path(widget.save_html(tmp_path / "clients.html"))
    finally:
        widget.close()
        consumer.close()
        producer.flush(10)

    dom = rendered_dom(page)
    row = dom.find(attr("data-client-id", "orders-reader"))
    cells = {c.attrs["data-col"]: c.text() for c in row.find_all(lambda n: n.tag == "td")}
    assert cells["kind"] == "consumer" and cells["consumer.coordinator.assigned.partitions"] == "1"
    assert cells["software"].startswith("confluent-kafka-python")
    instance = reader["client_instance_id"]
    details = dom.find(lambda n: n.tag == "details" and n.attrs.get("data-client") == instance)
    rows = details.find_all(lambda n: n.tag == "tr" and "data-metric" in n.attrs)
    names = {r.attrs["data-metric"] for r in rows}
    assert "consumer.fetch.manager.fetch.latency.avg" in names
