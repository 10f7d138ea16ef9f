"""Fetch byte limits across partitions (Kafka's ReplicaManager rules), over a real socket.

Served from the wire cache, from the log (cache off), and re-encoded from the log (the topic's
compression.type differs from the producer's codec), with plain and compressed batches.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import BrokerThread, Client
from pylog.protocol import records as rec
from pylog.protocol.api import ApiKey
from records_util import make_batch
from test_produce_fetch import create, produce

PARTITIONS = 3
GZIP = 1


@pytest.fixture(params=["cache", "log", "reencoded"])
def source(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def broker(tmp_path: Path, source: str) -> Iterator[BrokerThread]:
    config = {} if source == "cache" else {"pylog.wire.cache.bytes": "0"}
    b = BrokerThread(tmp_path / "data", config).start()
    yield b
    b.stop()


def _value(i: int) -> bytes:
    return random.Random(i).randbytes(400)  # incompressible: gzip keeps the size


@pytest.fixture(params=[0, GZIP], ids=["plain", "gzip"])
def topic(request: pytest.FixtureRequest, client: Client, source: str) -> tuple[str, int]:
    """A topic whose partitions each hold two one-record batches of about the same size; returns
    (name, largest batch size as fetched)."""
    configs = {"compression.type": "zstd"} if source == "reencoded" else {}
    create(client, "lim", PARTITIONS, configs)
    for p in range(PARTITIONS):
        for i in range(2):
            batch = make_batch([_value(p * 10 + i)], compression=request.param)
            assert produce(client, "lim", batch, partition=p).error_code == 0
    sizes = fetch_all(client, "lim", max_bytes=1 << 20, partition_max_bytes=1 << 20)
    assert all(len(s) == 2 for s in sizes.values())
    return "lim", max(max(s) for s in sizes.values())


def fetch_all(
    client: Client,
    topic: str,
    *,
    max_bytes: int,
    partition_max_bytes: int,
    offsets: dict[int, int] | None = None,
) -> dict[int, list[int]]:
    """Fetch every partition; the batch sizes each one returned."""
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": p,
                        "fetch_offset": (offsets or {}).get(p, 0),
                        "partition_max_bytes": partition_max_bytes,
                    }
                    for p in range(PARTITIONS)
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    resp = client.request(ApiKey.FETCH, 12, body)
    out = {}
    for part in resp.responses[0].partitions:
        assert part.error_code == 0
        out[part.partition_index] = [h.size_in_bytes for h, _ in rec.iter_batches(part.records or b"")]
    return out


def test_max_bytes_is_shared_by_the_partitions(client: Client, topic: tuple[str, int]) -> None:
    name, size = topic
    got = fetch_all(client, name, max_bytes=2 * size + 10, partition_max_bytes=1 << 20)
    assert [len(got[p]) for p in range(PARTITIONS)] == [2, 0, 0]
    got = fetch_all(client, name, max_bytes=3 * size + 10, partition_max_bytes=1 << 20)
    assert [len(got[p]) for p in range(PARTITIONS)] == [2, 1, 0]
    assert sum(map(sum, got.values())) <= 3 * size + 10


def test_only_the_first_batch_may_exceed_max_bytes(client: Client, topic: tuple[str, int]) -> None:
    name, size = topic
    got = fetch_all(client, name, max_bytes=size // 2, partition_max_bytes=1 << 20)
    assert [len(got[p]) for p in range(PARTITIONS)] == [1, 0, 0]
    got = fetch_all(client, name, max_bytes=0, partition_max_bytes=1 << 20)
    assert [len(got[p]) for p in range(PARTITIONS)] == [1, 0, 0]


def test_the_first_partition_with_data_gets_the_exception(client: Client, topic: tuple[str, int]) -> None:
    name, size = topic
    got = fetch_all(client, name, max_bytes=size // 2, partition_max_bytes=1 << 20, offsets={0: 2})
    assert [len(got[p]) for p in range(PARTITIONS)] == [0, 1, 0]


def test_partition_max_bytes_applies_on_top(client: Client, topic: tuple[str, int]) -> None:
    name, size = topic
    got = fetch_all(client, name, max_bytes=1 << 20, partition_max_bytes=size + 10)
    assert [len(got[p]) for p in range(PARTITIONS)] == [1, 1, 1]
    got = fetch_all(client, name, max_bytes=1 << 20, partition_max_bytes=size // 2)
    assert [len(got[p]) for p in range(PARTITIONS)] == [1, 0, 0]
