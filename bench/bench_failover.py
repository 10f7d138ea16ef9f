"""Failover times of a 3-node pylog cluster, from repeated kill -9.

Controller rows: kill -9 the active controller, then time until DescribeCluster through a
survivor names a new one, and until a CreateTopics through a survivor succeeds. Partition rows:
kill -9 the leader of an RF=3 partition, then time until Metadata names a new leader and until
an acks=all produce to it is acknowledged (the old leader must first be fenced: its session,
``broker.session.timeout.ms``, has to expire). The killed node is restarted and the cluster
caught up before the next kill.

    python bench/bench_failover.py                         # 10 kills each, Kafka's default timeouts
    python bench/bench_failover.py --session-timeout-ms 3000 --kills 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from pylog.cluster_info import describe_cluster, describe_quorum
from pylog.local_cluster import LocalCluster


def until(check, timeout_s: float = 60.0) -> float:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        try:
            if check():
                return time.monotonic() - t0
        except Exception:  # a dead node refuses; keep asking
            pass
        time.sleep(0.02)
    raise TimeoutError("no failover within the timeout")


def survivors(cluster: LocalCluster) -> str:
    return ",".join(n.bootstrap for n in cluster.nodes.values() if n.running)


def caught_up(cluster: LocalCluster) -> None:
    until(lambda: all(v.lag == 0 for v in describe_quorum(survivors(cluster), timeout_s=2).voters), 60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--session-timeout-ms", type=int, default=9000)
    ap.add_argument("--election-timeout-ms", type=int, default=1000)
    args = ap.parse_args()
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    config = {
        "broker.session.timeout.ms": str(args.session_timeout_ms),
        "broker.heartbeat.interval.ms": str(min(2000, args.session_timeout_ms // 4)),
        "controller.quorum.election.timeout.ms": str(args.election_timeout_ms),
    }
    elected, created, led, acked = [], [], [], []
    with (
        tempfile.TemporaryDirectory(prefix="pylog-bench-failover-") as home,
        LocalCluster(3, data_dir=home, config=config, log_level="WARNING") as cluster,
    ):
        for _ in range(args.kills):
            dead = cluster.controller_id()
            t0 = time.monotonic()
            cluster.kill(dead)
            alive = survivors(cluster)
            # the controllers' own listener names the active one (brokers name any live broker)
            first = next(n for n in cluster.nodes.values() if n.running).controller_bootstrap
            elected.append(
                until(
                    lambda d=dead, f=first: describe_cluster(f, timeout_s=1, controllers=True).controller_id
                    not in (-1, d)
                )
            )
            admin = AdminClient({"bootstrap.servers": alive})
            name = f"after-{uuid.uuid4().hex[:6]}"
            admin.create_topics([NewTopic(name, 1, 1)], request_timeout=30)[name].result(30)
            created.append(time.monotonic() - t0)
            cluster.start_node(dead)
            caught_up(cluster)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("failover", 1, 3)])["failover"].result(30)
        for _ in range(args.kills):
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
            leader = admin.list_topics("failover", timeout=5).topics["failover"].partitions[0].leader
            t0 = time.monotonic()
            cluster.kill(leader)
            admin = AdminClient({"bootstrap.servers": survivors(cluster)})

            def new_leader(old: int = leader, admin: AdminClient = admin) -> bool:
                now = admin.list_topics("failover", timeout=2).topics["failover"].partitions[0].leader
                return now not in (-1, old)

            led.append(until(new_leader))
            p = Producer({"bootstrap.servers": survivors(cluster), "acks": "all"})
            p.produce("failover", b"x", partition=0)
            p.flush(60)
            acked.append(time.monotonic() - t0)
            cluster.start_node(leader)
            caught_up(cluster)
            until(
                lambda a=admin: (
                    len(a.list_topics("failover", timeout=5).topics["failover"].partitions[0].isrs) == 3
                )
            )

    def row(name: str, xs: list[float]) -> str:
        s = sorted(xs)
        return (
            f"| {name:<44} | {s[0]:>6.2f} | {statistics.median(s):>6.2f} | {s[-1]:>6.2f} | "
            f"{' '.join(f'{x:.2f}' for x in xs)} |"
        )

    print(
        f"\n3 nodes, {args.kills} kill -9 each; election timeout {args.election_timeout_ms} ms, "
        f"broker session timeout {args.session_timeout_ms} ms; seconds\n"
    )
    print(f"| {'measure':<44} | {'min':>6} | {'median':>6} | {'max':>6} | every run |")
    print(f"|{'-' * 46}|{'-' * 8}|{'-' * 8}|{'-' * 8}|-----------|")
    print(row("controller killed: new controller named", elected))
    print(row("controller killed: CreateTopics through a survivor", created))
    print(row("partition leader killed: new leader named", led))
    print(row("partition leader killed: acks=all produce acked", acked))


if __name__ == "__main__":
    main()
