"""`pylog.follow` over Arrow Flight against a real broker process: tailing DoGets that wait on the
leader see records produced after the follower started, no Kafka Fetch answers a record of the
topic on the way (the broker's bytes-out metric), and the follower stops cleanly; ``auto`` picks
Flight, ``kafka`` the Kafka protocol; a position past the log end restarts at the end."""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from collections.abc import Iterator

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import pylog
from pylog.sdk.flight_tail import FlightTail

N = 300


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pylog.LocalBroker]:
    with pylog.LocalBroker(tmp_path_factory.mktemp("flight-follow") / "data",
                           config={"pylog.flight.listeners": "grpc://127.0.0.1:0"}) as b:
        yield b


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, n: int, start: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    for i in range(start, start + n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
        if i % 50 == 0:
            p.flush(10)  # several produce rounds, so the follower waits between them
    assert p.flush(30) == 0


def kafka_bytes_out(broker: pylog.LocalBroker, topic: str) -> float:
    """Record bytes of `topic` the broker sent in Kafka Fetch answers (its /metrics)."""
    assert broker.metrics_url is not None
    text = urllib.request.urlopen(broker.metrics_url + "/metrics", timeout=10).read().decode()
    found = re.findall(rf'^kafka_server_brokertopicmetrics_bytesout_total\{{topic="{topic}"\}} (\S+)$',
                       text, re.M)
    return sum(float(v) for v in found)


def test_follow_over_flight_sees_records_produced_after_it_started(broker: pylog.LocalBroker) -> None:
    create(broker.bootstrap_servers, "tailed", 2)
    produce(broker.bootstrap_servers, "tailed", 20)  # before the start: not followed ("latest")
    follower = pylog.follow("tailed", bootstrap_servers=broker.bootstrap_servers, transport="flight",
                            max_wait=0.2, columns=["partition", "offset", "key", "value"])
    assert follower.transport == "flight" and isinstance(follower._reader, FlightTail)
    assert follower.positions == {0: 10, 1: 10}
    writer = threading.Thread(target=produce, args=(broker.bootstrap_servers, "tailed", N, 20))
    writer.start()
    batches = []
    deadline = time.monotonic() + 60
    with follower:
        for batch in follower:
            batches.append(batch)
            if sum(b.num_rows for b in batches) >= N:
                follower.stop()
            assert time.monotonic() < deadline, "the follower fell behind"
    writer.join()
    got = pa.Table.from_batches(batches)
    assert got.num_rows == N
    assert sorted(got.column("value").to_pylist(), key=lambda v: int(v[1:])) == \
        [b"v%d" % i for i in range(20, 20 + N)]
    for p in (0, 1):
        offsets = got.filter(pa.compute.equal(got["partition"], p)).column("offset").to_pylist()
        assert offsets == list(range(10, 10 + N // 2))
    assert follower.positions == {0: 10 + N // 2, 1: 10 + N // 2}
    assert follower._reader.gets > 0  # the records came in tailing DoGets ...
    assert kafka_bytes_out(broker, "tailed") == 0  # ... and no Kafka Fetch answered any record of the topic
    with pytest.raises(StopIteration):
        next(follower)  # stopped and closed


def test_auto_follows_over_flight_and_kafka_keeps_the_kafka_protocol(broker: pylog.LocalBroker) -> None:
    create(broker.bootstrap_servers, "either", 2)
    produce(broker.bootstrap_servers, "either", 40)
    for transport, reader in (("auto", "FlightTail"), ("kafka", "TailReader")):
        sent_before = kafka_bytes_out(broker, "either")
        with pylog.follow("either", bootstrap_servers=broker.bootstrap_servers, transport=transport,
                          starting_offsets="earliest", max_wait=0.2, idle_timeout=1.0) as follower:
            assert type(follower._reader).__name__ == reader
            assert follower.transport == ("kafka" if transport == "kafka" else "flight")
            got = pa.Table.from_batches(list(follower))
        assert sorted(got.column("value").to_pylist()) == sorted(b"v%d" % i for i in range(40))
        assert (kafka_bytes_out(broker, "either") > sent_before) == (transport == "kafka")


def test_a_position_outside_the_log_restarts_at_its_end(broker: pylog.LocalBroker) -> None:
    create(broker.bootstrap_servers, "reset", 2)
    produce(broker.bootstrap_servers, "reset", 10)
    with pylog.follow("reset", bootstrap_servers=broker.bootstrap_servers, transport="flight",
                      starting_offsets={"reset": {"0": 0, "1": 0}}, max_wait=0.2) as follower:
        follower._reader.seek({0: 1000})  # past the end: continues from the end, with a warning
        first = follower.poll(2.0)
        assert first is not None and set(first.column("partition").to_pylist()) == {1}
        produce(broker.bootstrap_servers, "reset", 2, start=10)
        deadline = time.monotonic() + 30
        seen: list[tuple[int, int]] = []
        while (0, 5) not in seen:
            batch = follower.poll(0.5)
            if batch is not None:
                seen += list(zip(batch.column("partition").to_pylist(), batch.column("offset").to_pylist()))
            assert time.monotonic() < deadline, seen
        assert follower.positions[0] == 6
