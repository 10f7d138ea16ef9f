"""DoGet over a topic whose early segments live only in the remote tier (a file:// store): a real
broker process uploads and deletes them locally, and a Flight read from offset 0 returns every
record, the remote ones first, then the local ones."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import pylog

TOPIC = "tiered-flight"
RECORDS = 400


def _local_start(data_dir: Path) -> int:
    """The base offset of the partition's first local segment."""
    bases = [int(f.stem) for f in (data_dir / f"{TOPIC}-0").glob("*.arrow")]
    return min(bases, default=0)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pylog.LocalBroker]:
    root = tmp_path_factory.mktemp("flight-tiered")
    config = {"pylog.flight.listeners": "grpc://127.0.0.1:0",
              "remote.log.storage.system.enable": "true",
              "remote.log.storage.uri": f"file://{root / 'store'}",
              "remote.log.manager.task.interval.ms": "100"}
    with pylog.LocalBroker(root / "data", config=config) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        topic_config = {"remote.storage.enable": "true", "segment.bytes": "16384",
                        "local.retention.bytes": "1"}
        admin.create_topics([NewTopic(TOPIC, 1, 1, config=topic_config)])[TOPIC].result(30)
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 5, "batch.num.messages": 20})
        for i in range(RECORDS):
            p.produce(TOPIC, key=b"k%d" % i, value=b"v%d-" % i + b"x" * 500)
        assert p.flush(30) == 0
        deadline = time.monotonic() + 30
        while _local_start(b.data_dir) == 0:  # the first segments uploaded, then deleted locally
            assert time.monotonic() < deadline, "no segment left the local log"
            time.sleep(0.1)
        yield b


def test_a_read_from_offset_zero_streams_the_remote_segments_then_the_local_ones(
        broker: pylog.LocalBroker) -> None:
    assert broker.flight_url is not None
    local_start = _local_start(broker.data_dir)
    assert 0 < local_start < RECORDS
    client = flight.FlightClient(broker.flight_url)
    try:
        command = {"topic": TOPIC, "start_offset": 0, "columns": ["offset", "key", "value"]}
        fi = client.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(command).encode()))
        assert fi.total_records == RECORDS
        got = pa.concat_tables([client.do_get(ep.ticket).read_all() for ep in fi.endpoints])
    finally:
        client.close()
    assert got.column("offset").to_pylist() == list(range(RECORDS))
    assert got.column("key").to_pylist() == [b"k%d" % i for i in range(RECORDS)]
    assert got.column("value").to_pylist() == [b"v%d-" % i + b"x" * 500 for i in range(RECORDS)]


def test_the_sdk_reads_a_tiered_topic_over_flight_whole(broker: pylog.LocalBroker) -> None:
    """transport="flight" reads the history through the broker too; it equals the Kafka read."""
    scan = pylog.scan_topic(TOPIC, bootstrap_servers=broker.bootstrap_servers, transport="flight",
                            remote_storage=False, columns=["offset", "value"])
    assert scan.transport() == "flight"
    over_flight = scan.to_arrow()
    over_kafka = pylog.read_topic(TOPIC, bootstrap_servers=broker.bootstrap_servers, transport="kafka",
                                  remote_storage=False, columns=["offset", "value"])
    assert over_flight.column("offset").to_pylist() == list(range(RECORDS))
    assert over_flight.equals(over_kafka)
