"""Arrow Flight on every node of a real three-node cluster: any node plans a topic with one endpoint
per partition at the Flight server of its leader, and the leaders together return the whole topic."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.flight as flight
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import pylog


def test_any_node_points_each_partition_at_its_leader(tmp_path) -> None:
    with pylog.LocalCluster(3, data_dir=tmp_path / "c",
                            config={"pylog.flight.listeners": "grpc://127.0.0.1:0"}) as cluster:
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
