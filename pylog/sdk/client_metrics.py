"""``client_metrics``: what the clients of a pylog cluster report about themselves (KIP-714).

Kafka clients (librdkafka since 2.5, the Java client since 3.7) push their own metrics to a broker
when a CLIENT_METRICS subscription asks for them: request latencies, queue times, throttle times,
fetch latencies, rebalance times, in OpenTelemetry form. Each pylog broker keeps the latest push of
every client instance it serves; this asks every broker of the cluster (PylogClientMetrics, pylog's
own API) and returns one row per data point, with who sent it.

    pylog.client_metrics(bootstrap_servers="localhost:9092").to_pandas()
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from pylog.protocol.api import PylogApiKey
from pylog.sdk import aio
from pylog.sdk.client import KafkaClient, KafkaError
from pylog.telemetry.otlp import decode_metrics

SCHEMA = pa.schema(
    [
        ("client_instance_id", pa.string()),
        ("client_id", pa.string()),
        ("client_software_name", pa.string()),
        ("client_software_version", pa.string()),
        ("client_source_address", pa.string()),
        ("client_source_port", pa.int32()),
        ("principal", pa.string()),
        ("broker", pa.int32()),
        ("push_interval_ms", pa.int32()),
        ("pushes", pa.int64()),
        ("pushed_at", pa.timestamp("ms", tz="UTC")),
        ("metric", pa.string()),
        ("type", pa.string()),
        ("unit", pa.string()),
        ("value", pa.float64()),
        ("count", pa.int64()),
        ("time", pa.timestamp("ns", tz="UTC")),
        ("attributes", pa.map_(pa.string(), pa.string())),
        ("error", pa.string()),
    ]
)


def client_metrics(
    *, bootstrap_servers: Any, security: Mapping[str, Any] | None = None, timeout_s: float = 30.0
) -> pa.Table:
    """The latest metrics every client instance pushed to the cluster, one row per data point
    (a client that has not pushed yet has one row with no metric). Columns: the client's instance
    id, client id, software name and version, address and port, principal, the broker it pushes
    to, its push interval, pushes so far and when it last pushed; then ``metric`` (e.g.
    ``org.apache.kafka.producer.record.queue.time.avg``), ``type`` (gauge, sum, histogram...),
    ``unit``, ``value``, ``count`` (histograms), ``time`` and ``attributes``; ``error`` says why a
    payload could not be read. Raises ConnectionError when the cluster is not a pylog cluster."""
    return aio.run(_collect(bootstrap_servers, security, timeout_s))


async def _collect(bootstrap_servers: Any, security: Any, timeout_s: float) -> pa.Table:
    client = KafkaClient(bootstrap_servers, client_id="pylog-client-metrics", request_timeout_s=timeout_s,
                         security=security)
    await client.start()
    try:
        if PylogApiKey.CLIENT_METRICS not in (await client.any_connection()).versions:
            raise ConnectionError(
                "the cluster does not serve PylogClientMetrics: client metrics are read from pylog brokers"
            )
        brokers = (await client.metadata([])).brokers

        async def one(node: int) -> tuple[int, Any]:
            conn = await client.connection(node)
            body = {"client_instance_ids": None, "include_metrics": True}
            resp = await conn.request(PylogApiKey.CLIENT_METRICS, 0, body)
            if resp.error_code:
                raise KafkaError(resp.error_code, f"PylogClientMetrics from broker {node}")
            return node, resp.clients

        answers = await asyncio.gather(*(one(n) for n in sorted(brokers)))
    finally:
        await client.close()
    latest: dict[Any, tuple[int, Any]] = {}  # a client that moved brokers: its latest push wins
    for node, clients in answers:
        for c in clients:
            seen = latest.get(c.client_instance_id)
            if seen is None or c.last_push_ms > seen[1].last_push_ms:
                latest[c.client_instance_id] = (node, c)
    return _table(latest.values())


def _table(clients: Any) -> pa.Table:
    rows: list[dict[str, Any]] = []
    for node, c in sorted(clients, key=lambda nc: (nc[1].client_id or "", str(nc[1].client_instance_id))):
        who = {
            "client_instance_id": str(c.client_instance_id),
            "client_id": c.client_id,
            "client_software_name": c.client_software_name,
            "client_software_version": c.client_software_version,
            "client_source_address": c.client_source_address,
            "client_source_port": None if c.client_source_port < 0 else c.client_source_port,
            "principal": c.principal,
            "broker": node,
            "push_interval_ms": c.push_interval_ms,
            "pushes": c.pushes,
            "pushed_at": None if c.last_push_ms < 0 else c.last_push_ms,
        }
        points: list[dict[str, Any]] = []
        error = None
        if c.metrics is not None and len(c.metrics):
            try:
                points = decode_metrics(bytes(c.metrics))
            except ValueError as exc:
                error = str(exc)
        if not points:
            rows.append({**who, "error": error})
        for p in points:
            rows.append({**who, **p, "time": p["time_unix_nano"], "error": None})
    columns = {f.name: [r.get(f.name) for r in rows] for f in SCHEMA}
    return pa.table(columns, schema=SCHEMA)
