"""A secured two-node cluster (LocalCluster) configured as README shows it, end to end: SASL_SSL
with SCRAM and OAUTHBEARER (tokens from a real OpenID Connect provider, compat_oidc), the controller
listeners on SASL_SSL too, ACLs with super.users, the schema registry on https, and the audit topic
both nodes write to.

Every unauthenticated or unauthorized call is refused on the Kafka listener, the registry and the
controller listener; a confluent-kafka producer authenticated by the provider writes Avro records
whose schema its SchemaRegistryClient registered with a bearer token (``bearer.auth.*``); pylog's
SDK reads them back through the registry with its own client_credentials token; the audit topic
holds the refusals, and a client hammering the registry with a bad password is summarized instead
of filling it.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import struct
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from compat_clients import unique
from compat_oidc import AUDIENCE, OidcProvider, new_key, sign
from compat_security import STANDARD_AUTHORIZER, Pki
from pylog.protocol import api

from pylog.local_cluster import LocalCluster
from pylog.security.oauthbearer import LOGIN_MODULE, VALIDATOR_CALLBACK_HANDLER, client_first

CLIENTS = {"broker": "broker-secret", "admin": "admin-secret", "alice": "alice-secret"}
CAROL = ("carol", "carol-secret")  # SCRAM-SHA-256, created by admin, no ACLs
AUDIT_TOPIC = "_audit"
RATE = 20
SCHEMA = json.dumps({
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
})
SASL_AUTHENTICATION_FAILED = 58
AUTHORIZATION_FAILED = (29, 31)  # TOPIC_ / CLUSTER_AUTHORIZATION_FAILED


@dataclass
class Secured:
    cluster: LocalCluster
    oidc: OidcProvider
    pki: Pki

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers

    def registry_of(self, node_id: int) -> str:
        return f"https://127.0.0.1:{self.cluster.node(node_id).registry_port}"

    @property
    def registry(self) -> str:
        return self.registry_of(1)

    @property
    def controller_port(self) -> int:
        return self.cluster.node(1).controller_port

    def oidc_client(self, client_id: str) -> dict[str, Any]:
        """confluent-kafka's settings for a client that fetches its own tokens."""
        return {
            "bootstrap.servers": self.bootstrap, "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(self.pki.ca), "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": client_id,
            "sasl.oauthbearer.client.secret": CLIENTS[client_id],
            "sasl.oauthbearer.token.endpoint.url": self.oidc.token_url, "sasl.oauthbearer.scope": "kafka",
        }

    def scram_client(self, user: tuple[str, str]) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap, "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(self.pki.ca), "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user[0], "sasl.password": user[1],
        }


def node_config(pki: Pki, oidc: OidcProvider) -> dict[str, str]:
    """Every node's settings (LocalCluster adds node.id, the voters, listeners' ports, the registry
    port)."""
    node_login = f'{LOGIN_MODULE} required clientId="broker" clientSecret="{CLIENTS["broker"]}";'
    return {
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "SASL_SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,OAUTHBEARER",
        "sasl.server.callback.handler.class": VALIDATOR_CALLBACK_HANDLER,
        "sasl.oauthbearer.jwks.endpoint.url": oidc.jwks_url,
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": oidc.issuer,
        "sasl.oauthbearer.token.endpoint.url": oidc.token_url,
        "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": node_login,
        "listener.name.controller.oauthbearer.sasl.jaas.config": node_login,
        "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
        "sasl.mechanism.controller.protocol": "OAUTHBEARER",
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:broker;User:admin",
        "auto.create.topics.enable": "false",
        "pylog.audit.topic": AUDIT_TOPIC,
        "pylog.audit.rate.per.sec": str(RATE),
        "pylog.audit.summary.interval.ms": "1000",
    }


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
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

    tmp = tmp_path_factory.mktemp("secured-audit")
    pki = Pki.make(tmp / "pki")
    oidc = OidcProvider(tmp, CLIENTS).start()
    cluster = LocalCluster(nodes=2, data_dir=tmp / "cluster", config=node_config(pki, oidc),
                           startup_timeout_s=120)
    for n in cluster.nodes.values():
        n.overrides["listeners"] = (
            f"SASL_SSL://{n.host}:{n.broker_port},CONTROLLER://{n.host}:{n.controller_port}"
        )
    try:
        cluster.start()
        s = Secured(cluster, oidc, pki)
        assert cluster.schema_registry_url is not None and cluster.schema_registry_url.startswith("https://")
        admin = AdminClient(s.oidc_client("admin"))
        carol = UserScramCredentialUpsertion(
            CAROL[0], ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), CAROL[1].encode()
        )
        admin.alter_user_scram_credentials([carol])[CAROL[0]].result(30)
        for f in admin.create_topics([NewTopic("orders", 1, 1), NewTopic("payments", 1, 1)]).values():
            f.result(30)
        acls = [
            AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.ALL, AclPermissionType.ALLOW),
            AclBinding(ResourceType.GROUP, "orders-", ResourcePatternType.PREFIXED, "User:alice", "*",
                       AclOperation.READ, AclPermissionType.ALLOW),
        ]
        for f in admin.create_acls(acls).values():
            f.result(30)
        yield s
    except Exception:
        for n in cluster.nodes.values():
            print(f"node {n.node_id}:\n{n.log_tail(80)}")
        raise
    finally:
        cluster.close()
        oidc.stop()


