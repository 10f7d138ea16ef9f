"""Arrow Flight on every node of a real three-node cluster: any node plans a topic with one endpoint
per partition at the Flight server of its leader, and the leaders together return the whole topic.
A leader change during a DoGet: the stream at the old leader ends (completed or cut by its stop),
and the client recovers by asking GetFlightInfo again for what it has not read, reading the rest
from the new leader; pylog's own Flight reader does the same for a range planned at the old leader.
The tests share one cluster, in order (the last one stops a node)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import pylog
from pylog.sdk.flight_source import FlightTopicSource
from pylog.sdk.offsets import PartitionRange
from pylog.sdk.options import ReadOptions

TOPIC = "moving"
N = 2000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pylog.LocalCluster]:
    with pylog.LocalCluster(3, data_dir=Path(tmp_path_factory.mktemp("flight-cluster")) / "c",
                            config={"pylog.flight.listeners": "grpc://127.0.0.1:0"}) as c:
        yield c


def test_any_node_points_each_partition_at_its_leader(cluster: pylog.LocalCluster) -> None:
    urls = cluster.flight_urls
    assert len(urls) == 3 and len(set(urls)) == 3
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("spread", 6, 3)])["spread"].result(60)
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(600):
        p.produce("spread", value=str(i).encode(), partition=i % 6)
    assert p.flush(60) == 0
    leaders = {}
    for url in urls:  # any node plans the whole topic: one endpoint per partition, at its leader
        client = flight.FlightClient(url)
        try:
            fi = client.get_flight_info(flight.FlightDescriptor.for_path("spread"))
        finally:
            client.close()
        assert len(fi.endpoints) == 6
        found = {json.loads(ep.ticket.ticket)["partition"]: ep.locations[0].uri.decode()
                 for ep in fi.endpoints}
        assert sorted(found) == list(range(6)) and set(found.values()) <= set(urls)
        assert not leaders or found == leaders
        leaders = found
    assert len(set(leaders.values())) > 1  # spread over several leaders
    tables = []
    for ep in fi.endpoints:  # each read from the location the endpoint names
        client = flight.FlightClient(ep.locations[0])
        try:
            tables.append(client.do_get(ep.ticket).read_all())
        finally:
            client.close()
    got = pa.concat_tables(tables).sort_by([("partition", "ascending"), ("offset", "ascending")])
    expected = pylog.read_topic("spread", bootstrap_servers=cluster.bootstrap_servers).sort_by(
        [("partition", "ascending"), ("offset", "ascending")])
    assert got.num_rows == 600
    assert got.equals(expected)


def _endpoint(url: str, **command: object) -> flight.FlightEndpoint:
    client = flight.FlightClient(url)
    try:
        cmd = json.dumps({"topic": TOPIC, "partitions": [0], **command}).encode()
        (ep,) = client.get_flight_info(flight.FlightDescriptor.for_command(cmd)).endpoints
        return ep
    finally:
        client.close()


def test_a_leader_change_during_a_doget_is_recovered_by_asking_again(cluster: pylog.LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(60)
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0,
                  "batch.num.messages": 50})
    for i in range(N):
        p.produce(TOPIC, value=b"%06d" % i + b"x" * 2000, partition=0)
    assert p.flush(60) == 0
    by_url = {n.flight_url: node_id for node_id, n in cluster.nodes.items()}
    old = _endpoint(cluster.flight_urls[0])
    old_url = old.locations[0].uri.decode()
    survivor = next(u for u in cluster.flight_urls if u != old_url)

    client = flight.FlightClient(old_url)
    reader = client.do_get(old.ticket)
    got = [reader.read_chunk().data]
    cluster.stop_node(by_url[old_url])  # controlled shutdown: leadership moves, then the node exits
    try:
        got += [chunk.data for chunk in reader]
    except flight.FlightError:
        pass  # cut by the stop: what was read stays read
    client.close()

    read = pa.Table.from_batches(got).column("offset").to_pylist()
    assert read == list(range(len(read)))
    new = _endpoint(survivor, start_offset=len(read))  # asking again: the new leader, the rest
    assert new.locations[0].uri.decode() != old_url
    client = flight.FlightClient(new.locations[0])
    try:
        rest = client.do_get(new.ticket).read_all()
    finally:
        client.close()
    values = [v[:6] for v in pa.Table.from_batches(got).column("value").to_pylist()]
    values += [v[:6] for v in rest.column("value").to_pylist()]
    assert values == [b"%06d" % i for i in range(N)]

    # pylog's reader, holding a plan at the old leader (now gone), asks again and reads it all
    source = FlightTopicSource(survivor, ReadOptions(bootstrap_servers=cluster.bootstrap_servers))
    try:
        source.place(TOPIC, 0, old_url)
        batches = [b for _, b in source.read([PartitionRange(TOPIC, 0, 0, N)], ["offset"])]
    finally:
        source.close()
    assert pa.Table.from_batches(batches).column("offset").to_pylist() == list(range(N))
