"""Kafka 4's other config resources through kafka-python's admin: BROKER_LOGGER (a running broker's
log levels), GROUP (per-group KIP-848 / KIP-932 settings, honoured by a confluent-kafka share
consumer) and CLIENT_METRICS (telemetry subscriptions)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from compat_broker import BrokerProcess
from compat_clients import Rec, create_topic, produce
from confluent_kafka import ShareConsumer
from kafka.admin import AlterConfigOp, ConfigResource, KafkaAdminClient
from kafka.admin import ConfigResourceType as T

LOGGER = "pylog.broker.broker"  # a logger every pylog broker has


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    yield a
    a.close()


def node_id(admin: KafkaAdminClient) -> str:
    return str(admin.describe_cluster()["brokers"][0]["broker_id"])


def alter(admin: KafkaAdminClient, kind: T, name: str, configs: dict[str, Any]) -> str:
    res = admin.alter_configs([ConfigResource(kind, name, configs)], incremental=True, raise_on_unknown=False)
    return res[kind.name.lower()][name]


def describe(admin: KafkaAdminClient, kind: T, name: str, keys: list[str] | None = None) -> dict[str, Any]:
    res = admin.describe_configs([ConfigResource(kind, name, keys)], config_filter="all")
    return res[kind.name.lower()][name]


# ----------------------------------------------------------------------------------- BROKER_LOGGER


def test_broker_logger_levels_read_and_change_on_that_broker(admin: KafkaAdminClient) -> None:
    node = node_id(admin)
    levels = describe(admin, T.BROKER_LOGGER, node)
    assert levels["root"]["value"] in {"FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"}
    assert levels[LOGGER]["config_source"] == "DYNAMIC_BROKER_LOGGER_CONFIG"
    before = levels[LOGGER]["value"]
    assert alter(admin, T.BROKER_LOGGER, node, {LOGGER: "TRACE"}) == "OK"
    assert describe(admin, T.BROKER_LOGGER, node, [LOGGER])[LOGGER]["value"] == "TRACE"
    # DELETE unsets it: the logger inherits its parent's level again
    assert alter(admin, T.BROKER_LOGGER, node, {LOGGER: (AlterConfigOp.DELETE, None)}) == "OK"
    assert describe(admin, T.BROKER_LOGGER, node, [LOGGER])[LOGGER]["value"] == before
    # Kafka's refusals
    assert "not a supported log level" in alter(admin, T.BROKER_LOGGER, node, {LOGGER: "LOUD"})
    assert "does not exist" in alter(admin, T.BROKER_LOGGER, node, {"no.such.logger": "INFO"})
    assert "root logger is not allowed" in alter(
        admin, T.BROKER_LOGGER, node, {"root": (AlterConfigOp.DELETE, None)}
    )
    assert "APPEND operation is not allowed" in alter(
        admin, T.BROKER_LOGGER, node, {LOGGER: (AlterConfigOp.APPEND, "INFO")}
    )
    legacy = admin.alter_configs(
        [ConfigResource(T.BROKER_LOGGER, node, {LOGGER: "INFO"})], incremental=False, raise_on_unknown=False
    )
    assert "InvalidRequestError" in legacy["broker_logger"][node]  # legacy AlterConfigs does not know it
    logging.getLogger(__name__).info("levels described: %d loggers", len(levels))


# ------------------------------------------------------------------------------------------- GROUP


def test_group_configs_are_validated_stored_and_described(admin: KafkaAdminClient) -> None:
    group = "cfg-group"
    assert (
        alter(
            admin,
            T.GROUP,
            group,
            {"consumer.session.timeout.ms": "50000", "share.record.lock.duration.ms": "20000"},
        )
        == "OK"
    )
    cfg = describe(admin, T.GROUP, group)
    assert cfg["consumer.session.timeout.ms"]["value"] == "50000"
    assert cfg["consumer.session.timeout.ms"]["config_source"] == "DYNAMIC_GROUP_CONFIG"
    assert cfg["consumer.heartbeat.interval.ms"]["value"] == "5000"  # the broker's group.consumer.* default
    assert cfg["consumer.heartbeat.interval.ms"]["config_source"] == "DEFAULT_CONFIG"
    assert cfg["share.auto.offset.reset"]["value"] == "latest"
    # bounds of the broker's group.consumer.min/max.session.timeout.ms, names, types
    assert "greater than or equal to group.consumer.min.session.timeout.ms" in alter(
        admin, T.GROUP, group, {"consumer.session.timeout.ms": "1000"}
    )
    assert "Unknown group config name: consumer.bogus" in alter(
        admin, T.GROUP, group, {"consumer.bogus": "1"}
    )
    assert "InvalidConfigurationError" in alter(
        admin, T.GROUP, group, {"share.auto.offset.reset": "sometimes"}
    )
    assert alter(admin, T.GROUP, group, {"share.auto.offset.reset": "by_duration:PT1H"}) == "OK"
    # a DELETE goes back to the default
    assert alter(admin, T.GROUP, group, {"consumer.session.timeout.ms": (AlterConfigOp.DELETE, None)}) == "OK"
    cfg = describe(admin, T.GROUP, group, ["consumer.session.timeout.ms", "share.record.lock.duration.ms"])
    assert cfg["consumer.session.timeout.ms"]["config_source"] == "DEFAULT_CONFIG"
    assert cfg["share.record.lock.duration.ms"]["value"] == "20000"


def test_a_share_groups_auto_offset_reset_is_honoured(
    broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str
) -> None:
    """The broker default is latest; this group's own share.auto.offset.reset=earliest makes its
    first member see the records written before it joined."""
    create_topic(broker.bootstrap, topic_name, partitions=1)
    produce("confluent-kafka", broker.bootstrap, topic_name, [Rec(f"old-{i}".encode()) for i in range(5)])
    group = f"{topic_name}-sg"
    assert alter(admin, T.GROUP, group, {"share.auto.offset.reset": "earliest"}) == "OK"
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    c.subscribe([topic_name])
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            got += [bytes(m.value()) for m in c.poll(1.0) if m.error() is None]
    finally:
        c.close()
    assert sorted(got) == [f"old-{i}".encode() for i in range(5)]


# ---------------------------------------------------------------------------------- CLIENT_METRICS


def test_client_metrics_subscriptions_are_stored_and_described(admin: KafkaAdminClient) -> None:
    sub = "producers-of-app"
    configs = {"metrics": "org.apache.kafka.producer.", "interval.ms": "60000", "match": "client_id=app-.*"}
    assert alter(admin, T.CLIENT_METRICS, sub, configs) == "OK"
    cfg = describe(admin, T.CLIENT_METRICS, sub)
    assert {k: v["value"] for k, v in cfg.items()} == configs
    assert {v["config_source"] for v in cfg.values()} == {"DYNAMIC_CLIENT_METRICS_CONFIG"}
    assert "interval must be between 100 and 3600000" in alter(
        admin, T.CLIENT_METRICS, sub, {"interval.ms": "10"}
    )
    assert "Unknown client metrics configuration" in alter(admin, T.CLIENT_METRICS, sub, {"color": "red"})
    assert "Invalid client selector" in alter(admin, T.CLIENT_METRICS, sub, {"match": "hostname=x"})
    deletes = {k: (AlterConfigOp.DELETE, None) for k in configs}
    assert alter(admin, T.CLIENT_METRICS, sub, deletes) == "OK"
    cfg = describe(admin, T.CLIENT_METRICS, sub)
    assert cfg["interval.ms"] == {**cfg["interval.ms"], "value": "300000", "config_source": "DEFAULT_CONFIG"}
