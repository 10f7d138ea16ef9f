"""Replication cost on a 3-node pylog cluster: RF=3 acks=all against RF=1 in the same run.

A confluent-kafka producer writes N 1 KB records to a fresh topic (one partition, led by the same
node each time); each row reports records/s, MB/s and the CPU seconds the three broker
processes spent per million records together. The ratio column is the row against RF=1 acks=all.
An uncounted RF=3 run of the same size goes first: a fresh cluster's first writes run cold (up to
twice the CPU). The CPU of a row includes the followers catching up after its last acknowledgement
(acks=1 answers before they have it). Each row's topic is deleted after it, so the next row's
writes land in page-cache pages the machine has used before: on a VM whose memory is mapped on
first touch, writing into never-used pages costs several times more kernel time per byte (about
2.5 s per GB here against 0.25 s once used), which would charge the later rows for memory the
earlier ones took.

The "1 MB batches" rows repeat RF=1 and RF=3 acks=all with a producer that fills 1 MB batches
(``batch.size`` 1 MB, ``linger.ms`` 100, no idempotence): the leader then appends at its fastest
and what RF=3 reaches shows whether the followers keep up (their ratio is against RF=1 with the
same batches).

The latency rows send 100-byte records at a fixed rate with acks=all to an RF=3 topic and measure
end-to-end time (send call to consumer delivery) as p50 / p99 / p99.9, twice: with the
producer's default ``linger.ms`` (5 ms, librdkafka's and the Java client's since Kafka 4), and
with ``linger.ms=0``, where every record due is sent at once and the brokers answer several times
as many requests for the same records. A 3-second run at the same rate goes first and is not
counted: it brings up what a cluster's first consumer needs (``__consumer_offsets``), as a
benchmark's warm-up does.

    python bench/bench_replication.py                  # 500k records per row, 10 s latency row
    python bench/bench_replication.py --records 100000 --repeat 3
    python bench/bench_replication.py --segment-format 1,2 --seconds 0   # formats side by side

Each row also shows the leader's CPU and the busiest follower's, per million records, split into
user CPU (the broker's own work) and system CPU (the kernel's: socket and page-cache copies), and
the follower's against the RF=1 leader's, in total and in user CPU alone (what a replica costs
beside the leader it copies). Compare user CPU: on a VM that hands freed memory back to its host,
writing into page-cache pages not used lately costs the kernel about 4.5 s per GB against 0.2 s
for warm ones, and which broker gets warm pages varies from run to run, so system CPU (and the
total) swings by half while user CPU holds within a tenth. Each broker also spends some user
CPU idle (Raft, heartbeats, timers: about 0.01 s per second); "net usr" takes that rate, measured
for a few seconds before the rows, off each row's user CPU, so a slow row is not charged for
the time it took.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_clients import Scenario, latency, produce, quantile
from common import proc_stats
from pylog.storage.config import DEFAULT_SEGMENT_FORMAT

from pylog.local_cluster import LocalCluster

LINGERS_MS = (5, 0)  # the producer's default, then every record sent as soon as it is due
BIG_BATCHES = {"batch.size": 1_000_000, "linger.ms": 100, "enable.idempotence": False}
WARM_UP_S = 3.0
IDLE_S = 3.0


def create(bootstrap: str, topic: str, rf: int, leader: int, nodes: list[int], min_isr: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    replicas = [leader, *[n for n in nodes if n != leader]][:rf]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(
        topic, num_partitions=1, replica_assignment=[replicas], config={"min.insync.replicas": str(min_isr)}
    )
    admin.create_topics([new])[topic].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        part = admin.list_topics(topic=topic, timeout=10).topics[topic].partitions.get(0)
        if part is not None and part.leader == leader and len(part.isrs) == rf:
            return
        time.sleep(0.1)
    raise RuntimeError(f"{topic} did not get its leader and ISR")


def settle(bootstrap: str, topic: str, records: int) -> None:
    """Wait until the high watermark reaches ``records``: every in-sync replica holds them all
    (after acks=1 the followers are still catching up, and that CPU belongs to the row)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"settle-{topic}"})
    try:
        deadline = time.monotonic() + 60
        while c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1] < records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: the replicas did not catch up")
            time.sleep(0.05)
    finally:
        c.close()


def delete(bootstrap: str, topic: str) -> None:
    """Drop a finished row's topic, so the next row's writes reuse its page-cache pages."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    time.sleep(0.5)


def cpu(cluster: LocalCluster) -> dict[int, tuple[float, float]]:
    """User and system CPU seconds so far of each node's process."""
    out = {}
    for i, n in cluster.nodes.items():
        if n.pid is not None:
            st = proc_stats(n.pid)
            out[i] = (st.user_s, st.sys_s)
    return out


