"""SASL/OAUTHBEARER with OpenID Connect (KIP-768) against a real provider (oidc-provider, see
compat_oidc): confluent-kafka fetching its own tokens (``sasl.oauthbearer.method=oidc``),
kafka-python with a token provider, tokens the broker must refuse, key rotation at the provider,
ACLs on the token's principal, and the session lifetime a token bounds.

The module's broker serves PLAINTEXT (ANONYMOUS, a super user, for set-up) and SASL_PLAINTEXT
with OAUTHBEARER validated as Kafka's OAuthBearerValidatorCallbackHandler does, with the standard
authorizer.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from compat_broker import BrokerProcess, used_brokers
from compat_clients import Rec, consume, produce, unique
from compat_oidc import AUDIENCE, OidcProvider, new_key, sign, unsigned
from compat_security import listener_ports
from kafka.net.sasl.oauth import AbstractTokenProvider
from pylog.protocol import api
from test_compat_security import admin, allow, new_topic

from pylog.security.oauthbearer import LOGIN_MODULE, VALIDATOR_CALLBACK_HANDLER, client_first

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
CLIENTS = {"alice": "alice-secret", "bob": "bob-secret"}
REAUTH_MS = 600_000
LISTENER = "listener.name.sasl_plaintext.oauthbearer."


@dataclass
class OAuthBroker:
    broker: BrokerProcess
    oidc: OidcProvider
    ports: dict[str, int]

    @property
    def plaintext(self) -> str:
        return self.broker.bootstrap

    @property
    def sasl(self) -> str:
        return f"127.0.0.1:{self.ports['SASL_PLAINTEXT']}"


def start_oauth_broker(tmp: Path, oidc: OidcProvider, **extra: str) -> OAuthBroker:
    config = {
        # CLAIMS: a second OAUTHBEARER listener whose principal is the token's client_id claim
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CLAIMS://127.0.0.1:0",
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CLAIMS:SASL_PLAINTEXT"
        ),
        "listener.name.claims.oauthbearer.sasl.oauthbearer.sub.claim.name": "client_id",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "sasl.server.callback.handler.class": VALIDATOR_CALLBACK_HANDLER,
        f"{LISTENER}sasl.jaas.config": f"{LOGIN_MODULE} required ;",
        "sasl.oauthbearer.jwks.endpoint.url": oidc.jwks_url,
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": oidc.issuer,
        "connections.max.reauth.ms": str(REAUTH_MS),
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:ANONYMOUS",
        "auto.create.topics.enable": "false",
        **extra,
    }
    b = BrokerProcess(tmp / "data", tmp / "broker.log", config=config)
    try:
        b.start()
    except Exception:
        print(b.log_text())
        raise
    a = admin(b.bootstrap)
    allow(a, "User:alice", "TOPIC", "oauth-", prefixed=True)
    allow(a, "User:alice", "GROUP", "*")
    return OAuthBroker(b, oidc, listener_ports(b.log_text()))


@pytest.fixture(scope="module")
def oauth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthBroker]:
    tmp = tmp_path_factory.mktemp("oauthbearer")
    oidc = OidcProvider(tmp, CLIENTS).start()
    try:
        started = start_oauth_broker(tmp, oidc)
        yield started
        started.broker.close()
    finally:
        oidc.stop()


@pytest.fixture
def broker(oauth: OAuthBroker, request: pytest.FixtureRequest) -> OAuthBroker:
    used_brokers(request.node).append(oauth.broker)
    return oauth


def confluent_config(oidc: OidcProvider, client_id: str, secret: str | None = None) -> dict[str, Any]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": client_id,
        "sasl.oauthbearer.client.secret": secret or CLIENTS[client_id],
        "sasl.oauthbearer.token.endpoint.url": oidc.token_url,
        "sasl.oauthbearer.scope": "kafka",
    }


class TokenProvider(AbstractTokenProvider):
    """kafka-python's ``sasl_oauth_token_provider``: a fresh token from the provider each time."""

    def __init__(self, oidc: OidcProvider, client_id: str) -> None:
        super().__init__()
        self.oidc, self.client_id = oidc, client_id

    def token(self) -> str:
        return self.oidc.token(self.client_id)


RECS = [Rec(f"v{i}".encode(), f"k{i}".encode()) for i in range(20)]


def test_confluent_kafka_produces_and_consumes_with_oidc_tokens(broker: OAuthBroker) -> None:
    topic = new_topic(admin(broker.plaintext), "oauth-ck")
    cfg = confluent_config(broker.oidc, "alice")
    produce("confluent-kafka", broker.sasl, topic, RECS, config=cfg)
    got = consume("confluent-kafka", broker.sasl, topic, len(RECS), config=cfg)
    assert [r.value for r in got] == [r.value for r in RECS]


