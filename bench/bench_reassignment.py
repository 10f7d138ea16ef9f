"""How fast a partition reassignment moves data between pylog brokers.

A 3-node cluster holds ``bulk``, N partitions with one replica each, all on node 1, filled with
``--mib`` MiB of incompressible records. A fourth broker joins (`LocalCluster.add_node`) and every
partition is reassigned onto it (AlterPartitionReassignments, as ``pylog topic reassign`` does):
the new replicas fetch the whole log from node 1, join the ISR, the reassignment completes and
node 1 deletes its copies. The row times submit -> no reassignment in flight (ListPartition-
Reassignments), and a second row runs ``pylog cluster rebalance --execute`` over an RF=3 topic
after a fifth broker joins. The baseline is the disk: copying the same partition directories with
``shutil.copytree`` on this machine (what a move could at best approach, with no network, no
fetch protocol and no re-encoding).

A second table puts the move rate with and without a replication throttle (KIP-73,
``--throttle`` as ``pylog cluster rebalance --throttle`` sets it) side by side: one partition of
``--throttle-move-mib`` moved unthrottled, then throttled, with Kafka's default quota windows.

    python bench/bench_reassignment.py              # 1 GiB
    python bench/bench_reassignment.py --mib 256
    python bench/bench_reassignment.py --only-throttle
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from pylog.admin.moves import cluster_plan, execute
from pylog.local_cluster import LocalCluster
from pylog.sdk.cluster_admin import ClusterAdminSync


def dir_bytes(paths: list[Path]) -> int:
    return sum(f.stat().st_size for p in paths for f in p.rglob("*") if f.is_file())


def produce(bootstrap: str, topic: str, partitions: int, total: int, record: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                  "message.max.bytes": record + 4096, "queue.buffering.max.kbytes": 262144})
    payload = os.urandom(record)
    for i in range(total // record):
        while True:
            try:
                p.produce(topic, payload, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    if p.flush(300):
        raise RuntimeError("records left unacknowledged")


def throttle_rows(move_mib: int, throttle: int, record: int) -> list[tuple[str, float, float]]:
    """(how, MiB, seconds) of one partition moved without, then with, the throttle."""
    rows = []
    config = {"log.flush.interval.messages": "100000"}
    with (
        tempfile.TemporaryDirectory(prefix="pylog-bench-throttle-") as home,
        LocalCluster(3, data_dir=home, config=config) as cluster,
    ):
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        one = NewTopic("one", num_partitions=1, replica_assignment=[[1]])
        admin.create_topics([one])["one"].result(30)
        produce(cluster.bootstrap_servers, "one", 1, move_mib * 1024 * 1024, record)
        for target, rate in ((2, None), (3, throttle)):
            with ClusterAdminSync(cluster.bootstrap_servers) as ca:
                took = execute(ca, {("one", 0): (target,)}, throttle=rate, out=io.StringIO())
            size = dir_bytes([cluster.node(target).data_dir / "one-0"])
            how = "unthrottled" if rate is None else f"throttled to {rate / 1024 / 1024:g} MiB/s"
            rows.append((how, size / 1024 / 1024, took))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=1024, help="data to move (default 1024 MiB)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--record-kib", type=int, default=256)
    ap.add_argument("--throttle", type=int, default=2 * 1024 * 1024, help="bytes/s (default 2 MiB/s)")
    ap.add_argument("--throttle-move-mib", type=int, default=64)
    ap.add_argument("--only-throttle", action="store_true", help="only the throttle table")
    args = ap.parse_args()
    throttled = throttle_rows(args.throttle_move_mib, args.throttle, args.record_kib * 1024)
    print(f"\nmove rate with and without a replication throttle of {args.throttle / 1024 / 1024:g} MiB/s")
    print(f"{'move of one partition':<26} {'MiB':>8} {'seconds':>9} {'MiB/s':>8}")
    for how, m, secs in throttled:
        print(f"{how:<26} {m:>8,.1f} {secs:>9.1f} {m / secs:>8.2f}")
    if args.only_throttle:
        return
    total = args.mib * 1024 * 1024
    with tempfile.TemporaryDirectory(prefix="pylog-bench-move-") as home:
        cluster = LocalCluster(3, data_dir=home, config={"log.flush.interval.messages": "100000"})
        cluster.start()
        try:
            from confluent_kafka.admin import AdminClient, NewTopic

            admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
            topic = NewTopic("bulk", num_partitions=args.partitions,
                             replica_assignment=[[1]] * args.partitions)
            admin.create_topics([topic])["bulk"].result(30)
            t0 = time.monotonic()
            produce(cluster.bootstrap_servers, "bulk", args.partitions, total, args.record_kib * 1024)
            produce_s = time.monotonic() - t0
            source = [cluster.node(1).data_dir / f"bulk-{p}" for p in range(args.partitions)]
            size = dir_bytes(source)
            t0 = time.monotonic()
            scratch = Path(home) / "copy"
            for p in source:
                shutil.copytree(p, scratch / p.name)
            copy_s = time.monotonic() - t0
            shutil.rmtree(scratch)
            new = cluster.add_node()
            targets = {("bulk", p): (new,) for p in range(args.partitions)}
            with ClusterAdminSync(cluster.bootstrap_servers) as ca, redirect_stdout(io.StringIO()):
                move_s = execute(ca, targets)
            moved = dir_bytes([cluster.node(new).data_dir / f"bulk-{p}" for p in range(args.partitions)])
            assert moved >= size * 0.95, (moved, size)
            assert not any(p.exists() for p in source), "node 1 kept a copy"

            # a rebalance of an RF=3 topic onto a fifth broker, through the planner
            spread = NewTopic("spread", num_partitions=12, replication_factor=3)
            admin.create_topics([spread])["spread"].result(30)
            produce(cluster.bootstrap_servers, "spread", 12, total // 4, args.record_kib * 1024)
            fifth = cluster.add_node()
            with ClusterAdminSync(cluster.bootstrap_servers) as ca:
                state = ca.state()
                plan = cluster_plan(state, topics={"spread"})
                per_copy = {tp: dir_bytes([cluster.node(plan.current[tp][0]).data_dir / f"{tp[0]}-{tp[1]}"])
                            for tp in plan.moves}  # one replica's size: what each new replica fetches
                rebalance_bytes = sum(per_copy[tp] * len(set(t) - set(plan.current[tp]))
                                      for tp, t in plan.moves.items())
                with redirect_stdout(io.StringIO()):
                    rebalance_s = execute(ca, plan.moves)
                after = ca.state()
        finally:
            cluster.close()
    mib = 1024 * 1024
    rows = [
        ("reassign to a new broker", f"{args.partitions} x RF=1", size / mib, move_s),
        (f"rebalance onto broker {fifth}", f"{len(plan.moves)} moves of 12 x RF=3", rebalance_bytes / mib,
         rebalance_s),
        ("disk copy (shutil.copytree)", "baseline", size / mib, copy_s),
    ]
    print(f"\nproduced {size / mib:,.0f} MiB in {produce_s:.1f}s; broker {fifth} now holds "
          f"{after.brokers[fifth].replicas} replicas, leads {after.brokers[fifth].leaders}")
    print(f"{'what':<32} {'partitions':<22} {'MiB':>8} {'seconds':>9} {'MiB/s':>8}")
    for what, parts, m, s in rows:
        print(f"{what:<32} {parts:<22} {m:>8,.0f} {s:>9.1f} {m / s:>8.1f}")


if __name__ == "__main__":
    main()
