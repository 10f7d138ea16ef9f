"""Arrow Flight behind a TLS listener that requires client certificates (``ssl.client.auth=required``),
on a real broker process: a client without a certificate is refused at the handshake, and one with
a certificate is named by its subject through ``ssl.principal.mapping.rules``, as the Kafka SSL
listener names it, so the topic's ACLs decide (READ for alice, nothing for bob)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pyarrow.flight as flight
import pytest
import trustme
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

import pylog

TOPIC = "certified"


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, ca: trustme.CA) -> Iterator[pylog.LocalBroker]:
    root: Path = tmp_path_factory.mktemp("flight-mtls")
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(root / "server.pem"))
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(root / "server.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(root / "ca.pem"),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",  # the PLAINTEXT listener: the test's own admin and producer
        "pylog.flight.listeners": "grpc+tls://127.0.0.1:0",
    }
    with pylog.LocalBroker(root / "data", config=config) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        read = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                          AclOperation.READ, AclPermissionType.ALLOW)
        for f in admin.create_acls([read]).values():
            f.result(30)
        p = Producer({"bootstrap.servers": b.bootstrap_servers})
        for i in range(5):
            p.produce(TOPIC, value=b"v%d" % i)
        assert p.flush(30) == 0
        yield b


def client(broker: pylog.LocalBroker, ca: trustme.CA, who: str | None) -> flight.FlightClient:
    assert broker.flight_url is not None and broker.flight_url.startswith("grpc+tls://")
    if who is None:
        return flight.FlightClient(broker.flight_url, tls_root_certs=ca.cert_pem.bytes())
    cert = ca.issue_cert(f"{who}@example.com", common_name=who)
    return flight.FlightClient(broker.flight_url, tls_root_certs=ca.cert_pem.bytes(),
                               cert_chain=cert.cert_chain_pems[0].bytes(),
                               private_key=cert.private_key_pem.bytes())


def test_a_client_without_a_certificate_is_refused(broker: pylog.LocalBroker, ca: trustme.CA) -> None:
    with client(broker, ca, None) as c, pytest.raises(flight.FlightUnavailableError):
        c.get_flight_info(flight.FlightDescriptor.for_path(TOPIC))


def test_a_certificate_of_another_ca_is_refused(broker: pylog.LocalBroker, ca: trustme.CA) -> None:
    other = trustme.CA().issue_cert("alice@example.com", common_name="alice")
    assert broker.flight_url is not None
    with flight.FlightClient(broker.flight_url, tls_root_certs=ca.cert_pem.bytes(),
                             cert_chain=other.cert_chain_pems[0].bytes(),
                             private_key=other.private_key_pem.bytes()) as c, \
            pytest.raises(flight.FlightUnavailableError):
        c.get_flight_info(flight.FlightDescriptor.for_path(TOPIC))


def test_the_certificate_subject_is_the_principal_the_acls_judge(broker: pylog.LocalBroker,
                                                                 ca: trustme.CA) -> None:
    with client(broker, ca, "alice") as alice:
        fi = alice.get_flight_info(flight.FlightDescriptor.for_path(TOPIC))
        assert [loc.uri.decode() for loc in fi.endpoints[0].locations] == [broker.flight_url]
        rows = alice.do_get(fi.endpoints[0].ticket).read_all()
        assert rows.column("value").to_pylist() == [b"v%d" % i for i in range(5)]
    with client(broker, ca, "bob") as bob:
        with pytest.raises(flight.FlightUnauthorizedError, match="User:bob is not authorized to READ"):
            bob.get_flight_info(flight.FlightDescriptor.for_path(TOPIC))
        with pytest.raises(flight.FlightUnauthorizedError, match="User:bob"):
            bob.do_get(fi.endpoints[0].ticket).read_all()


def test_the_sdk_presents_its_client_certificate(broker: pylog.LocalBroker, ca: trustme.CA,
                                                  tmp_path: Path) -> None:
    """``read_topic``'s security settings (librdkafka's names) carry the certificate to Flight too."""
    printed = (broker._tmp / "broker.stdout").read_text()
    ssl_listener = re.search(r"pylog listener SSL on (\S+)", printed)
    assert ssl_listener is not None, printed
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    ca.issue_cert("alice@example.com", common_name="alice").private_key_and_cert_chain_pem.write_to_path(
        str(tmp_path / "alice.pem"))
    security = {"security.protocol": "SSL", "ssl.ca.location": str(tmp_path / "ca.pem"),
                "ssl.certificate.location": str(tmp_path / "alice.pem")}
    table = pylog.read_topic(TOPIC, bootstrap_servers=ssl_listener.group(1), security=security,
                             transport="flight", flight=broker.flight_url, remote_storage=False)
    assert table.column("value").to_pylist() == [b"v%d" % i for i in range(5)]
