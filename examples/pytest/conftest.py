"""Broker configs for the fixtures of this directory (pylog's ``kafka_broker_config`` fixture, overridden):
Kafka's names, for ``kafka_broker`` and every node of ``kafka_cluster``."""

import pytest


@pytest.fixture(scope="session")
def kafka_broker_config() -> dict[str, str]:
    # a node that stops heartbeating is fenced (and its partitions led elsewhere) after 3 s, not 9 s
    return {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"}