def test_kafka_python_with_a_token_provider(broker: OAuthBroker) -> None:
    topic = new_topic(admin(broker.plaintext), "oauth-kp")
    cfg = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": TokenProvider(broker.oidc, "alice"),
    }
    produce("kafka-python", broker.sasl, topic, RECS, config=cfg)
    got = consume("kafka-python", broker.sasl, topic, len(RECS), config=cfg)
    assert [r.value for r in got] == [r.value for r in RECS]


def test_the_sdk_takes_tokens_from_the_token_endpoint(broker: OAuthBroker) -> None:
    """pylog's own client (the SDK) with librdkafka's OAUTHBEARER settings: alice writes and reads
    her topic; bob's valid token does not open it; a wrong secret is a plain error."""
    import pyarrow as pa

    import pylog

    topic = new_topic(admin(broker.plaintext), "oauth-sdk")
    alice = confluent_config(broker.oidc, "alice")
    data = pa.table({"key": [f"k{i}".encode() for i in range(50)], "value": [b"v" * 10] * 50})
    written = pylog.write_topic(data, topic, bootstrap_servers=broker.sasl, key="key", security=alice)
    assert written.records == 50
    assert pylog.read_topic(topic, bootstrap_servers=broker.sasl, security=alice).num_rows == 50
    with pytest.raises(Exception, match=r"(?i)authoriz"):
        pylog.read_topic(topic, bootstrap_servers=broker.sasl, security=confluent_config(broker.oidc, "bob"))
    with pytest.raises(Exception, match="token endpoint"):
        pylog.read_topic(
            topic, bootstrap_servers=broker.sasl, security=confluent_config(broker.oidc, "alice", "wrong")
        )


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_clients_reauthenticate_before_their_token_expires(tmp_path: Path, client: str) -> None:
    """The provider issues 6 s tokens; the broker ends each session with its token
    (connections.max.reauth.ms is far longer), so a client producing for longer re-authenticates
    on its connections with fresh tokens (taken at 80% of the old one's lifetime), and every record
    arrives."""
    oidc = OidcProvider(tmp_path, CLIENTS, ttl_s=6).start()
    try:
        started = start_oauth_broker(tmp_path, oidc)
        try:
            topic = new_topic(admin(started.plaintext), "oauth-reauth")
            deadline = time.monotonic() + 10
            n = 0
            if client == "confluent-kafka":
                from confluent_kafka import Producer

                errors: list[Any] = []
                cfg = {"bootstrap.servers": started.sasl, **confluent_config(oidc, "alice")}
                p = Producer({**cfg, "error_cb": errors.append, "linger.ms": 0})
                delivered: list[Any] = []
                while time.monotonic() < deadline:
                    p.produce(topic, b"r%d" % n, on_delivery=lambda err, msg: delivered.append(err))
                    n += 1
                    p.poll(0.1)
                assert p.flush(15) == 0
                assert len(delivered) == n and not any(delivered), delivered[:3]
                assert not errors, errors
            else:
                from kafka import KafkaProducer

                kp = KafkaProducer(
                    bootstrap_servers=started.sasl,
                    security_protocol="SASL_PLAINTEXT",
                    sasl_mechanism="OAUTHBEARER",
                    sasl_oauth_token_provider=TokenProvider(oidc, "alice"),
                )
                while time.monotonic() < deadline:
                    kp.send(topic, b"r%d" % n).get(10)
                    n += 1
                    time.sleep(0.1)
                kp.close()
            got = consume("confluent-kafka", started.sasl, topic, n, config=confluent_config(oidc, "alice"))
            assert len(got) == n
            log = started.broker.log_text(10**8)
            assert log.count("re-authenticated as User:alice") >= 1
            assert "its SASL session expired" not in log
        finally:
            started.broker.close()
    finally:
        oidc.stop()


def read_frame(s: socket.socket) -> bytes:
    size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
    return s.recv(size, socket.MSG_WAITALL)


