"""Arrow Flight on a real broker process: pyarrow.flight clients against ``pylog.flight.listeners``,
records produced with confluent-kafka, compared with ``pylog.read_topic``."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import pylog

TOPIC = "flights"


def create(bootstrap: str, topic: str, partitions: int = 1, extra: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **(extra or {})})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, n: int, partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), key=f"k{i}".encode(), partition=partition)
    assert p.flush(30) == 0


def info(client: flight.FlightClient, **command: object) -> flight.FlightInfo:
    return client.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(command).encode()))


def read_all(client: flight.FlightClient, fi: flight.FlightInfo) -> pa.Table:
    tables = [client.do_get(ep.ticket).read_all() for ep in fi.endpoints]
    return pa.concat_tables(tables) if tables else fi.schema.empty_table()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pylog.LocalBroker]:
    b = pylog.LocalBroker(tmp_path_factory.mktemp("flight") / "data",
                          config={"pylog.flight.listeners": "grpc://127.0.0.1:0"})
    with b:
        create(b.bootstrap_servers, TOPIC, 2)
        produce(b.bootstrap_servers, TOPIC, 50, 0)
        produce(b.bootstrap_servers, TOPIC, 30, 1)
        yield b


@pytest.fixture
def client(broker: pylog.LocalBroker) -> Iterator[flight.FlightClient]:
    assert broker.flight_url is not None
    c = flight.FlightClient(broker.flight_url)
    yield c
    c.close()


def test_a_topic_read_over_flight_is_read_topic(broker: pylog.LocalBroker,
                                               client: flight.FlightClient) -> None:
    fi = client.get_flight_info(flight.FlightDescriptor.for_path(TOPIC))
    assert len(fi.endpoints) == 2 and fi.total_records == 80
    assert all(loc.uri.decode() == broker.flight_url for ep in fi.endpoints for loc in ep.locations)
    got = read_all(client, fi).sort_by([("partition", "ascending"), ("offset", "ascending")])
    expected = pylog.read_topic(TOPIC, data_dir=broker.data_dir).sort_by(
        [("partition", "ascending"), ("offset", "ascending")])
    assert got.schema == expected.schema == fi.schema
    assert got.equals(expected)


def test_offset_bounds_and_columns(client: flight.FlightClient) -> None:
    fi = info(client, topic=TOPIC, partitions=[0], start_offset=10, end_offset=20,
              columns=["offset", "value"])
    assert len(fi.endpoints) == 1 and fi.schema.names == ["offset", "value"]
    got = read_all(client, fi)
    assert got.column("offset").to_pylist() == list(range(10, 20))
    assert got.column("value").to_pylist() == [f"v{i}".encode() for i in range(10, 20)]


def test_read_committed_skips_an_aborted_transaction(broker: pylog.LocalBroker,
                                                     client: flight.FlightClient) -> None:
    topic = "flights-txn"
    create(broker.bootstrap_servers, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "flight-txn"})
    p.init_transactions(30)
    for values, commit in ((["a1", "a2"], True), (["b1", "b2", "b3"], False), (["c1"], True)):
        p.begin_transaction()
        for v in values:
            p.produce(topic, value=v.encode(), partition=0)
        assert p.flush(30) == 0  # written before the abort (librdkafka purges what it still holds)
        p.commit_transaction(30) if commit else p.abort_transaction(30)
    got = read_all(client, info(client, topic=topic, columns=["value"], isolation="read_committed"))
    assert got.column("value").to_pylist() == [b"a1", b"a2", b"c1"]
    assert got.equals(pylog.read_topic(topic, data_dir=broker.data_dir, columns=["value"]))
    dirty = read_all(client, info(client, topic=topic, columns=["value"], isolation="read_uncommitted"))
    assert dirty.column("value").to_pylist() == [b"a1", b"a2", b"b1", b"b2", b"b3", b"c1"]  # no markers
    p.begin_transaction()  # open: read_uncommitted sees it, read_committed stops before it
    p.produce(topic, value=b"d1", partition=0)
    assert p.flush(30) == 0
    dirty = read_all(client, info(client, topic=topic, columns=["value"], isolation="read_uncommitted"))
    assert dirty.column("value").to_pylist()[-1] == b"d1"
    got = read_all(client, info(client, topic=topic, columns=["value"]))
    assert got.column("value").to_pylist() == [b"a1", b"a2", b"c1"]
    p.abort_transaction(30)


def test_do_put_produces_what_a_consumer_reads(broker: pylog.LocalBroker,
                                               client: flight.FlightClient) -> None:
    topic = "flights-put"
    create(broker.bootstrap_servers, topic)
    table = pa.table({"key": [b"x", b"y", b"z"], "value": [b"1", b"2", b"3"]})
    writer, answers = client.do_put(flight.FlightDescriptor.for_path(topic), table.schema)
    writer.write_table(table)
    writer.done_writing()
    answer = json.loads(answers.read().to_pybytes())
    writer.close()
    assert answer["records"] == 3
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "flight-put",
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    seen: list[tuple[bytes, bytes]] = []
    try:
        for _ in range(60):
            for m in c.consume(10, timeout=1):
                assert m.error() is None, m.error()
                seen.append((m.key(), m.value()))
            if len(seen) >= 3:
                break
    finally:
        c.close()
    assert sorted(seen) == [(b"x", b"1"), (b"y", b"2"), (b"z", b"3")]


@pytest.mark.parametrize("ticket", [b"not json", b'{"v": 1, "topic": "flights"}', b"[]",
                                    b'{"v":1,"topic":"flights","partition":0,"start":5,"end":2,'
                                    b'"columns":["value"],"isolation":"read_committed"}'])
def test_a_malformed_ticket_is_refused_and_the_broker_keeps_serving(
        broker: pylog.LocalBroker, client: flight.FlightClient, ticket: bytes) -> None:
    with pytest.raises(flight.FlightServerError, match=r"ticket|JSON"):
        client.do_get(flight.Ticket(ticket)).read_all()
    with pytest.raises(flight.FlightServerError, match="unknown topic"):
        client.get_flight_info(flight.FlightDescriptor.for_path("no-such-topic"))
    assert read_all(client, info(client, topic=TOPIC, partitions=[1])).num_rows == 30


def test_a_client_leaving_mid_stream_leaves_the_broker_serving(broker: pylog.LocalBroker) -> None:
    topic = "flights-big"
    create(broker.bootstrap_servers, topic)
    produce(broker.bootstrap_servers, topic, 20_000)
    assert broker.flight_url is not None
    c = flight.FlightClient(broker.flight_url)
    fi = info(c, topic=topic)
    reader = c.do_get(fi.endpoints[0].ticket)
    first = reader.read_chunk()
    assert first.data.num_rows > 0
    c.close()  # gone before the end of the stream
    again = flight.FlightClient(broker.flight_url)
    try:
        assert read_all(again, info(again, topic=topic)).num_rows == 20_000
    finally:
        again.close()
    produce(broker.bootstrap_servers, TOPIC, 1, 0)  # the Kafka side too


JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_root="root-secret" user_bob="bob-secret";')


def basic(name: str, password: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", b"Basic " + base64.b64encode(f"{name}:{password}".encode()))]


def test_a_sasl_broker_asks_flight_clients_for_credentials_and_acls(tmp_path) -> None:
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:root",
        "pylog.flight.listeners": "grpc://127.0.0.1:0",
    }
    with pylog.LocalBroker(tmp_path / "d", config=config) as b:
        printed = (b._tmp / "broker.stdout").read_text()
        sasl = re.search(r"pylog listener SASL_PLAINTEXT on (\S+)", printed)
        bootstrap = sasl.group(1) if sasl else b.bootstrap_servers
        create(bootstrap, "secret", extra={"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                           "sasl.username": "root", "sasl.password": "root-secret"})
        assert b.flight_url is not None
        c = flight.FlightClient(b.flight_url)
        try:
            descriptor = flight.FlightDescriptor.for_path("secret")
            with pytest.raises(flight.FlightUnauthenticatedError, match="authentication required"):
                c.get_flight_info(descriptor)
            with pytest.raises(flight.FlightUnauthenticatedError, match="invalid credentials"):
                c.get_flight_info(descriptor, flight.FlightCallOptions(headers=basic("bob", "wrong")))
            with pytest.raises(flight.FlightUnauthorizedError, match="READ"):
                c.get_flight_info(descriptor, flight.FlightCallOptions(headers=basic("bob", "bob-secret")))
            root = flight.FlightCallOptions(headers=basic("root", "root-secret"))
            fi = c.get_flight_info(descriptor, root)
            assert len(fi.endpoints) == 1 and fi.total_records == 0
            ticket = fi.endpoints[0].ticket
            with pytest.raises(flight.FlightUnauthorizedError, match="READ"):
                c.do_get(ticket, flight.FlightCallOptions(headers=basic("bob", "bob-secret"))).read_all()
            assert c.do_get(ticket, root).read_all().num_rows == 0
        finally:
            c.close()


def test_a_tls_flight_listener_without_a_tls_kafka_listener_is_refused_at_start(tmp_path) -> None:
    b = pylog.LocalBroker(tmp_path / "d", config={"pylog.flight.listeners": "grpc+tls://127.0.0.1:0"})
    with pytest.raises(RuntimeError, match="grpc\\+tls:// needs a client listener with TLS"):
        b.start()
    b.stop()


def test_grpc_tls_serves_with_the_tls_listener_certificate(tmp_path) -> None:
    import trustme

    ca = trustme.CA()
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tmp_path / "server.pem"),
        "pylog.flight.listeners": "grpc+tls://127.0.0.1:0",
    }
    with pylog.LocalBroker(tmp_path / "d", config=config) as b:
        assert b.flight_url is not None and b.flight_url.startswith("grpc+tls://")
        create(b.bootstrap_servers, "tls-topic")
        produce(b.bootstrap_servers, "tls-topic", 5)
        c = flight.FlightClient(b.flight_url, tls_root_certs=ca.cert_pem.bytes())
        try:
            fi = c.get_flight_info(flight.FlightDescriptor.for_path("tls-topic"))
            assert [loc.uri.decode() for loc in fi.endpoints[0].locations] == [b.flight_url]
            assert c.do_get(fi.endpoints[0].ticket).read_all().column("value").to_pylist() == \
                [f"v{i}".encode() for i in range(5)]
        finally:
            c.close()
        untrusting = flight.FlightClient(b.flight_url)  # the system's CAs do not know this one
        try:
            with pytest.raises(flight.FlightUnavailableError):
                untrusting.get_flight_info(flight.FlightDescriptor.for_path("tls-topic"))
        finally:
            untrusting.close()


def test_a_stalled_stream_does_not_hold_the_broker_stop(tmp_path) -> None:
    """A client that reads one batch of a large partition and then nothing: the broker still stops
    cleanly (its log says so, which a SIGKILL would not let it write)."""
    b = pylog.LocalBroker(tmp_path / "d", config={"pylog.flight.listeners": "grpc://127.0.0.1:0"})
    with b:
        create(b.bootstrap_servers, "stalled")
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 50})
        for i in range(40_000):
            p.produce("stalled", value=b"x" * 200 + str(i).encode(), partition=0)
        assert p.flush(60) == 0
        assert b.flight_url is not None
        c = flight.FlightClient(b.flight_url)
        reader = c.do_get(info(c, topic="stalled").endpoints[0].ticket)
        assert reader.read_chunk().data.num_rows > 0
        b.stop(timeout_s=60)
        assert "pylog broker stopped" in b.log_tail(), b.log_tail()
        c.close()
