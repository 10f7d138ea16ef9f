"""SASL re-authentication (KIP-368, ``connections.max.reauth.ms``) and the connection limits
(``max.connections``, ``max.connections.per.ip`` with overrides, ``connections.max.idle.ms``), each on
a broker of its own."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compat_broker import BrokerProcess, used_brokers
from compat_clients import Rec, consume, produce, unique
from compat_clients import kafkajs as run_kafkajs
from compat_security import Pki, client_config
from pylog.protocol import api
from test_compat_security import Secured, admin, allow, new_topic, start_secured

from pylog.client.protocol import KafkaConnection
from pylog.cluster.channel import node_settings
from pylog.security.client import ClientSecurity

REAUTH_MS = 1500


@pytest.fixture
def reauth_broker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Secured]:
    s = start_secured(
        tmp_path,
        Pki.make(tmp_path / "pki"),
        "reauth",
        scram=["SCRAM-SHA-256=[name=alice,password=alice-secret]"],
        **{"connections.max.reauth.ms": str(REAUTH_MS)},
    )
    used_brokers(request.node).append(s.broker)
    a = admin(s.plaintext)
    allow(a, "User:alice", "TOPIC", "sec-", prefixed=True)
    allow(a, "User:alice", "GROUP", "*")
    yield s
    s.broker.close()


def reauths(b: BrokerProcess) -> int:
    return b.log_text(10**8).count("re-authenticated as User:alice")


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python", "kafkajs"])
def test_clients_reauthenticate_before_their_session_ends(
    reauth_broker: Secured, client: str, kafkajs: Path
) -> None:
    """The broker grants 1.5 s sessions; a client producing for longer re-authenticates on its
    connections and every record arrives."""
    topic = new_topic(admin(reauth_broker.plaintext), "sec-reauth")
    cfg = client_config(
        client,
        "SASL_SSL",
        mechanism="SCRAM-SHA-256",
        user="alice",
        password="alice-secret",
        ca=reauth_broker.pki.ca,
    )
    address = reauth_broker.address("SASL_SSL")
    before = reauths(reauth_broker.broker)
    if client == "confluent-kafka":
        from confluent_kafka import Producer

        errors: list[Any] = []
        p = Producer({"bootstrap.servers": address, **cfg, "error_cb": errors.append, "linger.ms": 0})
        delivered: list[Any] = []
        deadline = time.monotonic() + 3 * REAUTH_MS / 1000 + 1
        n = 0
        while time.monotonic() < deadline:
            p.produce(topic, b"r%d" % n, on_delivery=lambda err, msg: delivered.append(err))
            n += 1
            p.poll(0.1)
        assert p.flush(15) == 0
        assert len(delivered) == n and not any(delivered), delivered[:3]
        assert not errors, errors
    elif client == "kafka-python":
        from kafka import KafkaProducer

        p = KafkaProducer(bootstrap_servers=address, **cfg)
        n = 0
        deadline = time.monotonic() + 3 * REAUTH_MS / 1000 + 1
        while time.monotonic() < deadline:
            p.send(topic, b"r%d" % n).get(10)
            n += 1
            time.sleep(0.1)
        p.close()
    else:
        n = 3
        produce(client, address, topic, [Rec(b"r%d" % i) for i in range(n)], config=cfg)
        # a consumer that stays connected (fetching, heartbeating) for three session lifetimes
        out = run_kafkajs(
            "consume",
            {
                "brokers": [address],
                "topic": topic,
                "groupId": unique("sec-reauth"),
                "count": n + 1,
                "timeoutMs": 3 * REAUTH_MS + 1000,
                **cfg,
            },
            timeout=60,
        )
        assert len(out["messages"]) == n
    assert (
        len(
            consume(
                "confluent-kafka",
                address,
                topic,
                n,
                config=client_config(
                    "confluent-kafka",
                    "SASL_SSL",
                    mechanism="SCRAM-SHA-256",
                    user="alice",
                    password="alice-secret",
                    ca=reauth_broker.pki.ca,
                ),
            )
        )
        == n
    )
    assert reauths(reauth_broker.broker) > before, "no re-authentication in the broker's log"


def test_expired_session_closes_the_connection(reauth_broker: Secured) -> None:
    """After the session lifetime only a new SaslHandshake is served; anything else closes."""

    async def run() -> tuple[bool, bool]:
        sec = ClientSecurity.from_config(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "alice",
                "sasl.password": "alice-secret",
            }
        )
        # one connection, never replaced on our own: the session is let run out
        port = reauth_broker.ports["SASL_PLAINTEXT"]
        conn = await KafkaConnection.open("127.0.0.1", port, node_settings(client_id="expiry", security=sec))
        try:
            await conn.request(3, 1, {"topics": []}, 5)  # within the session: served
            await asyncio.sleep(REAUTH_MS / 1000 + 0.5)
            try:
                await conn.request(3, 1, {"topics": []}, 5)
                return True, False
            except ConnectionError:
                return True, True
        finally:
            await conn.close()

    served, closed = asyncio.run(run())
    assert served and closed
    assert "its SASL session expired" in reauth_broker.broker.log_text()


# --- connection limits -------------------------------------------------------------------------------


def api_versions(s: socket.socket) -> bool:
    """True when the broker answers ApiVersions on ``s``, False when it closed the connection."""
    try:
        s.sendall(api.encode_request(18, 0, 7, "limits", {}))
        head = s.recv(4)
    except ConnectionError:
        return False
    if len(head) < 4:
        return False
    size = struct.unpack(">i", head)[0]
    got = b""
    while len(got) < size:
        chunk = s.recv(size - len(got))
        if not chunk:
            return False
        got += chunk
    return True


def connect(port: int, source: str) -> socket.socket:
    s = socket.socket()
    s.settimeout(5)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


@pytest.fixture
def limited_broker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    b = BrokerProcess(
        tmp_path / "data",
        tmp_path / "limits.log",
        config={
            "max.connections": "4",
            "max.connections.per.ip": "2",
            "max.connections.per.ip.overrides": "127.0.0.2:3",
            "connections.max.idle.ms": "1500",
        },
    )
    used_brokers(request.node).append(b)
    b.start()
    yield b
    b.close()


def test_connection_limits(limited_broker: BrokerProcess) -> None:
    b = limited_broker
    port = b.port
    first = [connect(port, "127.0.0.1") for _ in range(2)]
    assert all(api_versions(s) for s in first)
    extra = connect(port, "127.0.0.1")
    assert not api_versions(extra), "a third connection from 127.0.0.1 was served (max.connections.per.ip=2)"
    extra.close()
    second = [connect(port, "127.0.0.2") for _ in range(2)]
    assert all(api_versions(s) for s in second)  # the override allows 3, and the node 4 in all
    over_total = connect(port, "127.0.0.2")
    assert not api_versions(over_total), "a fifth connection was served (max.connections=4)"
    over_total.close()
    first[0].close()
    time.sleep(0.3)
    again = connect(port, "127.0.0.3")
    assert api_versions(again)  # a slot is free again
    # idle connections are closed after connections.max.idle.ms
    t0 = time.monotonic()
    idle = second[0]
    idle.settimeout(10)
    assert idle.recv(1) == b""
    assert 1.0 < time.monotonic() - t0 < 8
    for s in [first[1], *second, again]:
        s.close()
    log = b.log_text()
    assert "max.connections.per.ip (2) reached for 127.0.0.1" in log
    assert "max.connections (4) reached" in log
