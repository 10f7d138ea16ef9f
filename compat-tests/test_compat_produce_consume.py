"""Produce and consume with every codec each client supports, read back by the client itself and
by a second client; mixed codecs in one partition."""

from __future__ import annotations

import pytest
from compat_broker import BrokerProcess
from compat_clients import CLIENT_CODECS, Rec, consume, create_topic, produce

CASES = [(client, codec) for client, codecs in CLIENT_CODECS.items() for codec in codecs]
N = 60


def records(tag: str, n: int = N) -> list[Rec]:
    # Repetitive values so every codec really compresses; one partition so order is total.
    return [Rec(f"{tag} record {i:04d} ".encode() * 8, f"key-{i}".encode(), partition=0) for i in range(n)]


def tools_for(*clients: str) -> list[str]:
    return [c for c in clients if c in ("kcat", "kafkajs")]


@pytest.mark.parametrize(("client", "codec"), CASES, ids=[f"{c}-{z}" for c, z in CASES])
def test_produce_consume_codec(
    broker: BrokerProcess, topic_name: str, client: str, codec: str, request: pytest.FixtureRequest
) -> None:
    for tool in tools_for(client):
        request.getfixturevalue(tool)
    create_topic(broker.bootstrap, topic_name, partitions=1)
    sent = records(f"{client}/{codec}")
    produced = produce(client, broker.bootstrap, topic_name, sent, compression=codec)
    if client != "kcat":
        assert produced.positions == [(0, i) for i in range(N)]

    reference = "kafka-python" if client == "confluent-kafka" else "confluent-kafka"
    for reader in (client, reference):
        got = consume(reader, broker.bootstrap, topic_name, N)
        assert [(r.offset, r.key, r.value) for r in got] == [
            (i, s.key, s.value) for i, s in enumerate(sent)
        ], f"{reader} read back something else than {client} wrote with {codec}"


@pytest.mark.parametrize("reader", ["kafka-python", "confluent-kafka", "aiokafka", "kcat"])
def test_mixed_codecs_in_one_partition(
    broker: BrokerProcess, topic_name: str, reader: str, request: pytest.FixtureRequest
) -> None:
    """Batches of every codec interleaved in one partition come back in offset order."""
    for tool in tools_for(reader):
        request.getfixturevalue(tool)
    create_topic(broker.bootstrap, topic_name, partitions=1)
    sent: list[Rec] = []
    for round_ in range(2):
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            batch = records(f"{codec}-{round_}", 7)
            produce("confluent-kafka", broker.bootstrap, topic_name, batch, compression=codec)
            sent += batch
    got = consume(reader, broker.bootstrap, topic_name, len(sent))
    assert [(r.offset, r.value) for r in got] == [(i, s.value) for i, s in enumerate(sent)]


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka", "aiokafka"])
def test_acks_variants(broker: BrokerProcess, topic_name: str, client: str) -> None:
    """acks=1 and acks=all are both acknowledged with offsets; acks=0 records still land."""
    create_topic(broker.bootstrap, topic_name, partitions=1)
    one = produce(client, broker.bootstrap, topic_name, records("acks1", 5), acks="1", idempotent=False)
    assert [o for _, o in one.positions] == [0, 1, 2, 3, 4]
    produce(client, broker.bootstrap, topic_name, records("acks0", 5), acks="0", idempotent=False)
    every = produce(client, broker.bootstrap, topic_name, records("acksall", 5), acks="all")
    assert [o for _, o in every.positions] == [10, 11, 12, 13, 14]
    got = consume("confluent-kafka", broker.bootstrap, topic_name, 15)
    assert [r.offset for r in got] == list(range(15))
