"""Record size limits: a 1 MB record is accepted and read back by every client; a record over
message.max.bytes (Kafka's default 1048588) is refused with MESSAGE_TOO_LARGE, by the broker."""

from __future__ import annotations

import asyncio

import pytest
from compat_broker import BrokerProcess
from compat_clients import Rec, consume, create_topic, produce
from compat_raw import RawConn, list_offset, record_batch
from compat_raw import produce as raw_produce

ONE_MB = 1_000_000
TOO_BIG = 2 * 1024 * 1024
MESSAGE_TOO_LARGE = 10
# Raise each client's own limit so that the broker, not the client, has to say no.
KP_BIG = {"max_request_size": 8 << 20}
RD_BIG = {"message.max.bytes": 8 << 20}


def big_value(n: int, seed: int = 7) -> bytes:
    # Not compressible by accident: a cheap deterministic byte pattern with a long period.
    return bytes((i * 131 + seed + (i >> 8) * 17) % 251 for i in range(n))


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka", "aiokafka", "kafkajs"])
def test_one_megabyte_record(
    broker: BrokerProcess, topic_name: str, client: str, request: pytest.FixtureRequest
) -> None:
    if client == "kafkajs":
        request.getfixturevalue("kafkajs")
    create_topic(broker.bootstrap, topic_name)
    value = big_value(ONE_MB)
    config = {"kafka-python": KP_BIG, "confluent-kafka": RD_BIG, "aiokafka": {"max_request_size": 8 << 20}}
    produce(
        client, broker.bootstrap, topic_name, [Rec(value, b"big", partition=0)], config=config.get(client)
    )
    for reader in ("kafka-python", "confluent-kafka", "aiokafka"):
        [got] = consume(reader, broker.bootstrap, topic_name, 1)
        assert (got.key, len(got.value or b""), got.value == value) == (b"big", ONE_MB, True), reader


def test_one_megabyte_record_kcat(broker: BrokerProcess, topic_name: str, kcat: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    value = b"x" * ONE_MB
    produce("kafka-python", broker.bootstrap, topic_name, [Rec(value, partition=0)], config=KP_BIG)
    [got] = consume("kcat", broker.bootstrap, topic_name, 1)
    assert got.value == value


def test_kafka_python_too_large(broker: BrokerProcess, topic_name: str) -> None:
    from kafka.errors import MessageSizeTooLargeError

    create_topic(broker.bootstrap, topic_name)
    with pytest.raises(MessageSizeTooLargeError) as exc:
        produce(
            "kafka-python",
            broker.bootstrap,
            topic_name,
            [Rec(big_value(TOO_BIG), partition=0)],
            config={**KP_BIG, "retries": 0},
        )
    assert getattr(exc.value, "errno", MESSAGE_TOO_LARGE) == MESSAGE_TOO_LARGE
    assert_still_works(broker, topic_name)


def test_confluent_too_large(broker: BrokerProcess, topic_name: str) -> None:
    from confluent_kafka import KafkaError, KafkaException

    create_topic(broker.bootstrap, topic_name)
    with pytest.raises(KafkaException) as exc:
        produce(
            "confluent-kafka",
            broker.bootstrap,
            topic_name,
            [Rec(big_value(TOO_BIG), partition=0)],
            config=RD_BIG,
        )
    # Code 10 in a delivery report is the broker's answer (the local check raises from produce()).
    assert exc.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert_still_works(broker, topic_name)


def test_aiokafka_too_large(broker: BrokerProcess, topic_name: str) -> None:
    from aiokafka.errors import MessageSizeTooLargeError

    create_topic(broker.bootstrap, topic_name)
    with pytest.raises(MessageSizeTooLargeError):
        asyncio.run(_aiokafka_send_big(broker.bootstrap, topic_name))
    assert_still_works(broker, topic_name)


async def _aiokafka_send_big(bootstrap: str, topic: str) -> None:
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, max_request_size=8 << 20, request_timeout_ms=20000)
    await p.start()
    try:
        await asyncio.wait_for(p.send_and_wait(topic, big_value(TOO_BIG), partition=0), 60)
    finally:
        await p.stop()


def test_raw_too_large_answers_error_10(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    with RawConn("127.0.0.1", broker.port, timeout=30) as conn:
        res = raw_produce(conn, topic_name, 0, record_batch([big_value(TOO_BIG)]))
        assert res.error_code == MESSAGE_TOO_LARGE
        assert list_offset(conn, topic_name, 0) == (0, 0), "the refused batch was stored"


def test_topic_max_message_bytes(broker: BrokerProcess, topic_name: str) -> None:
    """The topic-level override max.message.bytes applies to that topic only."""
    from confluent_kafka import KafkaError, KafkaException

    create_topic(broker.bootstrap, topic_name, configs={"max.message.bytes": "20000"})
    produce("confluent-kafka", broker.bootstrap, topic_name, [Rec(big_value(10_000), partition=0)])
    with pytest.raises(KafkaException) as exc:
        produce("confluent-kafka", broker.bootstrap, topic_name, [Rec(big_value(50_000), partition=0)])
    assert exc.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE


def assert_still_works(broker: BrokerProcess, topic: str) -> None:
    produce("kafka-python", broker.bootstrap, topic, [Rec(b"small", partition=0)])
    assert [r.value for r in consume("confluent-kafka", broker.bootstrap, topic, 1)] == [b"small"]
