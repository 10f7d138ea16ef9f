"""Inter-node traffic over secured listeners: a three-node cluster whose controllers talk Raft over
mutual TLS and whose brokers replicate over SASL_SSL with SCRAM-SHA-512, with the standard
authorizer on. The nodes' own principals (their certificate, their SCRAM user) are super users;
nothing else may reach the controller APIs."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from compat_broker import pylog_command
from compat_clients import Rec, consume, produce, unique
from compat_security import STANDARD_AUTHORIZER, client_config

from pylog.local_cluster import LocalCluster, new_cluster_id

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.fixture
def secured_cluster(tmp_path: Path) -> Iterator[tuple[LocalCluster, Path]]:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    node_cert = ca.issue_cert("127.0.0.1", "localhost", common_name="pylog-node")
    node_cert.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "node.pem"))
    home, cluster_id = tmp_path / "cluster", new_cluster_id()
    for node in (1, 2, 3):  # like kafka-storage format on every node, with the same bootstrap users
        subprocess.run(
            [
                *pylog_command(),
                "storage",
                "format",
                "--data-dir",
                str(home / f"node-{node}"),
                "--cluster-id",
                cluster_id,
                "--config",
                f"node.id={node}",
                "--add-scram",
                "SCRAM-SHA-512=[name=node,password=node-secret]",
                "--add-scram",
                "SCRAM-SHA-256=[name=alice,password=alice-secret]",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
    config = {
        # LocalCluster names its listeners PLAINTEXT and CONTROLLER; the map says what they speak
        "listener.security.protocol.map": "PLAINTEXT:SASL_SSL,CONTROLLER:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tmp_path / "node.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tmp_path / "ca.pem"),
        "listener.name.controller.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.plaintext.scram-sha-512.sasl.jaas.config": (
            f'{SCRAM_MODULE} required username="node" password="node-secret";'
        ),
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:node;User:pylog-node",
        "default.replication.factor": "3",
        "min.insync.replicas": "2",
    }
    cluster = LocalCluster(3, data_dir=home, config=config, startup_timeout_s=90)
    assert cluster.cluster_id == cluster_id
    try:
        cluster.start()
        yield cluster, tmp_path / "ca.pem"
    finally:
        cluster.close()


@pytest.mark.timeout(240)
def test_replication_and_quorum_over_secured_listeners(secured_cluster: tuple[LocalCluster, Path]) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    cluster, ca = secured_cluster
    bootstrap = cluster.bootstrap_servers
    node = client_config(
        "confluent-kafka", "SASL_SSL", mechanism="SCRAM-SHA-512", user="node", password="node-secret", ca=ca
    )
    admin = AdminClient({"bootstrap.servers": bootstrap, **node})
    topic = unique("replicated")
    for f in admin.create_topics([NewTopic(topic, 2, 3)]).values():
        f.result(30)
    acls = [
        AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.ALL,
            AclPermissionType.ALLOW,
        ),
        AclBinding(
            ResourceType.GROUP,
            "*",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
    ]
    for f in admin.create_acls(acls).values():  # forwarded to the active controller as User:node
        f.result(30)
    alice = client_config(
        "confluent-kafka", "SASL_SSL", mechanism="SCRAM-SHA-256", user="alice", password="alice-secret", ca=ca
    )
    recs = [Rec(b"r%d" % i, partition=i % 2) for i in range(20)]
    produce("confluent-kafka", bootstrap, topic, recs, acks="all", config=alice)  # needs 2 in-sync replicas
    got = consume("confluent-kafka", bootstrap, topic, len(recs), partitions=(0, 1), config=alice)
    assert sorted(r.value for r in got) == sorted(r.value for r in recs)
    deadline = time.monotonic() + 30
    while True:  # followers fetch from the leaders over SASL_SSL: every replica joins the ISR
        md = admin.list_topics(topic, timeout=10).topics[topic]
        if all(len(p.isrs) == 3 for p in md.partitions.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert all(sorted(p.isrs) == [1, 2, 3] for p in md.partitions.values()), md.partitions
    # alice is no node: the controller's own APIs are closed to her, and so is the cluster
    with pytest.raises(Exception, match=r"(?i)authorization"):
        bad = AdminClient({"bootstrap.servers": bootstrap, **alice})
        for f in bad.create_topics([NewTopic(unique("not-hers"), 1, 3)]).values():
            f.result(30)
    logs = "".join(n.log_path.read_text(errors="replace") for n in cluster.nodes.values())
    assert "authentication failed" not in logs
    assert "refused this node's credentials" not in logs
