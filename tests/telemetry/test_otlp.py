"""What clients push (OpenTelemetry MetricsData) decoded into rows."""

from __future__ import annotations

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2 as m

from pylog.telemetry.otlp import decode_metrics


def kv(key: str, **value: object) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(**value))


def payload() -> bytes:
    data = m.MetricsData()
    rm = data.resource_metrics.add()
    rm.resource.attributes.extend(
        [kv("client_rack", string_value="r1"), kv("node.id", string_value="resource")]
    )
    sm = rm.scope_metrics.add()
    g = sm.metrics.add(name="org.apache.kafka.producer.record.queue.time.avg", unit="ms")
    g.gauge.data_points.add(as_double=1.5, time_unix_nano=2_000, attributes=[kv("node.id", int_value=1)])
    s = sm.metrics.add(name="org.apache.kafka.producer.connection.creation.total")
    s.sum.data_points.add(as_int=3, start_time_unix_nano=1_000, time_unix_nano=2_000)
    s.sum.is_monotonic = True
    h = sm.metrics.add(name="some.histogram")
    h.histogram.data_points.add(count=4, sum=10.0, time_unix_nano=2_000)
    return data.SerializeToString()


def test_data_points_become_rows() -> None:
    rows = decode_metrics(payload())
    assert [(r["metric"], r["type"], r["value"], r["count"]) for r in rows] == [
        ("org.apache.kafka.producer.record.queue.time.avg", "gauge", 1.5, None),
        ("org.apache.kafka.producer.connection.creation.total", "sum", 3.0, None),
        ("some.histogram", "histogram", 10.0, 4),
    ]
    first = rows[0]
    assert first["unit"] == "ms" and first["time_unix_nano"] == 2_000
    # resource attributes, overridden by the point's own
    assert first["attributes"] == [("client_rack", "r1"), ("node.id", "1")]
    assert rows[1]["start_time_unix_nano"] == 1_000


def test_garbage_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="MetricsData"):
        decode_metrics(b"\xff\xff\xff\xff")


def test_a_missing_opentelemetry_proto_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from pylog._extras import MissingExtraError

    monkeypatch.setitem(sys.modules, "opentelemetry.proto.metrics.v1.metrics_pb2", None)
    with pytest.raises(MissingExtraError) as err:
        decode_metrics(payload())
    assert str(err.value) == (
        "reading client metrics needs opentelemetry-proto, which is not installed: "
        "pip install 'pylog[notebook]'"
    )
