"""``read_topic(transport=...)``: the same topic read over Arrow Flight and over the Kafka protocol, from
real broker processes (records produced with confluent-kafka)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from sdk_helpers import T0, running_broker

import pylog
from pylog.sdk import OffsetOutOfRangeError, UnknownTopicError
from pylog.sdk.flight_source import FlightReadError, advertised_flight, ticket

TOPIC = "flight-reads"
ORDER = [("partition", "ascending"), ("offset", "ascending")]


def create_and_fill(bootstrap: str, topic: str, n: int, extra: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **(extra or {})})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **(extra or {})})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), key=f"k{i}".encode(), partition=i % 3, timestamp=T0 + i,
                  headers=[("h", f"x{i}".encode())] if i % 2 else None)
    assert p.flush(30) == 0


@pytest.fixture(scope="module")
def flight_broker() -> Iterator[pylog.LocalBroker]:
    for b in running_broker({"pylog.flight.listeners": "grpc://127.0.0.1:0"}):
        create_and_fill(b.bootstrap_servers, TOPIC, 3_000)
        yield b


@pytest.fixture(scope="module")
def kafka_broker() -> Iterator[pylog.LocalBroker]:
    yield from running_broker({})


def both(bootstrap: str, **options: object) -> tuple[pa.Table, pa.Table]:
    flight = pylog.read_topic(TOPIC, bootstrap_servers=bootstrap, transport="flight", **options)
    kafka = pylog.read_topic(TOPIC, bootstrap_servers=bootstrap, transport="kafka", **options)
    return flight, kafka


def test_read_topic_over_flight_is_read_topic_over_kafka(flight_broker: pylog.LocalBroker) -> None:
    flight, kafka = both(flight_broker.bootstrap_servers, include_headers=True)
    assert flight.num_rows == kafka.num_rows == 3_000
    assert flight.schema == kafka.schema
    assert flight.sort_by(ORDER).equals(kafka.sort_by(ORDER))


@pytest.mark.parametrize("options", [
    {"starting_timestamp": T0 + 1_500, "columns": ["partition", "offset", "timestamp"]},
    {"partitions": [1], "starting_offsets": {TOPIC: {"1": 10}}, "ending_offsets": {TOPIC: {"1": 20}}},
    {"ending_timestamp": T0 + 30, "columns": ["topic", "value"]},
    {"decode": "utf8", "columns": ["value", "offset", "partition"]},
], ids=["from-a-time", "offset-range", "to-a-time", "decoded"])
def test_bounds_and_columns_read_the_same_over_both(flight_broker: pylog.LocalBroker,
                                                    options: dict[str, object]) -> None:
    flight, kafka = both(flight_broker.bootstrap_servers, **options)
    assert flight.num_rows > 0 and flight.schema == kafka.schema
    order = [o for o in ORDER if o[0] in flight.schema.names] or [("value", "ascending")]
    assert flight.sort_by(order).equals(kafka.sort_by(order))


def test_auto_picks_flight_when_the_cluster_serves_it_and_kafka_when_not(
        flight_broker: pylog.LocalBroker, kafka_broker: pylog.LocalBroker) -> None:
    served = pylog.scan_topic(TOPIC, bootstrap_servers=flight_broker.bootstrap_servers)
    assert served.transport() == "flight"
    assert served.to_arrow().sort_by(ORDER).equals(
        pylog.read_topic(TOPIC, bootstrap_servers=flight_broker.bootstrap_servers, transport="kafka")
        .sort_by(ORDER))
    assert pylog.scan_topic(TOPIC, bootstrap_servers=flight_broker.bootstrap_servers,
                            transport="kafka").transport() == "kafka"
    plain = kafka_broker.bootstrap_servers
    create_and_fill(plain, "plain", 30)
    assert pylog.scan_topic("plain", bootstrap_servers=plain).transport() == "kafka"
    assert pylog.read_topic("plain", bootstrap_servers=plain).num_rows == 30
    with pytest.raises(ValueError, match="serves no Arrow Flight"):
        pylog.read_topic("plain", bootstrap_servers=plain, transport="flight")
    # an explicit address wins over discovery
    assert flight_broker.flight_url is not None
    given = pylog.scan_topic(TOPIC, bootstrap_servers=flight_broker.bootstrap_servers,
                             flight=flight_broker.flight_url)
    assert given.transport() == "flight" and given.to_arrow().num_rows == 3_000


def test_flight_misuse_gets_a_plain_answer(flight_broker: pylog.LocalBroker) -> None:
    bs = flight_broker.bootstrap_servers
    with pytest.raises(ValueError, match="transport must be one of 'auto', 'kafka', 'flight', not 'grpc'"):
        pylog.read_topic(TOPIC, bootstrap_servers=bs, transport="grpc")
    with pytest.raises(ValueError, match="flight must be a URL"):
        pylog.read_topic(TOPIC, bootstrap_servers=bs, flight="localhost")
    with pytest.raises(ValueError, match="pass bootstrap_servers="):
        pylog.read_topic(TOPIC, data_dir=flight_broker.data_dir, transport="flight")
    with pytest.raises(UnknownTopicError, match="unknown topic 'missing'"):
        pylog.read_topic("missing", bootstrap_servers=bs, transport="flight")
    with pytest.raises(OffsetOutOfRangeError):
        pylog.read_topic(TOPIC, bootstrap_servers=bs, transport="flight",
                         starting_offsets={TOPIC: {"0": 10**6}})
    with pytest.raises(FlightReadError):
        pylog.read_topic(TOPIC, bootstrap_servers=bs, flight="grpc://127.0.0.1:1", transport="flight")
    # the broker still serves
    assert pylog.read_topic(TOPIC, bootstrap_servers=bs, transport="flight").num_rows == 3_000


def test_the_sdk_writes_the_tickets_the_server_reads() -> None:
    from pylog.flight.tickets import FlightTicket

    t = FlightTicket.decode(ticket("t", 2, 5, 9, ["offset", "value"]))
    assert (t.topic, t.partition, t.start, t.end, t.columns, t.isolation) == \
        ("t", 2, 5, 9, ["offset", "value"], "read_committed")


def test_the_advertised_address() -> None:
    assert advertised_flight("grpc://0.0.0.0:8815", "broker-1") == "grpc://broker-1:8815"
    assert advertised_flight("grpc://127.0.0.1:0, grpc+tls://h:9", "x") == "grpc+tls://h:9"
    assert advertised_flight(None, "x") is None


JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_root="root-secret" user_bob="bob-secret";')


def test_the_sasl_credentials_go_to_flight_too() -> None:
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "pylog.flight.listeners": "grpc://127.0.0.1:0",
    }
    for b in running_broker(config):
        printed = (b._tmp / "broker.stdout").read_text()
        found = re.search(r"pylog listener SASL_PLAINTEXT on (\S+)", printed)
        bootstrap = found.group(1) if found else b.bootstrap_servers
        security = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                    "sasl.username": "bob", "sasl.password": "bob-secret"}
        create_and_fill(bootstrap, TOPIC, 30, extra=security)
        flight = pylog.read_topic(TOPIC, bootstrap_servers=bootstrap, security=security, transport="flight")
        kafka = pylog.read_topic(TOPIC, bootstrap_servers=bootstrap, security=security, transport="kafka")
        assert flight.num_rows == 30 and flight.sort_by(ORDER).equals(kafka.sort_by(ORDER))
        with pytest.raises(FlightReadError, match="invalid credentials"):
            pylog.read_topic(TOPIC, bootstrap_servers=bootstrap, flight=b.flight_url, transport="flight",
                             security={**security, "sasl.password": "wrong"})
