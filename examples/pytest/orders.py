"""A small consumer application: it reads JSON orders from a Kafka topic with a consumer group and
adds up the amount each customer spent, committing what it has read. Written three times, once per
Python Kafka client, so that each can be tested against a real broker (see test_orders.py).

    {"customer": "ada", "amount": 9.5}
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter

FIRST_S = 10.0  # how long to wait for the first record (joining the group, the first fetch)
IDLE_S = 1.0  # after that, the topic is read to its end once no record arrives for this long


def _add(totals: Counter[str], value: bytes) -> None:
    order = json.loads(value)
    totals[order["customer"]] += order["amount"]


def totals_kafka_python(bootstrap_servers: str, topic: str, group: str) -> dict[str, float]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap_servers, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    totals: Counter[str] = Counter()
    try:
        while batch := consumer.poll(timeout_ms=int((IDLE_S if totals else FIRST_S) * 1000)):
            for records in batch.values():
                for record in records:
                    _add(totals, record.value)
        consumer.commit()
    finally:
        consumer.close()
    return dict(totals)


def totals_confluent(bootstrap_servers: str, topic: str, group: str) -> dict[str, float]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    totals: Counter[str] = Counter()
    try:
        while (msg := consumer.poll(IDLE_S if totals else FIRST_S)) is not None:
            if msg.error():
                raise RuntimeError(msg.error())
            _add(totals, msg.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return dict(totals)


def totals_aiokafka(bootstrap_servers: str, topic: str, group: str) -> dict[str, float]:
    async def run() -> dict[str, float]:
        from aiokafka import AIOKafkaConsumer

        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap_servers, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        totals: Counter[str] = Counter()
        try:
            while batch := await consumer.getmany(timeout_ms=int((IDLE_S if totals else FIRST_S) * 1000)):
                for records in batch.values():
                    for record in records:
                        _add(totals, record.value)
            await consumer.commit()
        finally:
            await consumer.stop()
        return dict(totals)

    return asyncio.run(run())
