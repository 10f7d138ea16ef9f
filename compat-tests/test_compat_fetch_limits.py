"""Fetch size limits as real consumers see them.

A response holds at most the request's max_bytes across partitions (librdkafka: fetch.max.bytes),
each partition at most its partition_max_bytes; only the first batch of the first partition that
returns data may be larger, so a consumer always progresses. librdkafka refuses any response frame
larger than receive.message.max.bytes, so a broker that ignores max_bytes leaves it stuck.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from compat_broker import BrokerProcess
from compat_clients import Rec, consume, create_topic, produce

RECORD = 900_000
# librdkafka wants receive.message.max.bytes >= fetch.max.bytes + 512 (room for the frame's headers).
TIGHT = {"fetch.max.bytes": 1_000_000, "receive.message.max.bytes": 1_000_512}
RD_BIG = {"message.max.bytes": 8 << 20}


def incompressible(n: int, seed: int) -> bytes:
    # Random bytes, so a compressed batch is as large as an uncompressed one.
    return random.Random(seed).randbytes(n)


def _produce_and_read(
    broker: BrokerProcess,
    topic: str,
    sizes: dict[int, list[int]],
    *,
    compression: str,
    consumer: dict[str, Any],
    topic_configs: dict[str, str] | None = None,
) -> None:
    """Produce records of ``sizes[partition]`` bytes (one batch each) and read them all back."""
    create_topic(broker.bootstrap, topic, partitions=len(sizes), configs=topic_configs)
    recs = [
        Rec(incompressible(n, seed=p * 1000 + i), f"k{p}-{i}".encode(), partition=p)
        for p, ns in sizes.items()
        for i, n in enumerate(ns)
    ]
    for r in recs:  # one record per produce call and flush: one batch each
        produce("confluent-kafka", broker.bootstrap, topic, [r], compression=compression, config=RD_BIG)
    got = consume(
        "confluent-kafka", broker.bootstrap, topic, len(recs), partitions=sorted(sizes), config=consumer
    )
    assert [(g.partition, g.key, g.value) for g in got] == [(r.partition, r.key, r.value) for r in recs]


@pytest.mark.parametrize("compression", ["none", "zstd", "lz4"])
def test_two_partitions_of_900kb_records_under_a_1mb_fetch(
    broker: BrokerProcess, topic_name: str, compression: str
) -> None:
    """Two partitions with 900 KB batches: one response may carry only one of them."""
    _produce_and_read(
        broker, topic_name, {0: [RECORD] * 2, 1: [RECORD] * 2}, compression=compression, consumer=TIGHT
    )


def test_one_partition_of_900kb_records_under_a_1mb_fetch(broker: BrokerProcess, topic_name: str) -> None:
    _produce_and_read(broker, topic_name, {0: [RECORD] * 3}, compression="none", consumer=TIGHT)


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_many_partitions_fill_one_response(broker: BrokerProcess, topic_name: str, compression: str) -> None:
    """Six partitions of 300 KB batches: a response takes what fits, the rest comes next."""
    sizes = {p: [300_000, 300_000] for p in range(6)}
    _produce_and_read(broker, topic_name, sizes, compression=compression, consumer=TIGHT)


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_first_batch_larger_than_max_bytes(broker: BrokerProcess, topic_name: str, compression: str) -> None:
    """A 1.5 MB batch with fetch.max.bytes and max.partition.fetch.bytes at 1 MB still comes
    (alone: the small batch of the other partition waits for the next fetch)."""
    consumer = {
        "fetch.max.bytes": 1_000_000,
        "max.partition.fetch.bytes": 1_000_000,
        "receive.message.max.bytes": 4_000_000,
    }
    _produce_and_read(
        broker,
        topic_name,
        {0: [1_500_000, 1000], 1: [1000, 1_500_000]},
        compression=compression,
        consumer=consumer,
        topic_configs={"max.message.bytes": str(4 << 20)},
    )