def authenticate(port: int, token: str) -> tuple[Any, Any | None]:
    """SaslHandshake + SaslAuthenticate v1 with ``token`` on a raw socket: (the answer to the
    client's first message, the answer to its ``\\x01`` after an error message, else None)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(api.encode_request(17, 1, 1, "raw", {"mechanism": "OAUTHBEARER"}))
        _, hs = api.decode_response(17, 1, read_frame(s))
        assert hs.error_code == 0 and "OAUTHBEARER" in hs.mechanisms
        s.sendall(api.encode_request(36, 1, 2, "raw", {"auth_bytes": client_first(token)}))
        _, first = api.decode_response(36, 1, read_frame(s))
        if first.error_code or not first.auth_bytes:
            return first, None
        s.sendall(api.encode_request(36, 1, 3, "raw", {"auth_bytes": b"\x01"}))
        _, second = api.decode_response(36, 1, read_frame(s))
        return first, second


def test_a_provider_token_authenticates_with_a_session_bounded_by_its_expiry(broker: OAuthBroker) -> None:
    first, second = authenticate(broker.ports["SASL_PLAINTEXT"], broker.oidc.token("alice"))
    assert first.error_code == 0 and bytes(first.auth_bytes) == b"" and second is None
    # the token lives 300 s, less than connections.max.reauth.ms: the session ends with the token
    assert 0 < first.session_lifetime_ms <= broker.oidc.ttl_s * 1000


@pytest.mark.parametrize(
    "case",
    ["expired", "not yet valid", "wrong audience", "wrong issuer", "wrong key", "unsigned", "no sub",
     "not a jwt"],
)
def test_bad_tokens_are_refused(broker: OAuthBroker, case: str) -> None:
    oidc = broker.oidc
    now = int(time.time())
    key = oidc.key
    token = {
        "expired": lambda: sign(key, oidc.claims("alice", iat=now - 600, exp=now - 300)),
        "not yet valid": lambda: sign(key, oidc.claims("alice", nbf=now + 600)),
        "wrong audience": lambda: sign(key, oidc.claims("alice", aud="urn:another:cluster")),
        "wrong issuer": lambda: sign(key, oidc.claims("alice", iss="http://127.0.0.1:1")),
        # a key the provider never had, under the provider's key id
        "wrong key": lambda: sign(new_key("x"), oidc.claims("alice"), kid=key.kid),
        "unsigned": lambda: unsigned(oidc.claims("alice")),
        "no sub": lambda: sign(key, {k: v for k, v in oidc.claims("alice").items() if k != "sub"}),
        "not a jwt": lambda: "bm90LmEuand0",
    }[case]()
    first, second = authenticate(broker.ports["SASL_PLAINTEXT"], token)
    assert first.error_code == 0 and bytes(first.auth_bytes) == b'{"status":"invalid_token"}'
    assert second is not None and second.error_code == 58  # SASL_AUTHENTICATION_FAILED
    assert second.error_message.startswith("Authentication failed: ")
    reason = {
        "expired": "expired",
        "not yet valid": "not valid before",
        "wrong audience": "audience",
        "wrong issuer": "issuer",
        "wrong key": "does not verify",
        "unsigned": "unsupported_algorithm",
        "no sub": "no sub claim",
        "not a jwt": "",
    }[case]
    assert reason in second.error_message


def test_a_refused_token_fails_the_client(broker: OAuthBroker) -> None:
    """kafka-python handing over a token for another cluster does not get through: the broker
    refuses each of its attempts, naming the audience."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    class Foreign(TokenProvider):
        def token(self) -> str:
            return sign(self.oidc.key, self.oidc.claims("alice", aud="urn:another:foreign"))

    def refusals() -> int:
        return broker.broker.log_text(10**8).count("audience 'urn:another:foreign'")

    before = refusals()
    with pytest.raises(KafkaError):
        KafkaProducer(
            bootstrap_servers=broker.sasl,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=Foreign(broker.oidc, "alice"),
            bootstrap_timeout_ms=5000,
        )
    assert refusals() > before


