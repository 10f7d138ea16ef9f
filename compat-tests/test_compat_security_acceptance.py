"""The secured set-up end to end, as an operator would build it: one broker with a PLAINTEXT
listener for a super user and a SASL_SSL listener (PEM certificate, SCRAM-SHA-256 and PLAIN)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compat_broker import BrokerProcess, used_brokers
from compat_clients import Rec, consume, produce
from compat_security import PLAIN_MODULE, STANDARD_AUTHORIZER, Pki, client_config, listener_ports
from pylog.protocol import api


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki.make(tmp_path / "pki")


@pytest.fixture
def secured_broker(tmp_path: Path, pki: Pki, request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    b = BrokerProcess(
        tmp_path / "data",
        tmp_path / "broker.log",
        config={
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pki.server),
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": (
                f'{PLAIN_MODULE} required user_bob="bob-secret";'
            ),
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": "User:ANONYMOUS",
        },
    )
    used_brokers(request.node).append(b)
    b.start()
    yield b
    b.close()


def test_acceptance(secured_broker: BrokerProcess, pki: Pki) -> None:
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    b = secured_broker
    sasl_ssl = f"127.0.0.1:{listener_ports(b.log_text())['SASL_SSL']}"

    # the super user (PLAINTEXT) creates a SCRAM user, a topic and the user's ACLs
    su = AdminClient({"bootstrap.servers": b.bootstrap})
    upsert = UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"alice-secret"
    )
    for f in su.alter_user_scram_credentials([upsert]).values():
        f.result(20)
    for f in su.create_topics([NewTopic("payments", 2, 1)]).values():
        f.result(20)
    acls = [
        AclBinding(
            ResourceType.TOPIC,
            "payments",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.ALL,
            AclPermissionType.ALLOW,
        ),
        AclBinding(
            ResourceType.GROUP,
            "payments-",
            ResourcePatternType.PREFIXED,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
    ]
    for f in su.create_acls(acls).values():
        f.result(20)
    described = su.describe_user_scram_credentials(["alice"])["alice"].result(20)
    assert described.scram_credential_infos[0].iterations == 8192

    # that user produces and consumes with confluent-kafka and kafka-python over SASL_SSL
    for client in ("confluent-kafka", "kafka-python"):
        cfg = client_config(
            client, "SASL_SSL", mechanism="SCRAM-SHA-256", user="alice", password="alice-secret", ca=pki.ca
        )
        recs = [Rec(f"{client}-{i}".encode(), partition=i % 2) for i in range(4)]
        produce(client, sasl_ssl, "payments", recs, config=cfg)
    for client in ("confluent-kafka", "kafka-python"):
        cfg = client_config(
            client, "SASL_SSL", mechanism="SCRAM-SHA-256", user="alice", password="alice-secret", ca=pki.ca
        )
        if client == "confluent-kafka":
            cfg["group.id"] = "payments-readers"
        got = consume(client, sasl_ssl, "payments", 8, partitions=(0, 1), config=cfg)
        assert sorted(r.value for r in got) == sorted(
            f"{c}-{i}".encode() for c in ("confluent-kafka", "kafka-python") for i in range(4)
        )

    # a wrong password fails within seconds with an authentication error
    errors: list[Any] = []
    t0 = time.monotonic()
    p = Producer(
        {
            "bootstrap.servers": sasl_ssl,
            "error_cb": errors.append,
            **client_config(
                "confluent-kafka",
                "SASL_SSL",
                mechanism="SCRAM-SHA-256",
                user="alice",
                password="not-her-password",
                ca=pki.ca,
            ),
        }
    )
    while not errors and time.monotonic() - t0 < 10:
        p.poll(0.1)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert time.monotonic() - t0 < 5
    del p

    # a PLAIN user without ACLs is denied the topic
    denied: list[Any] = []
    bob = Producer(
        {
            "bootstrap.servers": sasl_ssl,
            "message.timeout.ms": 10000,
            **client_config(
                "confluent-kafka", "SASL_SSL", mechanism="PLAIN", user="bob", password="bob-secret", ca=pki.ca
            ),
        }
    )
    bob.produce("payments", b"from bob", on_delivery=lambda err, msg: denied.append(err))
    bob.flush(15)
    assert denied and denied[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    bob_admin = AdminClient(
        {
            "bootstrap.servers": sasl_ssl,
            **client_config(
                "confluent-kafka", "SASL_SSL", mechanism="PLAIN", user="bob", password="bob-secret", ca=pki.ca
            ),
        }
    )
    assert "payments" not in bob_admin.list_topics(timeout=10).topics

    # a plaintext client on the TLS port fails fast while the broker keeps serving
    host, port = sasl_ssl.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        t0 = time.monotonic()
        s.sendall(api.encode_request(18, 0, 1, "plaintext", {}))
        assert s.recv(16) == b""
        assert time.monotonic() - t0 < 2
    t0 = time.monotonic()
    with pytest.raises(KafkaException):
        AdminClient({"bootstrap.servers": sasl_ssl}).list_topics(timeout=3)
    assert time.monotonic() - t0 < 6
    cfg = client_config(
        "confluent-kafka",
        "SASL_SSL",
        mechanism="SCRAM-SHA-256",
        user="alice",
        password="alice-secret",
        ca=pki.ca,
    )
    produce("confluent-kafka", sasl_ssl, "payments", [Rec(b"still serving")], config=cfg)
    assert b.alive()
