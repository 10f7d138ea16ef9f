"""A Flight read of one partition of a broker holding hundreds opens that partition only: GetFlightInfo
and DoGet never list the log directory nor look into another partition's directory. A real broker
process writes the data directory; a Flight server in this process serves it, so the directories it
lists are seen (Python's audit events ``os.scandir`` / ``os.listdir``)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.flight as flight
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import pylog
from pylog.flight.server import FlightNode, FlightService, start_flight

TOPIC = "many"
PARTITIONS = 300
READ = 7  # the partition read


class _Listings:
    """The directories listed in this process while `watching` is set (an audit hook stays for the
    process's life: outside a test it records nothing)."""

    def __init__(self) -> None:
        self.watching = threading.Event()
        self.paths: list[Path] = []
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple[object, ...]) -> None:
        if self.watching.is_set() and event in ("os.scandir", "os.listdir") and args:
            self.paths.append(Path(os.fsdecode(args[0] if args[0] is not None else ".")).resolve())  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pylog.LocalBroker]:
    with pylog.LocalBroker(tmp_path_factory.mktemp("flight-many") / "data",
                           config={"pylog.flight.listeners": "grpc://127.0.0.1:0"}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        deadline = time.monotonic() + 30
        while len(list(b.data_dir.glob(f"{TOPIC}-*"))) < PARTITIONS:  # made once the topic is applied
            assert time.monotonic() < deadline, "the broker did not make the partitions' directories"
            time.sleep(0.05)
        p = Producer({"bootstrap.servers": b.bootstrap_servers})
        for partition in (READ, READ + 1):
            for i in range(20):
                p.produce(TOPIC, value=b"v%d-%d" % (partition, i), partition=partition)
        assert p.flush(30) == 0
        yield b


@pytest.fixture(scope="module")
def server(broker: pylog.LocalBroker) -> Iterator[FlightService]:
    """A Flight server over the broker's data directory, as the broker's own serves it."""
    data_dir = broker.data_dir.resolve()
    node = FlightNode(node_id=1,
                      led=lambda topic: dict.fromkeys(range(PARTITIONS), data_dir) if topic == TOPIC else {},
                      leaders=lambda topic: dict.fromkeys(range(PARTITIONS), 1) if topic == TOPIC else None,
                      locate=lambda node: None, authorize=lambda *args: True,
                      produce_to=lambda: (broker.bootstrap_servers, None))
    (service,) = start_flight("grpc://127.0.0.1:0", node, lambda: [])
    service.ready.set()
    yield service
    service.shutdown()


def test_a_one_partition_read_lists_no_other_partition(broker: pylog.LocalBroker,
                                                        server: FlightService) -> None:
    data_dir = broker.data_dir.resolve()
    assert len([d for d in data_dir.iterdir() if d.name.startswith(f"{TOPIC}-")]) == PARTITIONS
    listings = _Listings()
    client = flight.FlightClient(server.url)
    try:
        command = {"topic": TOPIC, "partitions": [READ], "columns": ["offset", "value"]}
        listings.watching.set()
        fi = client.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(command).encode()))
        got = client.do_get(fi.endpoints[0].ticket).read_all()
        listings.watching.clear()
    finally:
        listings.watching.clear()
        client.close()
    assert fi.total_records == 20 and len(fi.endpoints) == 1
    assert got.column("value").to_pylist() == [b"v7-%d" % i for i in range(20)]
    mine = data_dir / f"{TOPIC}-{READ}"
    listed = [p for p in listings.paths if p == data_dir or data_dir in p.parents]  # not imports'
    assert mine in listed, "the read's own partition was not listed: the audit hook saw nothing"
    assert all(p == mine or mine in p.parents for p in listed), listed
    # the broker's own Flight server answers the same rows
    assert broker.flight_url is not None
    own = flight.FlightClient(broker.flight_url)
    try:
        fi = own.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(command).encode()))
        assert own.do_get(fi.endpoints[0].ticket).read_all().equals(got)
    finally:
        own.close()
