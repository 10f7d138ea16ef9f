"""Security with real clients over real sockets: TLS listeners with certificates made here, SASL
PLAIN and SCRAM, mutual TLS, ACLs, re-authentication, and what an unauthenticated client can cost.

The module's broker serves PLAINTEXT (ANONYMOUS, a super user, for set-up), SSL with mutual TLS,
SASL_PLAINTEXT and SASL_SSL, with the standard authorizer. SCRAM-SHA-256 user alice is created
before the first start (``pylog storage format --add-scram``), her SCRAM-SHA-512 credential and
the ACLs through the admin APIs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import struct
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from compat_broker import BrokerProcess, pylog_command, used_brokers
from compat_clients import ALL_CLIENTS, Rec, consume, produce, unique
from compat_clients import kafkajs as run_kafkajs
from compat_security import Pki, broker_config, client_config, listener_ports
from pylog.protocol import api

USERS = {
    "PLAIN": ("bob", "bob-secret"),
    "SCRAM-SHA-256": ("alice", "alice-secret"),
    "SCRAM-SHA-512": ("alice", "alice-512-secret"),
}


@dataclass
class Secured:
    broker: BrokerProcess
    pki: Pki
    ports: dict[str, int]

    @property
    def plaintext(self) -> str:
        return self.broker.bootstrap

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


def start_secured(tmp: Path, pki: Pki, name: str, *, scram: list[str] = (), **extra: str) -> Secured:
    data = tmp / f"{name}-data"
    if scram:
        cmd = [*pylog_command(), "storage", "format", "--data-dir", str(data)]
        for spec in scram:
            cmd += ["--add-scram", spec]
        subprocess.run(cmd, check=True, capture_output=True, timeout=60)
    b = BrokerProcess(data, tmp / f"{name}.log", config=broker_config(pki, **extra))
    try:
        b.start()
    except Exception:
        print(b.log_text())
        b.close()
        raise
    return Secured(b, pki, listener_ports(b.log_text()))


def admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def allow(
    admin_client: Any,
    principal: str,
    resource: str,
    name: str,
    op: str = "ALL",
    *,
    prefixed: bool = False,
    deny: bool = False,
) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    binding = AclBinding(
        getattr(ResourceType, resource),
        name,
        ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL,
        principal,
        "*",
        getattr(AclOperation, op),
        AclPermissionType.DENY if deny else AclPermissionType.ALLOW,
    )
    for f in admin_client.create_acls([binding]).values():
        f.result(20)


def scram_user(admin_client: Any, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> None:
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    mech = getattr(ScramMechanism, mechanism.replace("-", "_"))
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, 4096), password.encode())
    for f in admin_client.alter_user_scram_credentials([upsert]).values():
        f.result(20)


def new_topic(admin_client: Any, prefix: str) -> str:
    from confluent_kafka.admin import NewTopic

    name = unique(prefix)
    for f in admin_client.create_topics([NewTopic(name, 1, 1)]).values():
        f.result(20)
    return name


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    tmp = tmp_path_factory.mktemp("secured")
    s = start_secured(
        tmp, Pki.make(tmp / "pki"), "secured", scram=["SCRAM-SHA-256=[name=alice,password=alice-secret]"]
    )
    try:
        a = admin(s.plaintext)
        scram_user(a, "alice", USERS["SCRAM-SHA-512"][1], "SCRAM-SHA-512")
        for who in ("User:alice", "User:bob", "User:tls-user"):
            allow(a, who, "TOPIC", "sec-", prefixed=True)
            allow(a, who, "GROUP", "*")
        yield s
    finally:
        s.broker.close()


@pytest.fixture
def broker_of(secured: Secured, request: pytest.FixtureRequest) -> Secured:
    used_brokers(request.node).append(secured.broker)
    assert secured.broker.alive(), "the module's secured broker died"
    return secured


RECS = [Rec(b"v%d" % i, b"k%d" % i) for i in range(3)]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_right_credentials_over_sasl_ssl(
    broker_of: Secured, client: str, mechanism: str, kcat: str, kafkajs: Path
) -> None:
    topic = new_topic(admin(broker_of.plaintext), "sec-ok")
    user, password = USERS[mechanism]
    cfg = client_config(
        client, "SASL_SSL", mechanism=mechanism, user=user, password=password, ca=broker_of.pki.ca
    )
    produce(client, broker_of.address("SASL_SSL"), topic, RECS, config=cfg)
    got = consume(client, broker_of.address("SASL_SSL"), topic, len(RECS), config=cfg)
    assert [(r.key, r.value) for r in got] == [(r.key, r.value) for r in RECS]


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python", "kafkajs"])
def test_sasl_plaintext(broker_of: Secured, client: str, kafkajs: Path) -> None:
    topic = new_topic(admin(broker_of.plaintext), "sec-plain")
    cfg = client_config(
        client, "SASL_PLAINTEXT", mechanism="SCRAM-SHA-256", user="alice", password="alice-secret"
    )
    produce(client, broker_of.address("SASL_PLAINTEXT"), topic, RECS, config=cfg)
    assert len(consume(client, broker_of.address("SASL_PLAINTEXT"), topic, len(RECS), config=cfg)) == len(
        RECS
    )


# --- wrong credentials ---------------------------------------------------------------------------


def failed_auth_lines(b: BrokerProcess) -> int:
    return b.log_text(10**8).count("authentication failed for")


@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_wrong_password_fails_fast(broker_of: Secured, client: str, kcat: str, kafkajs: Path) -> None:
    """The client reports an authentication error within seconds, and while it keeps trying the
    broker answers each failure only after connection.failed.authentication.delay.ms."""
    address, ca = broker_of.address("SASL_SSL"), broker_of.pki.ca
    before = failed_auth_lines(broker_of.broker)
    t0 = time.monotonic()
    if client == "confluent-kafka":
        from confluent_kafka import KafkaError, Producer

        errors: list[Any] = []
        cfg = client_config(
            client, "SASL_SSL", mechanism="SCRAM-SHA-256", user="alice", password="wrong", ca=ca
        )
        p = Producer({"bootstrap.servers": address, **cfg, "error_cb": errors.append})
        deadline = time.monotonic() + 10
        while not errors and time.monotonic() < deadline:
            p.poll(0.1)
        elapsed = time.monotonic() - t0
        assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
        assert "Authentication failed" in errors[0].str()
        time.sleep(2)  # librdkafka keeps reconnecting: count what that costs the broker
        del p
    elif client == "kafka-python":
        from kafka import KafkaProducer
        from kafka.errors import KafkaTimeoutError

        seen: list[str] = []

        class Catch(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                seen.append((time.monotonic() - t0, record.getMessage()))

        handler = Catch(logging.WARNING)
        logging.getLogger("kafka").addHandler(handler)
        try:
            cfg = client_config(
                client, "SASL_SSL", mechanism="SCRAM-SHA-256", user="alice", password="wrong", ca=ca
            )
            with pytest.raises(KafkaTimeoutError):
                KafkaProducer(bootstrap_servers=address, bootstrap_timeout_ms=3000, **cfg)
        finally:
            logging.getLogger("kafka").removeHandler(handler)
        auth = [(t, m) for t, m in seen if "SaslAuthenticationFailed" in m]
        assert auth, seen
        elapsed = auth[0][0]
    elif client == "aiokafka":
        from aiokafka import AIOKafkaProducer

        async def start() -> str:
            cfg = client_config(
                client, "SASL_SSL", mechanism="SCRAM-SHA-256", user="alice", password="wrong", ca=ca
            )
            p = AIOKafkaProducer(bootstrap_servers=address, **cfg)
            try:
                await p.start()
            except Exception as exc:
                return str(exc)
            finally:
                await p.stop()
            return "started"

        logs: list[str] = []

        class Keep(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                logs.append(record.getMessage())

        keep = Keep(logging.ERROR)
        logging.getLogger("aiokafka").addHandler(keep)
        try:
            outcome = asyncio.run(start())
        finally:
            logging.getLogger("aiokafka").removeHandler(keep)
        elapsed = time.monotonic() - t0
        assert outcome != "started" and any("SaslAuthenticationFailed" in m for m in logs), (outcome, logs)
    elif client == "kcat":
        cmd = ["kcat", "-b", address, "-L", "-m", "4"]
        for k, v in client_config(
            client, "SASL_SSL", mechanism="SCRAM-SHA-256", user="alice", password="wrong", ca=ca
        ).items():
            cmd += ["-X", f"{k}={v}"]
        out = subprocess.run(cmd, capture_output=True, timeout=60, check=False)
        elapsed = time.monotonic() - t0
        assert out.returncode != 0 and b"Authentication failed" in out.stderr, out.stderr[-2000:]
    else:
        args = {
            "brokers": [address],
            "op": "listTopics",
            "args": [],
            "retries": 0,
            **client_config(
                client, "SASL_SSL", mechanism="SCRAM-SHA-256", user="alice", password="wrong", ca=ca
            ),
        }
        out = run_kafkajs("admin", args, allow_error=True)
        elapsed = time.monotonic() - t0
        assert "KafkaJSSASLAuthenticationError" in out.get("error", ""), out
    assert elapsed < 8, f"{client} took {elapsed:.1f}s to report the authentication failure"
    attempts = failed_auth_lines(broker_of.broker) - before
    total = time.monotonic() - t0
    # each failure is answered after 100 ms, so a client retrying at once makes at most ~10 a second
    assert 1 <= attempts <= 12 * total + 2, (attempts, total)


# --- authorization ----------------------------------------------------------------------------------


def test_user_without_acls_is_denied_each_api(broker_of: Secured) -> None:
    """PLAIN user eve has no ACLs: every API she tries answers its authorization error (real clients)."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ConfigResource,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    topic = new_topic(admin(broker_of.plaintext), "sec-eve")
    produce("confluent-kafka", broker_of.plaintext, topic, RECS)
    eve = {
        "bootstrap.servers": broker_of.address("SASL_SSL"),
        **client_config(
            "confluent-kafka",
            "SASL_SSL",
            mechanism="PLAIN",
            user="eve",
            password="eve-secret",
            ca=broker_of.pki.ca,
        ),
    }
    a = admin(broker_of.address("SASL_SSL")).__class__(eve)
    assert topic not in a.list_topics(timeout=10).topics  # Metadata leaves out what she may not describe
    md = a.list_topics(topic, timeout=10)
    assert md.topics[topic].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    delivered: list[Any] = []
    p = Producer({**eve, "message.timeout.ms": 10000, "enable.idempotence": False})
    p.produce(topic, b"x", on_delivery=lambda err, msg: delivered.append(err))
    p.flush(15)
    assert delivered and delivered[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    fatal: list[Any] = []
    idem = Producer({**eve, "enable.idempotence": True, "error_cb": fatal.append})
    idem.produce(topic, b"x")
    deadline = time.monotonic() + 10
    while not fatal and time.monotonic() < deadline:
        try:
            idem.poll(0.2)
        except KafkaException as exc:  # librdkafka raises its fatal error from poll
            fatal.append(exc.args[0])
    assert any(e.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED for e in fatal), fatal  # InitProducerId
    del idem

    tx = Producer({**eve, "transactional.id": "eve-tx"})
    with pytest.raises(KafkaException) as exc:
        tx.init_transactions(10)
    assert exc.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    c = Consumer({**eve, "group.id": "eve-group", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    err = None
    deadline = time.monotonic() + 10
    while err is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error():
            err = m.error()
    c.close()
    assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, err

    created = a.create_topics([NewTopic(unique("sec-eve-new"), 1, 1)])
    with pytest.raises(KafkaException) as exc:
        next(iter(created.values())).result(10)
    assert exc.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    deleted = a.delete_topics([topic])
    with pytest.raises(KafkaException) as exc:
        next(iter(deleted.values())).result(10)
    assert exc.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    described = a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    with pytest.raises(KafkaException) as exc:
        next(iter(described.values())).result(10)
    assert exc.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    broker_cfg = a.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")])
    with pytest.raises(KafkaException) as exc:
        next(iter(broker_cfg.values())).result(10)
    assert exc.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    # librdkafka drops DescribeAcls' error code (an empty listing either way): kafka-python reads it
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        KafkaAdminClient,
        ResourcePatternFilter,
    )
    from kafka.admin import ACLResourcePatternType as KPattern
    from kafka.admin import ResourceType as KResourceType
    from kafka.errors import ClusterAuthorizationFailedError

    ka = KafkaAdminClient(
        bootstrap_servers=broker_of.address("SASL_SSL"),
        **client_config(
            "kafka-python",
            "SASL_SSL",
            mechanism="PLAIN",
            user="eve",
            password="eve-secret",
            ca=broker_of.pki.ca,
        ),
    )
    try:
        any_acl = ACLFilter(
            None,
            None,
            ACLOperation.ANY,
            ACLPermissionType.ANY,
            ResourcePatternFilter(KResourceType.ANY, None, KPattern.ANY),
        )
        with pytest.raises(ClusterAuthorizationFailedError):
            ka.describe_acls(any_acl)
    finally:
        ka.close()
    f = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    assert a.describe_acls(f).result(10) == []

    groups = a.describe_consumer_groups(["sec-group-of-someone"])
    with pytest.raises(KafkaException) as exc:
        next(iter(groups.values())).result(10)
    assert exc.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_describe_without_read_is_denied_the_fetch(broker_of: Secured, client: str) -> None:
    """eve may DESCRIBE the topic (so Metadata and ListOffsets answer) but not READ it: Fetch
    answers TOPIC_AUTHORIZATION_FAILED, which the consumer raises."""
    a = admin(broker_of.plaintext)
    topic = new_topic(a, "sec-describe-only")
    produce("confluent-kafka", broker_of.plaintext, topic, RECS)
    allow(a, "User:eve", "TOPIC", topic, "DESCRIBE")
    cfg = client_config(
        client, "SASL_SSL", mechanism="PLAIN", user="eve", password="eve-secret", ca=broker_of.pki.ca
    )
    with pytest.raises(Exception, match=r"(?i)topic.?authorization"):
        consume(client, broker_of.address("SASL_SSL"), topic, len(RECS), config=cfg, timeout=10)


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_prefixed_and_deny_acls(broker_of: Secured, client: str) -> None:
    """carol may WRITE and READ topics starting with 'pfx-', except those starting with
    'pfx-secret' (a prefixed DENY wins over the prefixed ALLOW)."""
    a = admin(broker_of.plaintext)
    scram_user(a, "carol", "carol-secret")
    allow(a, "User:carol", "TOPIC", "pfx-", prefixed=True)
    allow(a, "User:carol", "TOPIC", "pfx-secret", prefixed=True, deny=True)
    allow(a, "User:carol", "GROUP", "*")
    open_topic, secret = new_topic(a, "pfx-open"), new_topic(a, "pfx-secret")
    cfg = client_config(
        client,
        "SASL_SSL",
        mechanism="SCRAM-SHA-256",
        user="carol",
        password="carol-secret",
        ca=broker_of.pki.ca,
    )
    produce(client, broker_of.address("SASL_SSL"), open_topic, RECS, config=cfg)
    assert len(consume(client, broker_of.address("SASL_SSL"), open_topic, len(RECS), config=cfg)) == len(RECS)
    with pytest.raises(Exception, match=r"(?i)topic.?authorization"):
        produce(client, broker_of.address("SASL_SSL"), secret, RECS[:1], config=cfg)


# --- TLS ------------------------------------------------------------------------------------------


def test_mutual_tls(broker_of: Secured) -> None:
    """The SSL listener requires a client certificate; its subject maps to the principal
    (RULE:^CN=([^,]+),.*$/$1/ gives User:tls-user), which the ACLs then govern."""
    pki = broker_of.pki
    cert = pki.client_cert("tls-user")
    topic = new_topic(admin(broker_of.plaintext), "sec-mtls")
    for client in ("confluent-kafka", "kafka-python", "kafkajs"):
        cfg = client_config(client, "SSL", ca=pki.ca, cert=cert)
        produce(client, broker_of.address("SSL"), topic, RECS, config=cfg)
    got = consume(
        "confluent-kafka",
        broker_of.address("SSL"),
        topic,
        3 * len(RECS),
        config=client_config("confluent-kafka", "SSL", ca=pki.ca, cert=cert),
    )
    assert len(got) == 3 * len(RECS)
    # another certificate of the same CA, whose principal has no ACLs
    stranger = pki.client_cert("stranger")
    cfg = client_config("confluent-kafka", "SSL", ca=pki.ca, cert=stranger)
    with pytest.raises(Exception, match=r"(?i)authorization"):
        produce("confluent-kafka", broker_of.address("SSL"), topic, RECS[:1], config=cfg)
    # no certificate: the handshake fails and the connection closes
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    with socket.create_connection(("127.0.0.1", broker_of.ports["SSL"]), timeout=5) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:  # TLS 1.3: refused after it
                tls.sendall(api.encode_request(18, 0, 1, "no-cert", {}))
                answer = tls.recv(4)
        except (ssl.SSLError, ConnectionError):
            answer = b""
    assert answer == b"", "a client without a certificate was answered"


def test_plaintext_client_on_tls_port_and_tls_client_on_plaintext_port(broker_of: Secured) -> None:
    """Both fail fast (the connection closes at once) and the broker keeps serving."""
    frame = api.encode_request(18, 0, 1, "wrong-port", {})
    for listener in ("SASL_SSL", "SSL"):
        with socket.create_connection(("127.0.0.1", broker_of.ports[listener]), timeout=5) as s:
            t0 = time.monotonic()
            s.sendall(frame)
            assert s.recv(64) in (b"",) or s.recv(64) == b""
            assert time.monotonic() - t0 < 2
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    t0 = time.monotonic()
    plain = AdminClient({"bootstrap.servers": broker_of.address("SASL_SSL")})
    with pytest.raises(KafkaException):
        plain.list_topics(timeout=3)
    assert time.monotonic() - t0 < 6
    # a TLS client on the PLAINTEXT port: its ClientHello is no Kafka frame
    ctx = ssl.create_default_context(cafile=str(broker_of.pki.ca))
    host, port = broker_of.plaintext.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        t0 = time.monotonic()
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        assert time.monotonic() - t0 < 2
    t0 = time.monotonic()
    tls_on_plain = AdminClient(
        {
            "bootstrap.servers": broker_of.plaintext,
            "security.protocol": "SSL",
            "ssl.ca.location": str(broker_of.pki.ca),
        }
    )
    with pytest.raises(KafkaException):
        tls_on_plain.list_topics(timeout=3)
    assert time.monotonic() - t0 < 6
    log = broker_of.broker.log_text()
    assert "a TLS handshake on a listener without TLS?" in log
    # still serving, on every listener
    assert admin(broker_of.plaintext).list_topics(timeout=10).topics is not None
    cfg = client_config(
        "confluent-kafka",
        "SASL_SSL",
        mechanism="PLAIN",
        user="bob",
        password="bob-secret",
        ca=broker_of.pki.ca,
    )
    topic = new_topic(admin(broker_of.plaintext), "sec-after")
    produce("confluent-kafka", broker_of.address("SASL_SSL"), topic, RECS, config=cfg)
    assert broker_of.broker.alive()


# --- what an unauthenticated client can cost ------------------------------------------------------


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_unauthenticated_huge_frame_is_disconnected(broker_of: Secured) -> None:
    """Before SASL completes a frame may not exceed sasl.server.max.receive.size (512 KiB): a
    100 MB size prefix closes the connection at once, and the broker's memory does not grow."""
    assert broker_of.broker.proc is not None
    pid = broker_of.broker.proc.pid
    before = rss_kib(pid)
    port = broker_of.ports["SASL_PLAINTEXT"]
    closed = 0
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(struct.pack(">i", 100 * 1024 * 1024) + b"\x00" * 65536)
            with contextlib.suppress(ConnectionError):
                for _ in range(160):  # 10 MB more, if the broker still reads
                    s.sendall(b"\x00" * 65536)
            s.settimeout(5)
            try:
                closed += s.recv(1) == b""
            except ConnectionError:
                closed += 1
    after = rss_kib(pid)
    assert closed == 20
    assert after - before < 8 * 1024, f"RSS grew from {before} KiB to {after} KiB"
    # the same on the TLS listener, once the handshake is done
    ctx = ssl.create_default_context(cafile=str(broker_of.pki.ca))
    with (
        socket.create_connection(("127.0.0.1", broker_of.ports["SASL_SSL"]), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s,
    ):
        s.sendall(struct.pack(">i", 100 * 1024 * 1024) + b"\x00" * 1024)
        assert s.recv(1) == b""
    assert rss_kib(pid) - before < 8 * 1024
    assert "exceeds" in broker_of.broker.log_text() or "too large" in broker_of.broker.log_text().lower()


def test_requests_before_authentication_close_the_connection(broker_of: Secured) -> None:
    port = broker_of.ports["SASL_PLAINTEXT"]
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(api.encode_request(18, 0, 1, "raw", {}))  # ApiVersions is allowed
        size = struct.unpack(">i", s.recv(4))[0]
        assert size > 0
        body = b""
        while len(body) < size:
            body += s.recv(size - len(body))
        s.sendall(api.encode_request(3, 1, 2, "raw", {"topics": None}))  # Metadata is not
        assert s.recv(1) == b""


def read_frame(s: socket.socket) -> bytes:
    size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
    return s.recv(size, socket.MSG_WAITALL)


def test_failed_authentication_waits_for_the_client_to_close(broker_of: Secured) -> None:
    """After the delayed failure answer the broker leaves the close to the client for a while: a
    client that reads the answer and the end of the stream together may drop the answer (as
    kafka-python does), and would then report a lost connection instead of wrong credentials."""
    port = broker_of.ports["SASL_PLAINTEXT"]
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(api.encode_request(17, 1, 1, "raw", {"mechanism": "PLAIN"}))
        assert read_frame(s)[4:6] == b"\x00\x00"  # handshake: no error
        s.sendall(api.encode_request(36, 1, 2, "raw", {"auth_bytes": b"\x00bob\x00wrong"}))
        time.sleep(0.6)  # past connection.failed.authentication.delay.ms (100 ms)
        answer = read_frame(s)
        assert answer[:4] == struct.pack(">i", 2) and answer[4:6] != b"\x00\x00"
        s.setblocking(False)
        with pytest.raises(BlockingIOError):
            s.recv(1)  # not closed yet: the close is the client's
        s.settimeout(5)
        t0 = time.monotonic()
        assert s.recv(1) == b""  # but a client that stays is closed after a bound
        assert time.monotonic() - t0 < 4


def test_admin_command_line_over_sasl_ssl(broker_of: Secured, tmp_path: Path) -> None:
    """``pylog topic`` with Kafka tools' ``--command-config`` file, or ``-X`` settings."""
    a = admin(broker_of.plaintext)
    topic = new_topic(a, "sec-cli")
    produce("confluent-kafka", broker_of.plaintext, topic, RECS)
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
        'password="alice-secret";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={broker_of.pki.ca}\nclient.id=tools\n"
    )
    address = broker_of.address("SASL_SSL")

    def pylog(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*pylog_command(), *args], capture_output=True, text=True, timeout=60, check=False
        )

    listed = pylog("topic", "list", "-b", address, "--command-config", str(config))
    assert listed.returncode == 0 and topic in listed.stdout, listed.stderr
    settings = [
        "-X",
        "security.protocol=SASL_SSL",
        "-X",
        "sasl.mechanism=SCRAM-SHA-256",
        "-X",
        "sasl.username=alice",
        "-X",
        f"ssl.ca.location={broker_of.pki.ca}",
    ]
    consumed = pylog(
        "topic",
        "consume",
        topic,
        "-b",
        address,
        "-o",
        "beginning",
        "-e",
        *settings,
        "-X",
        "sasl.password=alice-secret",
    )
    assert consumed.returncode == 0 and consumed.stdout.split() == ["v0", "v1", "v2"], consumed.stderr
    wrong = pylog("topic", "list", "-b", address, *settings, "-X", "sasl.password=wrong", "--timeout", "2")
    assert wrong.returncode == 1 and "refused these credentials" in wrong.stderr
