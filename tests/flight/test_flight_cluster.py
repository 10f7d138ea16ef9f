"""Arrow Flight on every node of a real three-node cluster: each node plans and serves the
partitions it leads, and together they return the whole topic."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.flight as flight
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import pylog


def test_every_node_serves_the_partitions_it_leads(tmp_path) -> None:
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
        tables, served = [], []
        for url in urls:
            client = flight.FlightClient(url)
            try:
                fi = client.get_flight_info(flight.FlightDescriptor.for_path("spread"))
                for ep in fi.endpoints:
                    assert [loc.uri.decode() for loc in ep.locations] == [url]
                    tables.append(client.do_get(ep.ticket).read_all())
                served += [t.column("partition")[0].as_py() for t in tables[len(tables) - len(fi.endpoints):]
                           if t.num_rows]
            finally:
                client.close()
        assert sorted(served) == list(range(6))  # each partition from its leader, once
        got = pa.concat_tables(tables).sort_by([("partition", "ascending"), ("offset", "ascending")])
        expected = pylog.read_topic("spread", bootstrap_servers=cluster.bootstrap_servers).sort_by(
            [("partition", "ascending"), ("offset", "ascending")])
        assert got.num_rows == 600
        assert got.equals(expected)