@dataclass
class Sample:
    """One throughput run: records/s and CPU seconds per million records."""

    rate: float
    cluster: float  # user + system, all three brokers
    leader_user: float
    leader_sys: float
    follower_user: float  # the follower that used the most CPU (user + system)
    follower_sys: float
    leader_user_net: float  # user CPU less what the broker spends idle over as long
    follower_user_net: float


Rows = dict[str, list[Sample]]


def idle_user(cluster: LocalCluster, seconds: float = IDLE_S) -> dict[int, float]:
    """Each node's user CPU seconds per second while nothing is produced (Raft, heartbeats,
    timers): a slow row spends more of it per record, which is not the replication's cost."""
    before = cpu(cluster)
    time.sleep(seconds)
    after = cpu(cluster)
    return {i: (after[i][0] - before[i][0]) / seconds for i in after if i in before}
Latency = dict[str, dict[str, list[float]]]


def run(
    records: int, repeat: int = 1, only: str = "", rate: int = 10_000, seconds: float = 10.0,
    config: dict[str, str] | None = None,
) -> tuple[Rows, Latency]:
    """Start a 3-node cluster, run the throughput rows whose label contains ``only`` (all with
    "") ``repeat`` times and, unless ``seconds`` is 0, the latency rows; returns per row label its
    (records/s, cluster CPU s / M records) samples, and per linger the latency samples."""
    rows: Rows = {}
    lat: Latency = {f"linger.ms={linger}": {} for linger in LINGERS_MS}
    with (
        tempfile.TemporaryDirectory(prefix="pylog-bench-repl-") as home,
        LocalCluster(3, data_dir=home, log_level="WARNING", config=config) as cluster,
    ):
        bs = cluster.bootstrap_servers
        nodes = sorted(cluster.nodes)
        leader = nodes[0]
        cases: list[tuple[str, int, str, int, dict[str, Any] | None]] = [
            ("RF=1, acks=all", 1, "all", 1, None),
            ("RF=3, acks=all", 3, "all", 2, None),
            ("RF=3, acks=1", 3, "1", 2, None),
            ("RF=1, acks=all, 1 MB batches", 1, "all", 1, BIG_BATCHES),
            ("RF=3, acks=all, 1 MB batches", 3, "all", 2, BIG_BATCHES),
        ]
        if only:
            cases = [c for c in cases if only in c[0]]
        warm_up = f"warm-{uuid.uuid4().hex[:8]}"  # a fresh cluster's first writes run cold: not counted
        create(bs, warm_up, 3, leader, nodes, 2)
        produce(bs, warm_up, Scenario(1000, acks="all"), records)
        settle(bs, warm_up, records)
        delete(bs, warm_up)
        idle = idle_user(cluster)
        for _ in range(repeat):
            for label, rf, acks, min_isr, config in cases:
                topic = f"repl-{uuid.uuid4().hex[:8]}"
                create(bs, topic, rf, leader, nodes, min_isr)
                before, start = cpu(cluster), time.monotonic()
                elapsed = produce(bs, topic, Scenario(1000, acks=acks), records, config)
                settle(bs, topic, records)
                after, took = cpu(cluster), time.monotonic() - start
                used = {i: (u - before.get(i, (0.0, 0.0))[0], k - before.get(i, (0.0, 0.0))[1])
                        for i, (u, k) in after.items()}
                per_m = 1e6 / records
                follower = max((i for i in used if i != leader), key=lambda i: sum(used[i]), default=None)
                fu, fs = used[follower] if follower is not None else (0.0, 0.0)
                lu, ls = used.get(leader, (0.0, 0.0))
                total = sum(u + k for u, k in used.values())
                rows.setdefault(label, []).append(Sample(
                    records / elapsed, total * per_m, lu * per_m, ls * per_m, fu * per_m, fs * per_m,
                    (lu - idle.get(leader, 0.0) * took) * per_m,
                    (fu - idle.get(follower, 0.0) * took) * per_m if follower is not None else 0.0,
                ))
                delete(bs, topic)
            if seconds <= 0:
                continue
            warm_up = f"lat-{uuid.uuid4().hex[:8]}"
            create(bs, warm_up, 3, leader, nodes, 2)
            latency(bs, warm_up, rate, WARM_UP_S, 100, acks="all")
            for linger in LINGERS_MS:
                topic = f"lat-{uuid.uuid4().hex[:8]}"
                create(bs, topic, 3, leader, nodes, 2)
                samples, sent = latency(bs, topic, rate, seconds, 100, acks="all", linger_ms=linger)
                samples.sort()
                out = lat[f"linger.ms={linger}"]
                for name, q in (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999)):
                    out.setdefault(name, []).append(quantile(samples, q))
                out.setdefault("sent/s", []).append(sent)
    return rows, lat


