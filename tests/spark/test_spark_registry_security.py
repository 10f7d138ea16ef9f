"""format("pylog") with valueFormat=registry against a secured broker: the source and the sink reach
its registry (https, HTTP Basic) with the credentials of their ``kafka.`` security options."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pyarrow as pa
import pytest
from sdk_helpers import Broker, create_topic

import pylog
from pylog.local import free_port

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, str, dict[str, str]]]:
    """PLAINTEXT (ANONYMOUS, the super user, the registry's own connection) and SASL_SSL with SCRAM
    user alice, who may do anything on topics starting with 'sec-'; the registry follows SASL_SSL."""
    import trustme

    root = tmp_path_factory.mktemp("spark-registry-secured")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    server = ca.issue_cert("127.0.0.1", "localhost")
    server.private_key_and_cert_chain_pem.write_to_path(str(root / "server.pem"))
    subprocess.run([sys.executable, "-m", "pylog", "storage", "format", "--data-dir", str(root / "data"),
                    "--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]"], check=True,
                   capture_output=True, timeout=60)
    port = free_port()
    broker = Broker(root / "data", root / "broker.log", {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(root / "server.pem"),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
        "schema.registry.listeners": f"http://127.0.0.1:{port}",
    })
    try:
        from confluent_kafka.admin import (
            AclBinding,
            AclOperation,
            AclPermissionType,
            AdminClient,
            ResourcePatternType,
            ResourceType,
        )

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        acl = AclBinding(ResourceType.TOPIC, "sec-", ResourcePatternType.PREFIXED, "User:alice", "*",
                         AclOperation.ALL, AclPermissionType.ALLOW)
        for f in admin.create_acls([acl]).values():
            f.result(20)
        yield broker, f"https://127.0.0.1:{port}", {  # https: the registry follows the SASL_SSL listener
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
            "sasl.password": "alice-secret", "ssl.ca.location": str(root / "ca.pem"),
        }
    finally:
        broker.stop()


def test_registry_formats_with_kafka_security_options(spark, secured) -> None:  # type: ignore[no-untyped-def]
    broker, url, security = secured
    bootstrap = broker.listeners["SASL_SSL"]
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "page": ["/a", "/b", "/c"]})
    create_topic(broker.bootstrap, "sec-visits", 1)
    create_topic(broker.bootstrap, "sec-visits-out", 1)
    pylog.write_topic(rows, "sec-visits", bootstrap_servers=bootstrap, value_schema="registry",
                      schema_registry_url=url, security=security)
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.jaas.config": f'{SCRAM} required username="alice" password="alice-secret";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": security["ssl.ca.location"],
        "valueFormat": "registry",
        "schema.registry.url": url,
    }
    df = spark.read.format("pylog").options(**options).option("subscribe", "sec-visits").load()
    got = [(r.value.id, r.value.page) for r in df.orderBy("offset").collect()]
    assert got == [(1, "/a"), (2, "/b"), (3, "/c")]
    (
        df.selectExpr("named_struct('id', value.id * 10, 'page', upper(value.page)) AS value")
        .write.format("pylog")
        .options(**options)
        .option("topic", "sec-visits-out")
        .mode("append")
        .save()
    )
    out = pylog.read_topic("sec-visits-out", bootstrap_servers=bootstrap, decode="registry",
                           schema_registry_url=url, security=security)
    assert sorted((v["id"], v["page"]) for v in out.column("value").to_pylist()) == [
        (10, "/A"), (20, "/B"), (30, "/C")
    ]
    without = {k: v for k, v in options.items() if not k.startswith("kafka.sasl")}
    without["kafka.security.protocol"] = "SSL"
    with pytest.raises(Exception, match="Unauthorized"):  # TLS alone: no registry credentials
        spark.read.format("pylog").options(**without).option("subscribe", "sec-visits").load().count()