def test_acls_apply_to_the_tokens_principal(broker: OAuthBroker) -> None:
    """bob's token is valid but User:bob has no ACLs; alice's topic is hers alone."""
    from confluent_kafka import KafkaException, Producer

    topic = new_topic(admin(broker.plaintext), "oauth-acl")
    p = Producer({"bootstrap.servers": broker.sasl, **confluent_config(broker.oidc, "bob")})
    errors: list[Any] = []
    p.produce(topic, b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(20)
    assert errors and errors[0] is not None and errors[0].name() == "TOPIC_AUTHORIZATION_FAILED"
    oidc = broker.oidc
    produce("confluent-kafka", broker.sasl, topic, RECS[:1], config=confluent_config(oidc, "alice"))
    with pytest.raises(KafkaException):
        consume("confluent-kafka", broker.sasl, topic, 1, config=confluent_config(oidc, "bob"), timeout=5)


def test_the_principal_claim_is_the_listeners(broker: OAuthBroker) -> None:
    """One token, two listeners: on CLAIMS (sasl.oauthbearer.sub.claim.name=client_id) it is
    User:alice and may write her topic; on SASL_PLAINTEXT it is User:<sub>, who may not."""
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    oidc = broker.oidc
    topic = new_topic(admin(broker.plaintext), "oauth-claim")

    class ServiceToken(TokenProvider):
        def token(self) -> str:
            return sign(self.oidc.key, self.oidc.claims("svc-7", client_id="alice"))

    def producer(port: int) -> Any:
        return KafkaProducer(
            bootstrap_servers=f"127.0.0.1:{port}",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=ServiceToken(oidc, "alice"),
            max_block_ms=10000,
        )

    as_alice = producer(broker.ports["CLAIMS"])
    as_alice.send(topic, b"by client_id").get(20)
    as_alice.close()
    as_service = producer(broker.ports["SASL_PLAINTEXT"])
    with pytest.raises(TopicAuthorizationFailedError):
        as_service.send(topic, b"by sub").get(20)
    as_service.close()
    got = consume("confluent-kafka", broker.sasl, topic, 1, config=confluent_config(oidc, "alice"))
    assert [r.value for r in got] == [b"by client_id"]


def test_a_key_rotated_at_the_provider_is_picked_up(broker: OAuthBroker) -> None:
    """The provider restarts signing with a key the broker has not seen: the first token naming it
    makes the broker fetch the JWKS again, and the clients go on."""
    oidc = broker.oidc
    old = oidc.key
    oidc.rotate(f"k-rotated-{int(time.time())}")
    topic = new_topic(admin(broker.plaintext), "oauth-rot")
    cfg = confluent_config(oidc, "alice")
    produce("confluent-kafka", broker.sasl, topic, RECS, config=cfg)
    got = consume("confluent-kafka", broker.sasl, topic, len(RECS), config=cfg)
    assert [r.value for r in got] == [r.value for r in RECS]
    assert f"a token names key id {oidc.key.kid!r}" in broker.broker.log_text(10**8)
    # the old key is gone from the provider's JWKS, and so from the broker's
    _, second = authenticate(broker.ports["SASL_PLAINTEXT"], sign(old, oidc.claims("alice")))
    assert second is not None and second.error_code == 58



@pytest.mark.timeout(240)
def test_nodes_authenticate_to_each_other_with_oauthbearer(tmp_path: Path) -> None:
    """A three-node cluster whose brokers replicate, and whose controllers talk Raft, over
    SASL_PLAINTEXT with OAUTHBEARER: each node takes client_credentials tokens for its client id
    ``node`` (a super user) from the provider; alice produces and consumes through it."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from pylog.local_cluster import LocalCluster

    oidc = OidcProvider(tmp_path, {**CLIENTS, "node": "node-secret"}).start()
    node_login = f'{LOGIN_MODULE} required clientId="node" clientSecret="node-secret" scope="kafka";'
    config = {
        "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
        "sasl.mechanism.controller.protocol": "OAUTHBEARER",
        "sasl.server.callback.handler.class": VALIDATOR_CALLBACK_HANDLER,
        "sasl.oauthbearer.jwks.endpoint.url": oidc.jwks_url,
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": oidc.issuer,
        "sasl.oauthbearer.token.endpoint.url": oidc.token_url,
        "listener.name.plaintext.oauthbearer.sasl.jaas.config": node_login,
        "listener.name.controller.oauthbearer.sasl.jaas.config": node_login,
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:node",
        "default.replication.factor": "3",
        "min.insync.replicas": "2",
    }
    cluster = LocalCluster(3, data_dir=tmp_path / "cluster", config=config, startup_timeout_s=90)
    try:
        cluster.start()
        bootstrap = cluster.bootstrap_servers
        node = AdminClient({"bootstrap.servers": bootstrap, **confluent_config(oidc, "node", "node-secret")})
        topic = unique("oauth-cluster")
        for f in node.create_topics([NewTopic(topic, 1, 3)]).values():
            f.result(30)
        allow(node, "User:alice", "TOPIC", topic)
        allow(node, "User:alice", "GROUP", "*")
        alice = confluent_config(oidc, "alice")
        recs = [Rec(b"r%d" % i) for i in range(20)]
        produce("confluent-kafka", bootstrap, topic, recs, acks="all", config=alice)  # 2 in-sync replicas
        got = consume("confluent-kafka", bootstrap, topic, len(recs), config=alice)
        assert [r.value for r in got] == [r.value for r in recs]
        deadline = time.monotonic() + 30
        while True:  # followers fetch from the leader over OAUTHBEARER: every replica joins the ISR
            md = node.list_topics(topic, timeout=10).topics[topic]
            if all(len(p.isrs) == 3 for p in md.partitions.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert all(sorted(p.isrs) == [1, 2, 3] for p in md.partitions.values()), md.partitions
    finally:
        cluster.close()
        oidc.stop()
