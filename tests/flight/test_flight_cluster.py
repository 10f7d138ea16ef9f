"""Arrow Flight on every node of a real three-node cluster: any node plans a topic with one endpoint
per partition at the Flight server of its leader, and the leaders together return the whole topic.
A leader change during a DoGet: the stream at the old leader ends (completed or cut by its stop),
and the client recovers by asking GetFlightInfo again for what it has not read, reading the rest
from the new leader; pylog's own Flight reader does the same for a range planned at the old leader.
A follower tailing over Flight reads on from the new leader after a preferred leader election.
A notebook without pylog (only ADBC's Flight SQL driver, pyarrow and polars importable) lists the
topics as tables and joins two of them, one led by several nodes, getting Arrow back.
The tests share one cluster, in order (the last one stops a node)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
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


VIEWS, PAGES = "views", "pages"

# Runs in a fresh interpreter where pylog cannot be imported, as in a notebook with only
# adbc-driver-flightsql, pyarrow and polars installed; prints what it got as JSON.
NOTEBOOK = r"""
import sys
import time

class NoPylog:
    def find_spec(self, name, path=None, target=None):
        if name == "pylog" or name.startswith("pylog."):
            raise ImportError("pylog is not installed here")
        return None

sys.meta_path.insert(0, NoPylog())
try:
    import pylog
    importable = True
except ImportError:
    importable = False

import json
import adbc_driver_flightsql.dbapi as flight_sql
import polars as pl
import pyarrow as pa

url, views, pages = sys.argv[1:]
query = (
    'select v.partition, v."offset", decode(v.value) as view, decode(p.value) as title '
    f'from {views} v join pylog.topics.{pages} p on v.key = p.key '
    'where v."offset" >= 2 and p.partition = 0 and p.timestamp > now() - interval 1 hour '
    'order by v.partition, v."offset"')
with flight_sql.connect(url, autocommit=True) as conn, conn.cursor() as cur:
    objects = conn.adbc_get_objects(depth="tables").read_all().to_pylist()
    cur.execute(query)
    table = cur.fetch_arrow_table()
print(json.dumps({
    "pylog_importable": importable,
    "pylog_loaded": sorted(m for m in sys.modules if m == "pylog" or m.startswith("pylog.")),
    "catalogs": [c["catalog_name"] for c in objects],
    "tables": sorted(t["table_name"] for c in objects for s in c["catalog_db_schemas"]
                     for t in s["db_schema_tables"]),
    "arrow": isinstance(table, pa.Table),
    "rows": pl.from_arrow(table).to_dicts(),
}))
"""


def test_a_notebook_without_pylog_queries_two_topics_over_flight_sql(
        cluster: pylog.LocalCluster, tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for f in admin.create_topics([NewTopic(VIEWS, 3, 3), NewTopic(PAGES, 1, 3)]).values():
        f.result(60)
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True})
    titles = {f"p{i}": f"title-{i}" for i in range(4)}
    for key, title in titles.items():
        p.produce(PAGES, key=key.encode(), value=title.encode(), partition=0)
    views: dict[int, list[tuple[str, str]]] = {0: [], 1: [], 2: []}  # partition: (key, value) by offset
    for i in range(30):
        key = f"p{i % 5}"  # p4 has no page: the join drops it
        views[i % 3].append((key, f"view-{i}"))
        p.produce(VIEWS, key=key.encode(), value=f"view-{i}".encode(), partition=i % 3)
    assert p.flush(60) == 0

    url = cluster.flight_urls[-1]  # any node answers SQL over the whole cluster
    client = flight.FlightClient(url)
    try:
        fi = client.get_flight_info(flight.FlightDescriptor.for_path(VIEWS))
    finally:
        client.close()
    assert len({ep.locations[0].uri.decode() for ep in fi.endpoints}) > 1  # the query crosses brokers

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-I", "-c", NOTEBOOK, url, VIEWS, PAGES], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)

    assert got["pylog_importable"] is False and got["pylog_loaded"] == []
    assert got["catalogs"] == ["pylog"]
    assert {VIEWS, PAGES} <= set(got["tables"])
    assert got["arrow"] is True
    expected = [{"partition": part, "offset": off, "view": value, "title": titles[key]}
                for part in range(3) for off, (key, value) in enumerate(views[part])
                if off >= 2 and key in titles]
    assert len(expected) == 19
    assert got["rows"] == expected


def test_follow_over_flight_asks_the_new_leader_after_a_preferred_leader_election(
        cluster: pylog.LocalCluster) -> None:
    """The partition's leader moves (reordered replicas, then a preferred leader election) while a
    follower tails it over Flight: its next DoGet at the old leader is refused, it asks again where
    the partition is led, and it reads on from there, every record once and in order."""
    from pylog.sdk.cluster_admin import ClusterAdminSync

    topic, tp = "tailing", ("tailing", 0)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(60)
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})

    def produce(first: int, n: int) -> None:
        for i in range(first, first + n):
            p.produce(topic, value=b"%d" % i, partition=0)
        assert p.flush(60) == 0

    def read_until(follower: pylog.sdk.follow.Follower, n: int, got: list[int]) -> None:
        deadline = time.monotonic() + 60
        while len(got) < n:
            batch = follower.poll(0.5)
            if batch is not None:
                got += batch.column("offset").to_pylist()
            assert time.monotonic() < deadline, f"read {len(got)} of {n}"

    produce(0, 100)
    got: list[int] = []
    with pylog.follow(topic, bootstrap_servers=cluster.bootstrap_servers, transport="flight",
                      flight=cluster.flight_urls[0], starting_offsets="earliest", max_wait=0.2) as follower:
        read_until(follower, 100, got)
        with ClusterAdminSync(cluster.bootstrap_servers) as ca:
            before = ca.state().partitions[tp]
            first, second, *rest = before.replicas
            ca.alter_reassignments({tp: [second, first, *rest]})
            deadline = time.monotonic() + 60
            while ca.state().partitions[tp].leader != second:
                if not ca.list_reassignments():
                    ca.elect_preferred_leaders([tp])
                assert time.monotonic() < deadline, ca.state().partitions[tp]
                time.sleep(0.2)
        produce(100, 100)
        read_until(follower, 200, got)
        assert follower.transport == "flight"
        assert follower._reader.retries > 0  # the old leader refused, the new one answered
    assert got == list(range(200))


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
    # asking again: the new leader serves the rest once its high watermark has caught up (until
    # then the records are written there but not readable, and it answers "unavailable")
    deadline = time.monotonic() + 30
    while True:
        try:
            new = _endpoint(survivor, start_offset=len(read))
            break
        except flight.FlightUnavailableError:
            assert time.monotonic() < deadline, "the new leader never served the rest"
            time.sleep(0.1)
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
