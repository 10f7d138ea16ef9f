"""OpenTelemetry MetricsData (what KIP-714 clients push) as rows: one per data point.

Decoded with the ``opentelemetry-proto`` package (the ``notebook`` extra). Gauges and sums give
their value; histograms and summaries their sum, with the count beside it. Attributes of the data
point and of its resource become one string map (the resource's first, so a point's own win).
"""

from __future__ import annotations

from typing import Any

from pylog._extras import require

COLUMNS = ("metric", "type", "unit", "value", "count", "time_unix_nano", "start_time_unix_nano", "attributes")


def _text(value: Any) -> str:
    kind = value.WhichOneof("value")
    if kind is None:
        return ""
    if kind == "array_value":
        return "[" + ", ".join(_text(v) for v in value.array_value.values) + "]"
    if kind == "kvlist_value":
        return "{" + ", ".join(f"{kv.key}={_text(kv.value)}" for kv in value.kvlist_value.values) + "}"
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return str(getattr(value, kind))


def _attributes(*groups: Any) -> list[tuple[str, str]]:
    merged: dict[str, str] = {}
    for group in groups:
        for kv in group:
            merged[kv.key] = _text(kv.value)
    return sorted(merged.items())


def decode_metrics(payload: bytes) -> list[dict[str, Any]]:
    """The data points of a MetricsData message; raises ValueError if it is not one."""
    metrics_pb2 = require("opentelemetry.proto.metrics.v1.metrics_pb2", "reading client metrics")
    from google.protobuf.message import DecodeError

    data = metrics_pb2.MetricsData()
    try:
        data.ParseFromString(payload)
    except DecodeError as exc:
        raise ValueError(f"not an OpenTelemetry MetricsData message: {exc}") from None
    rows: list[dict[str, Any]] = []
    for rm in data.resource_metrics:
        resource = rm.resource.attributes
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                if kind is None:
                    continue
                for p in getattr(m, kind).data_points:
                    if kind in ("gauge", "sum"):
                        which = p.WhichOneof("value")
                        value = float(getattr(p, which)) if which else None
                        count = None
                    else:  # histogram, exponential_histogram, summary
                        value, count = float(p.sum), int(p.count)
                    rows.append(
                        {
                            "metric": m.name,
                            "type": kind,
                            "unit": m.unit,
                            "value": value,
                            "count": count,
                            "time_unix_nano": int(p.time_unix_nano),
                            "start_time_unix_nano": int(p.start_time_unix_nano),
                            "attributes": _attributes(resource, p.attributes),
                        }
                    )
    return rows