@pytest.fixture
def node(secured: Secured) -> Secured:
    dead = [n.node_id for n in secured.cluster.nodes.values() if not n.running]
    assert not dead, f"nodes {dead} of the secured cluster died"
    return secured


def forged_token(oidc: OidcProvider, sub: str) -> str:
    """A well-formed token for ``sub`` signed by a key the provider never published."""
    return sign(new_key("forged"), oidc.claims(sub), kid=oidc.key.kid)


# --- the registry over https ----------------------------------------------------------------


def call(node: Secured, method: str, path: str, body: Any = None, authorization: str | None = None,
         registry: str | None = None) -> tuple[int, Any, dict[str, str]]:
    ctx = ssl.create_default_context(cafile=str(node.pki.ca))
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
    if authorization is not None:
        headers["Authorization"] = authorization
    data = None if body is None else json.dumps(body).encode()
    url = (registry or node.registry) + path
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30, context=ctx) as resp:
            raw, status, got = resp.read(), resp.status, dict(resp.headers)
    except urllib.error.HTTPError as exc:
        raw, status, got = exc.read(), exc.code, dict(exc.headers)
    return status, json.loads(raw) if raw else None, got


def basic(user: tuple[str, str]) -> str:
    return "Basic " + base64.b64encode(f"{user[0]}:{user[1]}".encode()).decode()


def test_the_registry_refuses_unauthenticated_and_unauthorized_calls(node: Secured) -> None:
    assert node.registry.startswith("https://")
    status, body, headers = call(node, "GET", "/subjects")
    assert status == 401 and body["error_code"] == 401
    assert "Basic realm=" in headers["WWW-Authenticate"] and "Bearer realm=" in headers["WWW-Authenticate"]
    forged = f"Bearer {forged_token(node.oidc, 'alice')}"
    status, body, _ = call(node, "GET", "/subjects", authorization=forged)
    assert status == 401 and "invalid bearer token" in body["message"]
    status, _, _ = call(node, "GET", "/subjects", authorization=basic((CAROL[0], "wrong")))
    assert status == 401
    # authenticated, not authorized: carol (SCRAM, no ACLs) and alice (a token) outside her topic
    status, body, _ = call(node, "POST", "/subjects/orders-value/versions", {"schema": SCHEMA},
                           authorization=basic(CAROL))
    assert status == 403 and body["error_code"] == 40301
    alice = f"Bearer {node.oidc.token('alice')}"
    status, body, _ = call(node, "POST", "/subjects/payments-value/versions", {"schema": SCHEMA},
                           authorization=alice)
    assert status == 403 and "User:alice" in body["message"]
    status, body, _ = call(node, "GET", "/subjects", authorization=alice)
    assert status == 200 and isinstance(body, list)


# --- the Kafka listener ---------------------------------------------------------------------


