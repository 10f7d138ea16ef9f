"""The SDK against a secured broker process: reads and writes over SASL_SSL with SCRAM and a CA
made here, the authorizer's answers, and plain errors for wrong settings or credentials."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest
from sdk_helpers import Broker, create_topic, secured_broker

import pylog


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, dict[str, str]]]:
    broker, settings = secured_broker(tmp_path_factory.mktemp("sdk-secured"))
    yield broker, settings
    broker.stop()


def test_write_and_read_over_sasl_ssl(secured: tuple[Broker, dict[str, str]]) -> None:
    broker, settings = secured
    security = {k: v for k, v in settings.items() if k != "bootstrap"}
    create_topic(broker.bootstrap, "sec-sdk", 2)
    data = pa.table({"key": [f"k{i}".encode() for i in range(500)], "value": [b"v" * 10] * 500})
    result = pylog.write_topic(
        data, "sec-sdk", bootstrap_servers=settings["bootstrap"], key="key", security=security
    )
    assert result.records == 500
    table = pylog.read_topic("sec-sdk", bootstrap_servers=settings["bootstrap"], security=security)
    assert table.num_rows == 500
    lazy = pylog.scan_topic(
        "sec-sdk", bootstrap_servers=settings["bootstrap"], security=security, columns=["key"]
    )
    assert sorted(lazy.to_arrow().column("key").to_pylist()) == sorted(data.column("key").to_pylist())


def test_authorization_and_bad_settings_are_plain_errors(secured: tuple[Broker, dict[str, str]]) -> None:
    broker, settings = secured
    security = {k: v for k, v in settings.items() if k != "bootstrap"}
    create_topic(broker.bootstrap, "not-hers", 1)
    with pytest.raises(Exception, match=r"TOPIC_AUTHORIZATION_FAILED"):
        pylog.read_topic("not-hers", bootstrap_servers=settings["bootstrap"], security=security)
    with pytest.raises(ConnectionError, match=r"refused the SASL credentials.*Authentication failed"):
        pylog.read_topic(
            "sec-sdk",
            bootstrap_servers=settings["bootstrap"],
            security={**security, "sasl.password": "wrong"},
        )
    with pytest.raises(ValueError, match=r"unknown security setting 'sasl\.pasword'"):
        pylog.read_topic(
            "sec-sdk", bootstrap_servers=settings["bootstrap"], security={**security, "sasl.pasword": "x"}
        )
    with pytest.raises(ValueError, match=r"needs sasl\.username and sasl\.password"):
        pylog.scan_topic(
            "sec-sdk",
            bootstrap_servers=settings["bootstrap"],
            security={"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
        )
    # the Java client's spelling: a JAAS line and a PEM truststore
    java = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="alice-secret";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": settings["ssl.ca.location"],
    }
    assert pylog.read_topic("sec-sdk", bootstrap_servers=settings["bootstrap"], security=java).num_rows == 500


def test_plaintext_sdk_against_the_tls_listener_fails_fast(secured: tuple[Broker, dict[str, str]]) -> None:
    _, settings = secured
    with pytest.raises(ConnectionError):
        pylog.read_topic("sec-sdk", bootstrap_servers=settings["bootstrap"])
