"""The Schema Registry of a secured broker: HTTP Basic with the SASL listener's users (PLAIN and
SCRAM), https with the listener's certificates, client certificates on a mutual-TLS broker, and the
cluster's ACLs deciding per subject; confluent-kafka's registry client and serializer, and pylog's
SDK, reach it with the credentials they use for Kafka.

The module's broker serves PLAINTEXT (the --listen one, nobody's super user), SASL_SSL (the
registry follows it: https + Basic), SASL_PLAINTEXT (the inter-broker listener, as ``User:admin``)
and SSL. ``super.users=User:admin``. alice (SCRAM-SHA-256) may READ and WRITE topics prefixed
``sr-``; bob (PLAIN) may READ topic ``sr-shared``; eve (PLAIN) has no ACLs.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from compat_broker import BrokerProcess, free_port, pylog_command, used_brokers
from compat_clients import unique
from compat_security import PLAIN_MODULE, Pki, broker_config, client_config, listener_ports

SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}
ADMIN = ("admin", "admin-secret")
ALICE = ("alice", "alice-secret")  # SCRAM-SHA-256, from the metadata log
BOB = ("bob", "bob-secret")  # PLAIN
EVE = ("eve", "eve-secret")  # PLAIN, no ACLs


@dataclass
class SecuredRegistry:
    broker: BrokerProcess
    pki: Pki
    ports: dict[str, int]
    url: str

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def kafka(self, user: tuple[str, str], mechanism: str = "PLAIN") -> dict[str, Any]:
        """confluent-kafka settings for the SASL_SSL listener."""
        return {
            "bootstrap.servers": self.address("SASL_SSL"),
            **client_config(
                "confluent-kafka", "SASL_SSL", mechanism=mechanism, user=user[0], password=user[1],
                ca=self.pki.ca,
            ),
        }


def _jaas() -> str:
    users = " ".join(f'user_{u}="{p}"' for u, p in (ADMIN, BOB, EVE))
    return f'{PLAIN_MODULE} required username="{ADMIN[0]}" password="{ADMIN[1]}" {users};'


def _start(tmp: Path, pki: Pki, name: str, config: dict[str, str], scram: list[str] = ()) -> BrokerProcess:
    data = tmp / f"{name}-data"
    if scram:
        cmd = [*pylog_command(), "storage", "format", "--data-dir", str(data)]
        for spec in scram:
            cmd += ["--add-scram", spec]
        subprocess.run(cmd, check=True, capture_output=True, timeout=60)
    b = BrokerProcess(data, tmp / f"{name}.log", config=config)
    try:
        b.start()
    except Exception:
        print(b.log_text())
        b.close()
        raise
    return b


def _admin(conf: dict[str, Any]) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(conf)


def _allow(admin: Any, principal: str, name: str, op: str, *, prefixed: bool = False) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    binding = AclBinding(
        ResourceType.TOPIC, name, ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL,
        principal, "*", getattr(AclOperation, op), AclPermissionType.ALLOW,
    )
    for f in admin.create_acls([binding]).values():
        f.result(20)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredRegistry]:
    tmp = tmp_path_factory.mktemp("secured-registry")
    pki = Pki.make(tmp / "pki")
    config = broker_config(pki)
    config.update({
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": _jaas(),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": _jaas(),
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "super.users": "User:admin",
        "auto.create.topics.enable": "false",
        "schema.registry.listeners": f"http://127.0.0.1:{free_port()}",
    })
    b = _start(tmp, pki, "secured", config, ["SCRAM-SHA-256=[name=alice,password=alice-secret]"])
    try:
        log = b.log_text()
        url = next(line.split(" on ", 1)[1].strip() for line in log.splitlines()
                   if line.startswith("pylog schema registry on "))
        s = SecuredRegistry(b, pki, listener_ports(log), url)
        admin = _admin(s.kafka(ADMIN))
        _allow(admin, "User:alice", "sr-", "READ", prefixed=True)
        _allow(admin, "User:alice", "sr-", "WRITE", prefixed=True)
        _allow(admin, "User:bob", "sr-shared", "READ")
        yield s
    finally:
        b.close()


@pytest.fixture
def reg(secured: SecuredRegistry, request: pytest.FixtureRequest) -> SecuredRegistry:
    used_brokers(request.node).append(secured.broker)
    assert secured.broker.alive(), "the module's secured broker died"
    return secured


# --- raw HTTP -----------------------------------------------------------------------------------


def call(
    reg: SecuredRegistry,
    method: str,
    path: str,
    body: Any = None,
    *,
    user: tuple[str, str] | None = None,
    cert: tuple[Path, Path] | None = None,
    url: str | None = None,
) -> tuple[int, Any, dict[str, str]]:
    """(status, JSON body, headers) of one request over https, trusting the test CA."""
    ctx = ssl.create_default_context(cafile=str(reg.pki.ca))
    if cert is not None:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
    if user is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user[0]}:{user[1]}".encode()).decode()
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request((url or reg.url) + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30, context=ctx) as resp:
            raw, status, got = resp.read(), resp.status, dict(resp.headers)
    except urllib.error.HTTPError as exc:
        raw, status, got = exc.read(), exc.code, dict(exc.headers)
    try:
        return status, json.loads(raw) if raw else None, got
    except ValueError:
        return status, raw.decode(), got


def registered(reg: SecuredRegistry, subject: str, schema: dict = SCHEMA) -> int:
    status, body, _ = call(reg, "POST", f"/subjects/{subject}/versions", {"schema": json.dumps(schema)},
                           user=ADMIN)
    assert status == 200, body
    return int(body["id"])


def test_registry_is_served_over_https_behind_the_sasl_ssl_listener(reg: SecuredRegistry) -> None:
    assert reg.url.startswith("https://127.0.0.1:")
    status, body, headers = call(reg, "GET", "/subjects")
    assert status == 401
    assert body["error_code"] == 401 and "authentication required" in body["message"]
    assert headers["WWW-Authenticate"].startswith('Basic realm="')
    with pytest.raises(urllib.error.URLError):  # a client that does not trust the CA
        urllib.request.urlopen(reg.url + "/subjects", timeout=10)


@pytest.mark.parametrize("user", [ADMIN, ALICE, BOB], ids=["plain-super-user", "scram", "plain"])
def test_plain_and_scram_users_authenticate(reg: SecuredRegistry, user: tuple[str, str]) -> None:
    status, body, _ = call(reg, "GET", "/subjects", user=user)
    assert status == 200 and isinstance(body, list)
    status, body, headers = call(reg, "GET", "/subjects", user=(user[0], "wrong"))
    assert status == 401 and body["error_code"] == 401
    assert "WWW-Authenticate" in headers


def test_scram_sha_512_credential_added_later_authenticates(reg: SecuredRegistry) -> None:
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    name = unique("carol")
    upsert = UserScramCredentialUpsertion(name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          b"carol-secret")
    admin = _admin(reg.kafka(ADMIN))
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(20)
    status, body, _ = call(reg, "GET", "/subjects", user=(name, "carol-secret"))
    assert status == 200, body
    assert call(reg, "GET", "/subjects", user=(name, "carol-secret!"))[0] == 401


def test_subjects_are_listed_and_read_as_the_acls_say(reg: SecuredRegistry) -> None:
    mine, shared, other = unique("sr-mine"), "sr-shared", unique("private")
    for subject in (f"{mine}-value", f"{shared}-value", f"{other}-value", f"{mine}-key"):
        registered(reg, subject)
    listing = {u: set(call(reg, "GET", "/subjects", user=u)[1]) for u in (ADMIN, ALICE, BOB, EVE)}
    assert {f"{mine}-value", f"{mine}-key", f"{shared}-value", f"{other}-value"} <= listing[ADMIN]
    assert {f"{mine}-value", f"{mine}-key", f"{shared}-value"} <= listing[ALICE]
    assert f"{other}-value" not in listing[ALICE]
    assert listing[BOB] == {f"{shared}-value"}
    assert listing[EVE] == set()
    status, body, _ = call(reg, "GET", f"/subjects/{other}-value/versions/latest", user=ALICE)
    assert status == 403 and body["error_code"] == 40301 and "alice" in body["message"]
    assert call(reg, "GET", f"/subjects/{shared}-value/versions/latest", user=BOB)[0] == 200
    # bob may read but not register or delete
    status, body, _ = call(reg, "POST", f"/subjects/{shared}-value/versions", {"schema": json.dumps(SCHEMA)},
                           user=BOB)
    assert status == 403 and body["error_code"] == 40301
    assert call(reg, "DELETE", f"/subjects/{shared}-value", user=BOB)[0] == 403
    # alice may write sr- topics' subjects, but deleting needs ALTER, which she lacks
    assert call(reg, "POST", f"/subjects/{mine}-value/versions", {"schema": json.dumps(SCHEMA)},
                user=ALICE)[0] == 200
    assert call(reg, "DELETE", f"/subjects/{mine}-value", user=ALICE)[0] == 403
    assert call(reg, "PUT", "/config", {"compatibility": "NONE"}, user=ALICE)[0] == 403
    # a schema by id: readable through a subject the caller may read
    sid = call(reg, "GET", f"/subjects/{other}-value/versions/latest", user=ADMIN)[1]["id"]
    assert call(reg, "GET", f"/schemas/ids/{sid}", user=ALICE)[0] == 200  # the same schema is under sr-mine
    assert call(reg, "GET", f"/schemas/ids/{sid}", user=EVE)[0] == 403
    assert set(call(reg, "GET", f"/schemas/ids/{sid}/subjects", user=BOB)[1]) == {f"{shared}-value"}


# --- every route: 401 without / with wrong credentials, 403 without ACLs, success when allowed ---

# (method, route, path, body, eve's answer): eve is authenticated but has no ACLs; routes that
# concern no subject are open to every authenticated caller, lists are filtered to nothing.
S = "sr-routes-value"
AVRO = {"schema": json.dumps(SCHEMA)}
ROUTES: list[tuple[str, str, str, Any, int]] = [
    ("GET", "/", "/", None, 200),
    ("GET", "/schemas/types", "/schemas/types", None, 200),
    ("GET", "/schemas", "/schemas", None, 200),
    ("GET", "/schemas/ids/{id}", "/schemas/ids/{sid}", None, 403),
    ("GET", "/schemas/ids/{id}/schema", "/schemas/ids/{sid}/schema", None, 403),
    ("GET", "/schemas/ids/{id}/subjects", "/schemas/ids/{sid}/subjects", None, 403),
    ("GET", "/schemas/ids/{id}/versions", "/schemas/ids/{sid}/versions", None, 403),
    ("GET", "/subjects", "/subjects", None, 200),
    ("GET", "/subjects/{subject}/versions", f"/subjects/{S}/versions", None, 403),
    ("POST", "/subjects/{subject}/versions", f"/subjects/{S}/versions", AVRO, 403),
    ("GET", "/subjects/{subject}/versions/{version}", f"/subjects/{S}/versions/1", None, 403),
    ("GET", "/subjects/{subject}/versions/{version}/schema", f"/subjects/{S}/versions/1/schema", None, 403),
    ("GET", "/subjects/{subject}/versions/{version}/referencedby", f"/subjects/{S}/versions/1/referencedby",
     None, 403),
    ("POST", "/subjects/{subject}", f"/subjects/{S}", AVRO, 403),
    ("POST", "/compatibility/subjects/{subject}/versions/{version}",
     f"/compatibility/subjects/{S}/versions/latest", AVRO, 403),
    ("POST", "/compatibility/subjects/{subject}/versions",
     f"/compatibility/subjects/{S}/versions", AVRO, 403),
    ("GET", "/config", "/config", None, 200),
    ("PUT", "/config", "/config", {"compatibility": "BACKWARD"}, 403),
    ("GET", "/config/{subject}", f"/config/{S}", None, 403),
    ("PUT", "/config/{subject}", f"/config/{S}", {"compatibility": "FULL"}, 403),
    ("DELETE", "/config/{subject}", f"/config/{S}", None, 403),
    ("GET", "/mode", "/mode", None, 200),
    ("PUT", "/mode", "/mode", {"mode": "READWRITE"}, 403),
    ("GET", "/mode/{subject}", f"/mode/{S}", None, 403),
    ("PUT", "/mode/{subject}", f"/mode/{S}", {"mode": "READWRITE"}, 403),
    ("DELETE", "/mode/{subject}", f"/mode/{S}", None, 403),
    ("GET", "/contexts", "/contexts", None, 200),
    ("DELETE", "/config", "/config", None, 403),
    ("DELETE", "/subjects/{subject}/versions/{version}", f"/subjects/{S}/versions/2", None, 403),
    ("DELETE", "/subjects/{subject}", f"/subjects/{S}", None, 403),
]
V2 = {**SCHEMA, "fields": [*SCHEMA["fields"], {"name": "note", "type": ["null", "string"], "default": None}]}


def test_the_table_covers_every_route_the_registry_serves() -> None:
    from pylog.schema_registry.http import RegistryApp

    served = {
        (r.method, r.resource.canonical)
        for r in RegistryApp(None).app().router.routes()  # type: ignore[arg-type]
        if r.method != "HEAD" and r.resource is not None
    }
    assert served == {(m, route) for m, route, *_ in ROUTES}


def test_every_route_refuses_strangers_and_serves_the_allowed(reg: SecuredRegistry) -> None:
    sid = registered(reg, S)
    assert call(reg, "POST", f"/subjects/{S}/versions", {"schema": json.dumps(V2)}, user=ADMIN)[0] == 200
    assert call(reg, "PUT", f"/config/{S}", {"compatibility": "BACKWARD"}, user=ADMIN)[0] == 200
    assert call(reg, "PUT", f"/mode/{S}", {"mode": "READWRITE"}, user=ADMIN)[0] == 200
    eve_sees: dict[str, Any] = {}
    for method, route, path, body, eve in ROUTES:
        path = path.format(sid=sid)
        where = f"{method} {route}"
        status, answer, headers = call(reg, method, path, body)
        assert status == 401, where
        assert answer["error_code"] == 401 and headers["WWW-Authenticate"].startswith("Basic realm="), where
        status, answer, headers = call(reg, method, path, body, user=("alice", "not-her-password"))
        assert status == 401 and "WWW-Authenticate" in headers, where
        status, answer, _ = call(reg, method, path, body, user=EVE)
        assert status == eve, (where, answer)
        if eve == 403:
            assert answer["error_code"] == 40301 and "eve" in answer["message"], where
        else:
            eve_sees[route] = answer
        status, answer, _ = call(reg, method, path, body, user=ADMIN)
        assert 200 <= status < 300, (where, answer)
    assert eve_sees["/subjects"] == [] and eve_sees["/schemas"] == []


def test_alice_may_do_what_her_acls_allow_on_every_subject_route(reg: SecuredRegistry) -> None:
    """READ + WRITE on the topic: reads, registration and checks succeed, ALTERs are refused."""
    subject = unique("sr-alice") + "-value"
    assert call(reg, "POST", f"/subjects/{subject}/versions", AVRO, user=ALICE)[0] == 200
    for method, path, body in [
        ("GET", f"/subjects/{subject}/versions", None),
        ("GET", f"/subjects/{subject}/versions/1", None),
        ("GET", f"/subjects/{subject}/versions/1/schema", None),
        ("GET", f"/subjects/{subject}/versions/1/referencedby", None),
        ("POST", f"/subjects/{subject}", AVRO),
        ("POST", f"/compatibility/subjects/{subject}/versions/latest", AVRO),
        ("GET", f"/config/{subject}?defaultToGlobal=true", None),
        ("GET", f"/mode/{subject}?defaultToGlobal=true", None),
    ]:
        assert call(reg, method, path, body, user=ALICE)[0] == 200, (method, path)
    for method, path, body in [
        ("PUT", f"/config/{subject}", {"compatibility": "NONE"}),
        ("PUT", f"/mode/{subject}", {"mode": "READONLY"}),
        ("DELETE", f"/subjects/{subject}/versions/1", None),
        ("DELETE", f"/subjects/{subject}", None),
        ("PUT", "/mode", {"mode": "READWRITE"}),
    ]:
        assert call(reg, method, path, body, user=ALICE)[0] == 403, (method, path)


# --- real clients -------------------------------------------------------------------------------


def test_confluent_client_and_serializer_with_basic_auth_over_https(reg: SecuredRegistry) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.error import SchemaRegistryError
    from confluent_kafka.serialization import MessageField, SerializationContext

    import pylog

    topic = unique("sr-typed")
    admin = _admin(reg.kafka(ADMIN))
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(20)
    client = SchemaRegistryClient(
        {"url": reg.url, "basic.auth.user.info": f"{ALICE[0]}:{ALICE[1]}", "ssl.ca.location": str(reg.pki.ca)}
    )
    sid = client.register_schema(f"{topic}-value", Schema(json.dumps(SCHEMA), "AVRO"))
    assert client.get_latest_version(f"{topic}-value").schema_id == sid
    serializer = AvroSerializer(client, json.dumps(SCHEMA), conf={"auto.register.schemas": False,
                                                                  "use.latest.version": True})
    producer = Producer(reg.kafka(ALICE, "SCRAM-SHA-256"))
    for i in range(3):
        ctx = SerializationContext(topic, MessageField.VALUE)
        producer.produce(topic, value=serializer({"id": i, "item": f"item-{i}"}, ctx))
    assert producer.flush(30) == 0

    stranger = SchemaRegistryClient({"url": reg.url, "ssl.ca.location": str(reg.pki.ca)})
    with pytest.raises(SchemaRegistryError) as failed:
        stranger.get_subjects()
    assert failed.value.http_status_code == 401
    eve = SchemaRegistryClient(
        {"url": reg.url, "basic.auth.user.info": f"{EVE[0]}:{EVE[1]}", "ssl.ca.location": str(reg.pki.ca)}
    )
    with pytest.raises(SchemaRegistryError) as failed:
        eve.get_latest_version(f"{topic}-value")
    assert failed.value.http_status_code == 403 and failed.value.error_code == 40301

    # the SDK reads typed records with the credentials it uses for Kafka
    security = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": ALICE[0],
                "sasl.password": ALICE[1], "ssl.ca.location": str(reg.pki.ca)}
    table = pylog.read_topic(topic, bootstrap_servers=reg.address("SASL_SSL"), decode="registry",
                             schema_registry_url=reg.url, security=security)
    assert table.column("value").to_pylist() == [{"id": i, "item": f"item-{i}"} for i in range(3)]
    # and writes registry-framed values, registering as the same user
    import pyarrow as pa

    written = unique("sr-written")
    for f in admin.create_topics([NewTopic(written, 1, 1)]).values():
        f.result(20)
    rows = pa.table({"id": pa.array([7], pa.int64()), "item": ["seven"]})
    pylog.write_topic(rows, written, bootstrap_servers=reg.address("SASL_SSL"), value_schema="registry",
                      schema_registry_url=reg.url, security=security)
    assert client.get_latest_version(f"{written}-value").version == 1
    table = pylog.read_topic(written, bootstrap_servers=reg.address("SASL_SSL"), decode="registry",
                             schema_registry_url=reg.url, security=security)
    assert table.column("value").to_pylist() == [{"id": 7, "item": "seven"}]
    # TLS settings alone (no SASL user) give no registry credentials: refused
    from pylog.schema_registry.errors import RegistryError
    from pylog.sdk.registry import HttpSchemas

    tls_only = HttpSchemas(reg.url, security={"security.protocol": "SSL", "ssl.ca.location": str(reg.pki.ca)})
    with pytest.raises(RegistryError) as refused:
        tls_only.latest(f"{topic}-value")
    assert refused.value.status == 401


# --- mutual TLS ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mtls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredRegistry]:
    """A broker whose only authenticating listener is SSL with ssl.client.auth=required; PLAINTEXT
    (ANONYMOUS) is its super user for set-up."""
    tmp = tmp_path_factory.mktemp("mtls-registry")
    pki = Pki.make(tmp / "pki")
    config = broker_config(pki)
    config.update({
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "super.users": "User:ANONYMOUS",
        "schema.registry.listeners": f"http://127.0.0.1:{free_port()}",
    })
    for key in ("sasl.enabled.mechanisms", "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                "listener.name.sasl_ssl.plain.sasl.jaas.config"):
        config.pop(key)
    b = _start(tmp, pki, "mtls", config)
    try:
        log = b.log_text()
        url = next(line.split(" on ", 1)[1].strip() for line in log.splitlines()
                   if line.startswith("pylog schema registry on "))
        s = SecuredRegistry(b, pki, listener_ports(log), url)
        admin = _admin({"bootstrap.servers": b.bootstrap})
        _allow(admin, "User:tls-reader", "certs", "READ", prefixed=True)
        yield s
    finally:
        b.close()


def test_client_certificates_are_mapped_to_principals(
    mtls: SecuredRegistry, request: pytest.FixtureRequest
) -> None:
    used_brokers(request.node).append(mtls.broker)
    assert mtls.url.startswith("https://")
    reader, stranger = mtls.pki.client_cert("tls-reader"), mtls.pki.client_cert("tls-stranger")
    # ANONYMOUS over PLAINTEXT is the super user: it registers (through the Kafka side, no certificate)
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    subject = unique("certs") + "-value"
    writer = SchemaRegistryClient({
        "url": mtls.url, "ssl.ca.location": str(mtls.pki.ca),
        "ssl.certificate.location": str(reader[0]), "ssl.key.location": str(reader[1]),
    })
    with pytest.raises(SchemaRegistryError) as refused:  # tls-reader may READ, not WRITE
        writer.register_schema(subject, Schema(json.dumps(SCHEMA), "AVRO"))
    assert refused.value.http_status_code == 403 and refused.value.error_code == 40301
    admin = _admin({"bootstrap.servers": mtls.broker.bootstrap})
    _allow(admin, "User:tls-reader", subject[: -len("-value")], "WRITE")
    sid = writer.register_schema(subject, Schema(json.dumps(SCHEMA), "AVRO"))
    assert writer.get_latest_version(subject).schema_id == sid
    assert subject in writer.get_subjects()
    status, body, _ = call(mtls, "GET", f"/subjects/{subject}/versions", cert=stranger)
    assert status == 403 and "tls-stranger" in body["message"]
    assert call(mtls, "GET", "/subjects", cert=stranger)[1] == []
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):  # no certificate, no TLS
        call(mtls, "GET", "/subjects")


# --- a cluster: writes forwarded to the registry's writer keep the caller's credentials -----------


@pytest.fixture
def secured_cluster(tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    """Two nodes whose client listener is SASL_SSL (PLAIN: admin, the nodes' own user and a super
    user, alice and eve), so every node serves the registry over https with Basic."""
    import trustme

    from pylog.local_cluster import LocalCluster

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        str(tmp_path / "node.pem")
    )
    users = " ".join(f'user_{u}="{p}"' for u, p in (ADMIN, ALICE, EVE))
    config = {
        "listener.security.protocol.map": "PLAINTEXT:SASL_SSL,CONTROLLER:PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tmp_path / "node.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tmp_path / "ca.pem"),
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.plaintext.plain.sasl.jaas.config": (
            f'{PLAIN_MODULE} required username="{ADMIN[0]}" password="{ADMIN[1]}" {users};'
        ),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",  # ANONYMOUS: the controllers' PLAINTEXT listener
    }
    cluster = LocalCluster(2, data_dir=tmp_path / "cluster", config=config, startup_timeout_s=90)
    try:
        cluster.start()
        yield cluster, tmp_path / "ca.pem"
    finally:
        cluster.close()


@pytest.mark.timeout(240)
def test_forwarded_writes_are_authenticated_and_authorized(secured_cluster: tuple[Any, Path]) -> None:
    from confluent_kafka.admin import NewTopic

    cluster, ca = secured_cluster
    urls = [f"https://{n.host}:{n.registry_port}" for n in cluster.nodes.values()]
    assert cluster.schema_registry_url == urls[0]
    kafka = {"bootstrap.servers": cluster.bootstrap_servers,
             **client_config("confluent-kafka", "SASL_SSL", mechanism="PLAIN", user=ADMIN[0],
                             password=ADMIN[1], ca=ca)}
    admin = _admin(kafka)
    for f in admin.create_topics([NewTopic("sr-cluster", 1, 2)]).values():
        f.result(30)
    _allow(admin, "User:alice", "sr-", "WRITE", prefixed=True)
    _allow(admin, "User:alice", "sr-", "READ", prefixed=True)
    reg = SecuredRegistry(None, Pki(ca.parent, ca, ca.parent / "node.pem"), {}, urls[0])  # type: ignore[arg-type]
    ids = set()
    for i, url in enumerate(urls):  # one of the two forwards to the other, the writer
        subject = f"sr-cluster-{i}-value"
        schema = {**SCHEMA, "name": f"Order{i}"}
        assert call(reg, "POST", f"/subjects/{subject}/versions", {"schema": json.dumps(schema)},
                    url=url)[0] == 401
        status, body, _ = call(reg, "POST", f"/subjects/{subject}/versions", {"schema": json.dumps(schema)},
                               user=EVE, url=url)
        assert status == 403 and body["error_code"] == 40301
        status, body, _ = call(reg, "POST", f"/subjects/{subject}/versions", {"schema": json.dumps(schema)},
                               user=ALICE, url=url)
        assert status == 200, (url, body)
        ids.add(body["id"])
        assert call(reg, "DELETE", f"/subjects/{subject}", user=ALICE, url=url)[0] == 403
        assert call(reg, "DELETE", f"/subjects/{subject}", user=ADMIN, url=url)[0] == 200
    assert len(ids) == 2


# --- the widgets and LocalBroker ------------------------------------------------------------------


def test_widgets_decode_through_the_secured_registry(reg: SecuredRegistry) -> None:
    import pyarrow as pa
    from confluent_kafka.admin import NewTopic

    import pylog
    from widgets.browse import registry_texts

    topic = unique("sr-widget")
    admin = _admin(reg.kafka(ADMIN))
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(20)
    security = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": ALICE[0],
                "sasl.password": ALICE[1], "ssl.ca.location": str(reg.pki.ca)}
    bootstrap = reg.address("SASL_SSL")
    pylog.write_topic(pa.table({"id": pa.array([5], pa.int64()), "item": ["five"]}), topic,
                      bootstrap_servers=bootstrap, value_schema="registry", schema_registry_url=reg.url,
                      security=security)
    raw = pylog.read_topic(topic, bootstrap_servers=bootstrap, security=security)
    texts = registry_texts(raw, topic, bootstrap_servers=bootstrap, schema_registry_url=reg.url,
                           security=security)
    assert [json.loads(t) for t in texts["value"]] == [{"id": 5, "item": "five"}]


def test_local_broker_reports_the_https_registry(tmp_path: Path) -> None:
    import pylog

    pki = Pki.make(tmp_path / "pki")
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": _jaas(),
    }
    with pylog.LocalBroker(config=config) as broker:
        assert broker.schema_registry_url is not None and broker.schema_registry_url.startswith("https://")
        s = SecuredRegistry(None, pki, {}, broker.schema_registry_url)  # type: ignore[arg-type]
        assert call(s, "GET", "/subjects")[0] == 401
        status, body, _ = call(s, "GET", "/subjects", user=BOB)  # no authorizer: authenticated is enough
        assert (status, body) == (200, [])