def test_the_kafka_listener_refuses_unauthenticated_and_unauthorized_clients(node: Secured) -> None:
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka.admin import AdminClient

    with pytest.raises(KafkaException):  # a wrong SCRAM password
        AdminClient(node.scram_client((CAROL[0], "wrong"))).list_topics(timeout=10)
    token = forged_token(node.oidc, "alice")
    forged = {**node.oidc_client("alice")}
    for k in ("sasl.oauthbearer.method", "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret",
              "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.scope"):
        forged.pop(k)
    forged["oauth_cb"] = lambda _config: (token, time.time() + 300)
    with pytest.raises(KafkaException):  # a token the provider did not sign
        AdminClient(forged).list_topics(timeout=10)
    errors: list[Any] = []
    p = Producer({**node.scram_client(CAROL), "message.timeout.ms": 10000})  # authenticated, no ACLs
    p.produce("orders", b"x", on_delivery=lambda err, _msg: errors.append(err))
    p.flush(20)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


# --- the controller listener ----------------------------------------------------------------


def _frame(s: ssl.SSLSocket) -> bytes:
    head = s.recv(4)
    if not head:
        return b""
    size = struct.unpack(">i", head)[0]
    data = b""
    while len(data) < size:
        chunk = s.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _controller(node: Secured) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(node.pki.ca))
    raw = socket.create_connection(("127.0.0.1", node.controller_port), timeout=20)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


CREATE_TOPICS = {"topics": [{"name": "from-the-controller", "num_partitions": 1, "replication_factor": 1,
                             "assignments": [], "configs": []}], "timeout_ms": 10000, "validate_only": False}


def _sasl(s: ssl.SSLSocket, token: str) -> Any:
    s.sendall(api.encode_request(17, 1, 1, "raw", {"mechanism": "OAUTHBEARER"}))
    _, hs = api.decode_response(17, 1, _frame(s))
    assert hs.error_code == 0
    s.sendall(api.encode_request(36, 1, 2, "raw", {"auth_bytes": client_first(token)}))
    _, first = api.decode_response(36, 1, _frame(s))
    if first.error_code == 0 and bytes(first.auth_bytes):  # the error message: acknowledge it
        s.sendall(api.encode_request(36, 1, 3, "raw", {"auth_bytes": b"\x01"}))
        _, first = api.decode_response(36, 1, _frame(s))
    return first


def test_the_controller_listener_refuses_unauthenticated_and_unauthorized_calls(node: Secured) -> None:
    with _controller(node) as s:  # a request before SASL: the connection is closed
        s.sendall(api.encode_request(19, 5, 1, "raw", CREATE_TOPICS))
        assert _frame(s) == b""
    with _controller(node) as s:
        assert _sasl(s, forged_token(node.oidc, "admin")).error_code == SASL_AUTHENTICATION_FAILED
    with _controller(node) as s:  # alice authenticates but may not create topics
        assert _sasl(s, node.oidc.token("alice")).error_code == 0
        s.sendall(api.encode_request(19, 5, 3, "raw", CREATE_TOPICS))
        _, resp = api.decode_response(19, 5, _frame(s))
        assert resp.topics[0].error_code in AUTHORIZATION_FAILED


# --- Avro with a bearer token, and the audit topic -------------------------------------------


def test_an_oidc_producer_writes_avro_registered_with_a_bearer_token(node: Secured) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    import pylog

    registry = SchemaRegistryClient({
        "url": node.registry,
        "ssl.ca.location": str(node.pki.ca),
        "bearer.auth.credentials.source": "OAUTHBEARER",
        "bearer.auth.client.id": "alice",
        "bearer.auth.client.secret": CLIENTS["alice"],
        "bearer.auth.scope": "kafka",
        "bearer.auth.issuer.endpoint.url": node.oidc.token_url,
        "bearer.auth.logical.cluster": "pylog",  # required by the client; pylog serves one registry
    })
    serialize = AvroSerializer(registry, SCHEMA)
    producer = Producer(node.oidc_client("alice"))
    orders = [{"id": i, "item": f"item-{i}"} for i in range(5)]
    for order in orders:
        value = serialize(order, SerializationContext("orders", MessageField.VALUE))
        producer.produce("orders", value)
    assert producer.flush(30) == 0
    assert registry.get_latest_version("orders-value").schema_id is not None
    # pylog's SDK: the same OAUTHBEARER settings, a client_credentials token for the registry too
    alice = {k: v for k, v in node.oidc_client("alice").items() if k != "bootstrap.servers"}
    table = pylog.read_topic("orders", bootstrap_servers=node.bootstrap, security=alice, decode="registry",
                             schema_registry_url=node.registry)
    assert [dict(v) for v in table.column("value").to_pylist()] == orders


