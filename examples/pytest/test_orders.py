"""The order-totals application (orders.py) tested against a real broker with pylog's pytest fixtures:
``kafka_broker`` is a pylog broker started once for the session, ``kafka_topic`` a new topic for each
test. Run with ``pytest examples/pytest`` wherever pylog is installed (the fixtures come with it)."""

from __future__ import annotations

import json

import pytest
from orders import totals_aiokafka, totals_confluent, totals_kafka_python

CLIENTS = {
    "kafka-python": totals_kafka_python,
    "confluent-kafka": totals_confluent,
    "aiokafka": totals_aiokafka,
}
ORDERS = [("ada", 9.5), ("bob", 12.25), ("ada", 0.5), ("cyd", 3.0)]


def orders(rows: list[tuple[str, float]]) -> list[bytes]:
    return [json.dumps({"customer": c, "amount": a}).encode() for c, a in rows]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.kafka_topic(partitions=3)
def test_totals_per_customer(client: str, kafka_broker, kafka_topic: str) -> None:
    kafka_broker.produce(kafka_topic, orders(ORDERS), keys=[c for c, _ in ORDERS])
    assert CLIENTS[client](kafka_broker.bootstrap_servers, kafka_topic, "totals") == {
        "ada": 10.0, "bob": 12.25, "cyd": 3.0}


@pytest.mark.parametrize("client", CLIENTS)
def test_a_restarted_application_reads_only_new_orders(client: str, kafka_broker, kafka_topic: str) -> None:
    totals = CLIENTS[client]
    kafka_broker.produce(kafka_topic, orders(ORDERS[:2]))
    assert totals(kafka_broker.bootstrap_servers, kafka_topic, "billing") == {"ada": 9.5, "bob": 12.25}
    kafka_broker.produce(kafka_topic, orders(ORDERS[2:]))
    # the group committed where it stopped: the second run sees the two new orders alone
    assert totals(kafka_broker.bootstrap_servers, kafka_topic, "billing") == {"ada": 0.5, "cyd": 3.0}
    committed = kafka_broker.read(kafka_topic).num_rows
    assert committed == len(ORDERS)
