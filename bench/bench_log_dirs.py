"""What moving a partition between two log directories of one broker costs (AlterReplicaLogDirs).

A pylog broker with ``log.dirs`` naming two directories holds ``moving``, one partition filled with
``--mib`` MiB of incompressible 1 KB records in ``--segment-mib`` MiB segments. A confluent-kafka
producer (acks=all, linger.ms=0) sends 1 KB records at ``--rate`` per second throughout, each
acknowledgement timed. Rows: the producer alone (the baseline), then the same while kafka-python's
``alter_replica_log_dirs`` moves the partition to the other directory, timed from the request until
DescribeLogDirs lists the partition there. The disk row copies the moved directory with
``shutil.copytree`` (what a move could at best approach). The acknowledgement latency during the
move shows the pause of the last, paused copy pass.

    python bench/bench_log_dirs.py                   # 256 MiB
    python bench/bench_log_dirs.py --mib 1024 --rate 2000
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from common import BenchBroker

TOPIC = "moving"
RECORD = 1024


def _preload(bootstrap: str, mib: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "1",
                  "queue.buffering.max.kbytes": 262144})
    payload = os.urandom(RECORD)
    for i in range(mib * 1024):
        while True:
            try:
                p.produce(TOPIC, payload[:-8] + i.to_bytes(8, "big"), partition=0)
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(120)


class Paced:
    """A producer sending at a fixed rate; acknowledgement latencies by send time."""

    def __init__(self, bootstrap: str, rate: int) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
        self.rate = rate
        self.samples: list[tuple[float, float]] = []  # (sent at, latency s)
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Paced:
        self._thread.start()
        return self

    def _run(self) -> None:
        payload = os.urandom(RECORD)
        t0 = time.monotonic()
        n = 0
        while not self._stop.is_set():
            due = t0 + n / self.rate
            now = time.monotonic()
            if due > now:
                self.producer.poll(min(due - now, 0.01))
                continue
            sent = time.monotonic()

            def done(err: object, _msg: object, sent: float = sent) -> None:
                if err is not None:
                    self.failed += 1
                else:
                    self.samples.append((sent, time.monotonic() - sent))

            self.producer.produce(TOPIC, payload, partition=0, on_delivery=done)
            self.producer.poll(0)
            n += 1
        self.producer.flush(60)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)

    def between(self, a: float, b: float) -> list[float]:
        return sorted(lat for sent, lat in self.samples if a <= sent < b)


def _where(admin: object) -> tuple[str, bool]:
    """(the log dir holding the current replica, whether a future replica exists)."""
    current, future = "", False
    for broker in admin.describe_log_dirs({TOPIC: [0]}):  # type: ignore[attr-defined]
        for r in broker["log_dirs"]:
            for t in r["topics"]:
                for p in t["partitions"]:
                    if p["is_future_key"]:
                        future = True
                    else:
                        current = r["log_dir"]
    return current, future


def _pct(xs: list[float], q: float) -> float:
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000 if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--segment-mib", type=int, default=64)
    ap.add_argument("--rate", type=int, default=1000, help="records/s of 1 KB during the rows")
    ap.add_argument("--baseline-s", type=float, default=5.0)
    ap.add_argument("--verbose", action="store_true", help="list the slow acknowledgements")
    ap.add_argument("--settle-s", type=float, default=10.0, help="wait after the preload")
    args = ap.parse_args()

    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    b = BenchBroker("pylog")
    dirs = [b.tmp / "data", b.tmp / "data2"]
    b.config["log.dirs"] = ",".join(map(str, dirs))
    b.start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        segment = {"segment.bytes": str(args.segment_mib << 20)}
        admin.create_topics([NewTopic(TOPIC, 1, 1, topic_configs=segment)])
        t = time.monotonic()
        _preload(b.bootstrap, args.mib)
        print(f"preloaded {args.mib} MiB in {time.monotonic() - t:.1f}s", flush=True)
        time.sleep(args.settle_s)  # the broker seals the rolled segments meanwhile
        src, _ = _where(admin)
        dest = str(dirs[1] if src == str(dirs[0]) else dirs[0])
        node = int(admin.describe_cluster()["brokers"][0].get("node_id", 1))
        paced = Paced(b.bootstrap, args.rate).start()
        time.sleep(1.0)  # warm up
        base_a = time.monotonic()
        time.sleep(args.baseline_s)
        base_b = move_a = time.monotonic()
        answer = admin.alter_replica_log_dirs({(TOPIC, 0, node): dest})
        assert all(e.errno == 0 for e in answer.values()), answer
        while True:
            current, future = _where(admin)
            if current == dest and not future:
                break
            time.sleep(0.05)
        move_b = time.monotonic()
        time.sleep(1.0)
        paced.stop()
        admin.close()
        size = sum(f.stat().st_size for f in (Path(dest) / f"{TOPIC}-0").iterdir())
        t = time.monotonic()
        shutil.copytree(Path(dest) / f"{TOPIC}-0", b.tmp / "copy")
        copy_s = time.monotonic() - t
        rows = [
            ("producer alone", None, paced.between(base_a, base_b), base_b - base_a),
            ("producer + move", size, paced.between(move_a, move_b + 0.5), move_b - move_a),
        ]
        print(f"\n1 partition, {size / 2**20:.0f} MiB on disk, {args.segment_mib} MiB segments, "
              f"producer at {args.rate} x 1 KB/s acks=all; {paced.failed} failed sends\n")
        print(f"{'row':<18}{'seconds':>9}{'MiB/s':>8}{'acks':>7}{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}")
        for name, moved, lat, secs in rows:
            rate = f"{moved / 2**20 / secs:8.0f}" if moved else f"{'':>8}"
            print(f"{name:<18}{secs:9.2f}{rate}{len(lat):7d}{_pct(lat, .5):8.1f}{_pct(lat, .99):8.1f}"
                  f"{(lat[-1] * 1000 if lat else float('nan')):8.1f}")
        print(f"{'disk (copytree)':<18}{copy_s:9.2f}{size / 2**20 / copy_s:8.0f}")
        if args.verbose:
            slow = [(round(sent - move_a, 3), round(lat * 1000)) for sent, lat in paced.samples
                    if sent >= move_a and lat > 0.1]
            print(f"acks slower than 100 ms during the move (s after the request, ms): {slow[:40]}")
        moved_lines = [ln for ln in b.log_path.read_text().splitlines() if f"moved {TOPIC}-0" in ln]
        print("\nbroker: " + (moved_lines[-1].split(": ", 1)[-1] if moved_lines else "no move logged"))
    finally:
        b.stop()
        shutil.rmtree(b.tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
