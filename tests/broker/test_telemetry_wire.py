"""GetTelemetrySubscriptions, PushTelemetry and PylogClientMetrics over a real socket to an
in-process broker, spoken by pylog's codec (no Python client sends them): the identity the broker
records (ApiVersions v3's software name, the client id, the address), compressed OTLP payloads,
Kafka's errors, and what is read back."""

from __future__ import annotations

import uuid

from harness import BrokerThread, Client
from opentelemetry.proto.metrics.v1 import metrics_pb2
from pylog.protocol.api import ApiKey, PylogApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.records.compression import GZIP, ZSTD, compress

ZERO = uuid.UUID(int=0)


def subscribe(client: Client, name: str, **configs: str) -> None:
    resp = client.request(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        {
            "resources": [
                {
                    "resource_type": 16,
                    "resource_name": name,
                    "configs": [
                        {"name": k.replace("_", "."), "config_operation": 0, "value": v}
                        for k, v in configs.items()
                    ],
                }
            ],
            "validate_only": False,
        },
    )
    assert resp.responses[0].error_code == 0


def otlp(value: float) -> bytes:
    data = metrics_pb2.MetricsData()
    metric = data.resource_metrics.add().scope_metrics.add().metrics.add(name="org.apache.kafka.test.gauge")
    metric.gauge.data_points.add(as_double=value)
    return data.SerializeToString()


def read_back(client: Client) -> list:
    resp = client.request(
        PylogApiKey.CLIENT_METRICS, 0, {"client_instance_ids": None, "include_metrics": True}
    )
    assert resp.error_code == 0
    return resp.clients


def test_subscribe_push_and_read_back(broker: BrokerThread) -> None:
    admin = Client(broker.address)
    app = Client(broker.address, client_id="wire-app")
    try:
        subscribe(
            admin, "tests", metrics="org.apache.kafka.test.", interval_ms="60000", match="client_id=wire-.*"
        )
        av = app.request(
            ApiKey.API_VERSIONS, 3, {"client_software_name": "wire-test", "client_software_version": "1.0"}
        )
        keys = {k.api_key for k in av.api_keys}
        assert {71, 72, 74, 32002} <= keys
        sub = app.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": ZERO})
        assert sub.error_code == 0 and sub.client_instance_id != ZERO
        assert sub.requested_metrics == ["org.apache.kafka.test."] and sub.push_interval_ms == 60000
        assert sub.delta_temporality and sub.telemetry_max_bytes == 1048576
        assert set(sub.accepted_compression_types) == {1, 2, 3, 4}
        cid, sid = sub.client_instance_id, sub.subscription_id

        def push(
            payload: bytes, *, codec: int = ZSTD, subscription: int = sid, terminating: bool = False
        ) -> int:
            body = {
                "client_instance_id": cid,
                "subscription_id": subscription,
                "terminating": terminating,
                "compression_type": codec,
                "metrics": compress(codec, payload),
            }
            return app.request(ApiKey.PUSH_TELEMETRY, 0, body).error_code

        assert push(otlp(1.5)) == ErrorCode.NONE
        assert push(otlp(2.5)) == ErrorCode.THROTTLING_QUOTA_EXCEEDED  # within the interval
        # asking again within the interval is throttled too
        again = app.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": cid})
        assert again.error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        assert push(otlp(3.5), codec=GZIP, terminating=True) == ErrorCode.NONE  # the last may come early
        assert push(otlp(4.5)) == ErrorCode.INVALID_REQUEST  # nothing after the terminating push

        (mine,) = [c for c in read_back(admin) if c.client_instance_id == cid]
        assert (mine.client_id, mine.client_software_name, mine.client_software_version) == (
            "wire-app",
            "wire-test",
            "1.0",
        )
        assert mine.client_source_address == "127.0.0.1" and mine.client_source_port > 0
        assert mine.pushes == 2 and mine.terminating and mine.last_error_code == ErrorCode.INVALID_REQUEST
        data = metrics_pb2.MetricsData.FromString(bytes(mine.metrics))
        assert data.resource_metrics[0].scope_metrics[0].metrics[0].gauge.data_points[0].as_double == 3.5
    finally:
        admin.close()
        app.close()


def test_stale_ids_and_oversized_payloads(broker: BrokerThread) -> None:
    c = Client(broker.address, client_id="other-app")
    try:
        subscribe(c, "every", metrics="*", interval_ms="100")
        sub = c.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": ZERO})
        body = {
            "client_instance_id": sub.client_instance_id,
            "subscription_id": sub.subscription_id ^ 1,
            "terminating": False,
            "compression_type": 0,
            "metrics": b"x",
        }
        assert c.request(ApiKey.PUSH_TELEMETRY, 0, body).error_code == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        # the client asks again at once and gets its subscription
        sub = c.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": sub.client_instance_id})
        assert sub.error_code == 0
        body = {**body, "subscription_id": sub.subscription_id, "metrics": b"x" * (1048576 + 1)}
        assert c.request(ApiKey.PUSH_TELEMETRY, 0, body).error_code == ErrorCode.TELEMETRY_TOO_LARGE
    finally:
        c.close()
