"""What security costs: confluent-kafka throughput and connection set-up over PLAINTEXT, SSL and
SASL_SSL (SCRAM-SHA-256), with and without the standard authorizer, side by side in one run.

The baseline is a pylog broker without an authorizer, read over PLAINTEXT; the other rows are one
broker serving PLAINTEXT, SSL and SASL_SSL listeners with the standard authorizer on (the user of
the SASL_SSL rows is checked against prefixed ACLs; PLAINTEXT's ANONYMOUS is a super user). Each
row: produce and consume rate of N records (confluent-kafka, linger.ms=5, acks=1), the broker's CPU
seconds per million records, and new connections per second (a fresh client's bootstrap: TCP, TLS,
SASL, ApiVersions, Metadata).

    python bench/bench_security.py                  # 500,000 records of 100 B per row
    python bench/bench_security.py --records 100000
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from common import BenchBroker, create_topic, free_port, pylog_command

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def make_pki(tmp: Path) -> tuple[Path, Path]:
    import trustme

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        str(tmp / "server.pem")
    )
    return tmp / "ca.pem", tmp / "server.pem"


def secured_broker(tmp: Path, server: Path) -> tuple[BenchBroker, int, int]:
    ssl_port, sasl_port = free_port(), free_port()
    b = BenchBroker(
        "pylog",
        config={
            "listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl_port},SASL_SSL://127.0.0.1:{sasl_port}",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(server),
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "authorizer.class.name": AUTHORIZER,
            "super.users": "User:ANONYMOUS",
        },
    )
    subprocess.run(
        [
            *pylog_command(),
            "storage",
            "format",
            "--data-dir",
            str(b.tmp / "data"),
            "--add-scram",
            "SCRAM-SHA-256=[name=alice,password=alice-secret]",
        ],
        check=True,
        capture_output=True,
    )
    b.start()
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    acls = [
        AclBinding(
            ResourceType.TOPIC,
            "bench-",
            ResourcePatternType.PREFIXED,
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
            AclOperation.ALL,
            AclPermissionType.ALLOW,
        ),
    ]
    for f in admin.create_acls(acls).values():
        f.result(30)
    return b, ssl_port, sasl_port


def produce(conf: dict[str, Any], topic: str, n: int, value: bytes) -> float:
    from confluent_kafka import Producer

    p = Producer(
        {
            **conf,
            "linger.ms": 5,
            "acks": "1",
            "enable.idempotence": False,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    return time.perf_counter() - t0


def consume(conf: dict[str, Any], topic: str, n: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(
        {
            **conf,
            "group.id": f"bench-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 5,
        }
    )
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got, t0 = 0, time.perf_counter()
    deadline = t0 + 300
    while got < n and time.perf_counter() < deadline:
        for m in c.consume(10000, 1.0):
            if not m.error():
                got += 1
    elapsed = time.perf_counter() - t0
    c.close()
    assert got >= n, f"read {got} of {n}"
    return elapsed


def connections_per_s(conf: dict[str, Any], seconds: float = 3.0) -> float:
    from confluent_kafka.admin import AdminClient

    count, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        AdminClient(conf).list_topics(timeout=10)
        count += 1
    return count / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--size", type=int, default=100)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-security-"))
    ca, server = make_pki(tmp)
    plain = BenchBroker("pylog").start()
    secured, ssl_port, sasl_port = secured_broker(tmp, server)
    tls = {"ssl.ca.location": str(ca)}
    scram = {"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": "alice-secret"}
    rows = [
        ("PLAINTEXT, no authorizer (baseline)", plain, {"bootstrap.servers": plain.bootstrap}),
        ("PLAINTEXT, authorizer (super user)", secured, {"bootstrap.servers": secured.bootstrap}),
        (
            "SSL, authorizer",
            secured,
            {"bootstrap.servers": f"127.0.0.1:{ssl_port}", "security.protocol": "SSL", **tls},
        ),
        (
            "SASL_SSL SCRAM-SHA-256, ACLs",
            secured,
            {"bootstrap.servers": f"127.0.0.1:{sasl_port}", "security.protocol": "SASL_SSL", **tls, **scram},
        ),
    ]
    value = b"x" * args.size
    results = []
    try:
        for label, broker, conf in rows:
            topic = f"bench-{uuid.uuid4().hex[:8]}"
            create_topic(broker.bootstrap, topic, 1)
            cpu0 = broker.stats().cpu_s
            tp = produce(conf, topic, args.records, value)
            cpu1 = broker.stats().cpu_s
            tc = consume(conf, topic, args.records)
            cpu2 = broker.stats().cpu_s
            cps = connections_per_s(conf)
            m = args.records / 1e6
            results.append(
                (label, args.records / tp, args.records / tc, (cpu1 - cpu0) / m, (cpu2 - cpu1) / m, cps)
            )
    finally:
        plain.stop()
        secured.stop()
    base = results[0]
    import confluent_kafka

    print(
        f"\n{args.records:,} records of {args.size} B, confluent-kafka {confluent_kafka.__version__} "
        f"(librdkafka {confluent_kafka.libversion()[0]}), python {sys.version.split()[0]}\n"
    )
    head = (
        "listener",
        "produce rec/s",
        "consume rec/s",
        "CPU s/M prod",
        "CPU s/M cons",
        "new conn/s",
        "vs baseline",
    )
    print(f"{head[0]:<38}{head[1]:>15}{head[2]:>15}{head[3]:>14}{head[4]:>14}{head[5]:>12}  {head[6]}")
    for label, p, c, cp, cc, cps in results:
        ratio = f"produce x{p / base[1]:.2f}, consume x{c / base[2]:.2f}, conn x{cps / base[5]:.2f}"
        print(f"{label:<38}{p:>15,.0f}{c:>15,.0f}{cp:>14.2f}{cc:>14.2f}{cps:>12.1f}  {ratio}")


if __name__ == "__main__":
    main()