def ratio(a: float, b: float) -> float:
    """a / b, NaN where b is not positive (too few records for a clock tick of CPU)."""
    return a / b if b > 0 else float("nan")


def med_net(values: list[Sample]) -> float:
    return statistics.median(r.follower_user_net for r in values)


def baseline(rows: Rows, label: str) -> float:
    """The median records/s of the RF=1 row ``label`` is compared with (same batches)."""
    ref = "RF=1, acks=all, 1 MB batches" if label.endswith("1 MB batches") else "RF=1, acks=all"
    return statistics.median(r.rate for r in rows[ref]) if ref in rows else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=1, help="run every row this many times, show medians")
    ap.add_argument("--rate", type=int, default=10_000, help="latency row: records per second")
    ap.add_argument("--seconds", type=float, default=10.0, help="latency row: how long (0: skip it)")
    ap.add_argument("--only", default="", help="run only the throughput rows whose label contains this")
    ap.add_argument("--segment-format", default=str(DEFAULT_SEGMENT_FORMAT),
                    help="pylog.segment.format of the cluster; several (1,2) run one cluster "
                    "each, one after the other, printed side by side")
    args = ap.parse_args()
    formats = [f.strip() for f in args.segment_format.split(",") if f.strip()]
    lat: Latency = {}
    print(f"\n3-node pylog cluster, 1 KB records, {args.records:,} per row, median of {args.repeat}\n")
    head = ("format", "row", "records/s", "MB/s", "cluster CPU s/M", "leader usr s/M", "leader sys s/M",
            "follower usr s/M", "follower sys s/M", "follower / RF=1 leader", "usr: follower / leader",
            "net usr: follower / leader", "vs RF=1")
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("-" * (len(h) + 2) for h in head) + "|")
    for fmt in formats:
        rows, lat = run(args.records, args.repeat, args.only, args.rate, args.seconds,
                        {"pylog.segment.format": fmt})
        solo = rows.get("RF=1, acks=all")
        solo_user = statistics.median(r.leader_user for r in solo) if solo else float("nan")
        solo_total = statistics.median(r.leader_user + r.leader_sys for r in solo) if solo else float("nan")
        solo_net = statistics.median(r.leader_user_net for r in solo) if solo else float("nan")
        for label, values in rows.items():
            def med(key: Callable[[Sample], float], values: list[Sample] = values) -> float:
                return statistics.median(key(r) for r in values)

            rate = med(lambda r: r.rate)
            fu, fs = med(lambda r: r.follower_user), med(lambda r: r.follower_sys)
            cells = (
                fmt, label, f"{rate:,.0f}", f"{rate / 1000:.1f}", f"{med(lambda r: r.cluster):.2f}",
                f"{med(lambda r: r.leader_user):.2f}", f"{med(lambda r: r.leader_sys):.2f}",
                f"{fu:.2f}", f"{fs:.2f}", f"{ratio(fu + fs, solo_total):.2f}", f"{ratio(fu, solo_user):.2f}",
                f"{ratio(med(lambda r: r.follower_user_net), solo_net):.2f}",
                f"{ratio(rate, baseline(rows, label)):.2f}",
            )
            print("| " + " | ".join(c.rjust(len(h)) if i != 1 else c.ljust(29)
                                    for i, (c, h) in enumerate(zip(cells, head, strict=True))) + " |",
                  flush=True)
        if args.repeat > 1:
            for label, values in rows.items():
                print(f"  {fmt} {label}: follower usr s/M min {min(r.follower_user for r in values):.2f}, "
                      f"leader usr s/M min {min(r.leader_user for r in values):.2f}, "
                      f"net follower usr s/M {med_net(values):.2f}, "
                      f"records/s max {max(r.rate for r in values):,.0f}")
    if args.seconds <= 0:
        return
    print(
        f"\nend-to-end latency (ms), RF=3 acks=all, 100 B records at {args.rate:,}/s for {args.seconds:g} s\n"
    )
    names = list(lat)
    print("| metric  | " + " | ".join(f"{n:>13}" for n in names) + " |")
    print("|---------|" + "|".join("-" * 15 for _ in names) + "|")
    for metric in ("p50", "p99", "p99.9", "sent/s"):
        cells = []
        for n in names:
            v = statistics.median(lat[n][metric])
            cells.append(f"{v:>13,.0f}" if metric == "sent/s" else f"{v:>13,.2f}")
        print(f"| {metric:<7} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