def _audit_events(node: Secured, want: Any, timeout_s: float = 30.0) -> list[dict[str, Any]]:
    import pylog

    admin = {k: v for k, v in node.oidc_client("admin").items() if k != "bootstrap.servers"}
    deadline = time.monotonic() + timeout_s
    while True:
        table = pylog.read_topic(AUDIT_TOPIC, bootstrap_servers=node.bootstrap, security=admin)
        events = [json.loads(v) for v in table.column("value").to_pylist()]
        keys = table.column("key").to_pylist()
        assert all(k.decode() == e["principal"] for k, e in zip(keys, events, strict=True))
        if want(events) or time.monotonic() > deadline:
            return events
        time.sleep(0.5)


def test_the_audit_topic_holds_the_refusals(node: Secured) -> None:
    test_the_registry_refuses_unauthenticated_and_unauthorized_calls(node)
    test_the_kafka_listener_refuses_unauthenticated_and_unauthorized_clients(node)
    test_the_controller_listener_refuses_unauthenticated_and_unauthorized_calls(node)

    def seen(events: list[dict[str, Any]]) -> bool:
        return any(e["kind"] == "authorization" and e["listener"] == "CONTROLLER" for e in events)

    events = _audit_events(node, seen)
    denied = {(e["listener"], e["principal"], e.get("resource", ""), e["operation"])
              for e in events if e["kind"] == "authorization" and e["outcome"] == "denied"}
    # carol's producer is refused the topic (in Metadata, before it produces)
    assert any(d[:3] == ("SASL_SSL", "User:carol", "TOPIC:orders") for d in denied)
    register = "POST /subjects/{subject}/versions"
    assert ("schema-registry", "User:carol", "SUBJECT:orders-value", register) in denied
    assert ("schema-registry", "User:alice", "SUBJECT:payments-value", register) in denied
    assert any(listener == "CONTROLLER" and op == "CREATE_TOPICS" for listener, _, _, op in denied)
    failed = [e for e in events if e["kind"] == "authentication" and e["outcome"] == "failure"]
    assert {e["listener"] for e in failed} >= {"SASL_SSL", "CONTROLLER", "schema-registry"}
    assert any("invalid bearer token" in e.get("reason", "") for e in failed)
    assert any(e["operation"] == "CREATE_TOPICS" and e["listener"] == "CONTROLLER" for e in failed)
    assert all(e["client_address"] == "127.0.0.1" and e["time_ms"] > 0 for e in failed)
    assert {e["node_id"] for e in events} == {1, 2}  # both nodes write to the one audit topic
    ok = [e for e in events if e["kind"] == "authentication" and e["outcome"] == "success"]
    assert any(e["principal"] == "User:alice" and e["listener"] == "SASL_SSL" for e in ok)


def test_a_client_hammering_bad_passwords_is_summarized(node: Secured) -> None:
    user = (unique("hammer"), "wrong")
    for _ in range(RATE * 5):  # at the second node's registry
        status, _, _ = call(node, "GET", "/subjects", authorization=basic(user), registry=node.registry_of(2))
        assert status == 401

    def summarized(events: list[dict[str, Any]]) -> bool:
        return any(e["kind"] == "summary" for e in events)

    events = _audit_events(node, summarized)
    summaries = [e for e in events if e["kind"] == "summary" and e["node_id"] == 2]
    assert summaries, "no summary of the dropped events"
    dropped = sum(n for s in summaries for k, n in s["dropped"].items()
                  if k == "authentication.failure 127.0.0.1")
    assert dropped > 0
    kept = [e for e in events if user[0] in e.get("reason", "")]
    assert {e["node_id"] for e in kept} == {2}
    assert 0 < len(kept) < RATE * 5  # bounded by the rate


def test_the_registry_fetches_a_rotated_key_for_a_bearer_token(node: Secured) -> None:
    """Last in the module: the provider signs with a new key from now on (published alone); the
    registry's first token with the new kid waits for the JWKS to be fetched again."""
    node.oidc.rotate("k2")
    status, body, _ = call(node, "GET", "/subjects", authorization=f"Bearer {node.oidc.token('alice')}")
    assert status == 200 and isinstance(body, list)
    status, _, _ = call(node, "GET", "/subjects", authorization=f"Bearer {forged_token(node.oidc, 'alice')}")
    assert status == 401
