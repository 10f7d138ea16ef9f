"""Many partitions on one broker: creation, restart and Metadata at 10,000 partitions.

One ``pylog broker`` process, topics of 10 partitions created 50 at a time with CreateTopics (as
provisioning scripts do). Rows:

- **create N partitions**: from the first CreateTopics until every partition created answers
  ListOffsets as its leader (its log open: a broker may answer CreateTopics before it has opened
  the logs of a large batch), the slowest CreateTopics, and whether the broker was ever fenced (a
  failed CreateTopics, or the controller's "fenced brokers" line in the broker's log after a
  batch); creation stops at the first fence;
- **restart with N partitions**: SIGTERM, then a new broker on the same data directory, timed from
  the call that starts it to the first answered ApiVersions (it answers once it is unfenced), and
  to every partition answering ListOffsets as its leader;
- **Metadata, all topics**: a raw Metadata v1 request for every topic, the median (and worst) of
  ``--metadata-runs``, answer read to its last byte, once every partition is open.

    python bench/bench_partition_scale.py                       # 2,000 then 10,000 partitions
    python bench/bench_partition_scale.py --partitions 3000 --first-restart 1000
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_start import answered
from common import free_port, pylog_command
from pylog.protocol import api

FENCED_LINE = "fenced brokers"


class Broker:
    """``pylog broker`` on a fixed port and data directory, its output appended to a log file."""

    def __init__(self, data_dir: Path, log_path: Path, config: list[str]) -> None:
        self.data_dir, self.log_path, self.config = data_dir, log_path, config
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> float:
        """Start; seconds until the first answered request."""
        cmd = [*pylog_command(), "broker", "--data-dir", str(self.data_dir),
               "--listen", f"127.0.0.1:{self.port}"]
        for c in self.config:
            cmd += ["--config", c]
        with open(self.log_path, "ab") as log:
            t0 = time.perf_counter()
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        return answered(self.port, t0 + 300) - t0

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(120)
            self.proc = None

    def fenced_in_log(self) -> bool:
        return FENCED_LINE in self.log_path.read_text("utf-8", "replace")


def all_leading(port: int, topics: list[str], per_topic: int, timeout_s: float = 600) -> float:
    """Poll ListOffsets (v1, latest) for every partition of ``topics`` until each answers without
    error (the broker leads it: its log is open); the time that took."""
    body = {"replica_id": -1, "topics": [
        {"name": t, "partitions": [{"partition_index": p, "timestamp": -1} for p in range(per_topic)]}
        for t in topics
    ]}
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=120) as s:
        while time.perf_counter() - t0 < timeout_s:
            s.sendall(api.encode_request(2, 1, 1, "bench", body))
            (size,) = struct.unpack(">i", _recv(s, 4))
            resp = api.decode_response(2, 1, _recv(s, size))[1]
            if all(p.error_code == 0 for t in resp.topics for p in t.partitions):
                return time.perf_counter() - t0
            time.sleep(0.05)
    raise TimeoutError(f"partitions not led after {timeout_s}s")


def create_batches(broker: Broker, start: int, until: int, topics_per_batch: int, per_topic: int,
                   ) -> tuple[float, float, bool, int]:
    """Create topics until ``until`` partitions exist and lead: (seconds, slowest CreateTopics,
    fenced, partitions)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}", "log_level": 0})
    total, slowest, fenced, n = 0.0, 0.0, False, start
    while n < until:
        batch = [NewTopic(name, per_topic, 1)
                 for name in topic_names(n, n + topics_per_batch * per_topic, per_topic)]
        t = time.perf_counter()
        futures = admin.create_topics(batch, request_timeout=120, operation_timeout=120)
        errors = []
        for f in futures.values():
            try:
                f.result()
            except Exception as exc:  # a failed CreateTopics is what the row reports
                errors.append(str(exc))
        took = time.perf_counter() - t
        total, slowest = total + took, max(slowest, took)
        if errors or broker.fenced_in_log():
            print(f"  at {n} partitions: {len(errors)} topics failed {errors[:1]}; the broker was fenced",
                  flush=True)
            fenced = True
            break
        n += topics_per_batch * per_topic
    if not fenced:
        total += all_leading(broker.port, topic_names(start, n, per_topic), per_topic)
    return total, slowest, fenced or broker.fenced_in_log(), n


def topic_names(start: int, until: int, per_topic: int) -> list[str]:
    return [f"scale-{i}" for i in range(start, until, per_topic)]


_METADATA_V1 = struct.pack(">hhih", 3, 1, 7, 5) + b"bench" + struct.pack(">i", -1)  # all topics


def metadata_latency(port: int, runs: int) -> tuple[float, float, int]:
    """(median, worst) seconds of a Metadata v1 request for all topics, and the answer's size."""
    times, size = [], 0
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        for _ in range(runs):
            t = time.perf_counter()
            s.sendall(struct.pack(">i", len(_METADATA_V1)) + _METADATA_V1)
            (size,) = struct.unpack(">i", _recv(s, 4))
            _recv(s, size)
            times.append(time.perf_counter() - t)
    return statistics.median(times), max(times), size


def _recv(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--first-restart", type=int, default=2_000,
                    help="restart once at this many partitions too")
    ap.add_argument("--topics-per-batch", type=int, default=50)
    ap.add_argument("--partitions-per-topic", type=int, default=10)
    ap.add_argument("--metadata-runs", type=int, default=7)
    ap.add_argument("--config", action="append", default=[], help="KEY=VALUE for the broker")
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-partition-scale-"))
    broker = Broker(tmp / "data", tmp / "broker.log", args.config)
    rows: list[tuple[str, str]] = []
    try:
        broker.start()
        n, created_s, slowest, fenced = 0, 0.0, 0.0, False
        for stop_at in sorted({min(args.first_restart, args.partitions), args.partitions}):
            took, worst, fenced_now, n = create_batches(
                broker, n, stop_at, args.topics_per_batch, args.partitions_per_topic
            )
            created_s, slowest, fenced = created_s + took, max(slowest, worst), fenced or fenced_now
            if fenced:
                break
            if stop_at == args.partitions:
                median, worst_md, size = metadata_latency(broker.port, args.metadata_runs)
                rows.append((f"Metadata, all topics ({n} partitions, {size / 1e6:.1f} MB)",
                             f"median {median * 1000:.0f} ms, worst {worst_md * 1000:.0f} ms"))
            broker.stop()
            first = broker.start()
            led = first + all_leading(broker.port, topic_names(0, n, args.partitions_per_topic),
                                      args.partitions_per_topic)
            rows.append((f"restart with {n} partitions",
                         f"{first:.2f} s to first answer, {led:.2f} s until every partition leads"))
        batch = args.topics_per_batch * args.partitions_per_topic
        rows.insert(0, (f"create {n} partitions ({batch} a batch)",
                        f"{created_s:.1f} s, slowest CreateTopics {slowest:.2f} s, "
                        + ("FENCED" if fenced else "never fenced")))
    finally:
        broker.stop()
        if args.keep:
            print(f"data and log kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    width = max(len(r[0]) for r in rows)
    print(f"{'row':<{width}}  result")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
