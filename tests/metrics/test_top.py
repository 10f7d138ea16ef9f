"""``pylog top`` against a real broker under a producer; its rate arithmetic on known snapshots."""

from __future__ import annotations

import subprocess
import sys
import threading

from confluent_kafka import Producer

import pylog
from pylog.metrics.top import COLUMNS, Snapshot, rows, targets


def test_pylog_top_once_shows_the_node_and_its_rates(tmp_path):
    with pylog.LocalBroker(tmp_path / "d") as b:
        stop = threading.Event()

        def produce() -> None:
            p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 5})
            while not stop.is_set():
                for _ in range(200):
                    p.produce("top-topic", value=b"x" * 100)
                p.flush(10)

        t = threading.Thread(target=produce)
        t.start()
        try:
            out = subprocess.run([sys.executable, "-m", "pylog", "top", b.metrics_url, "--once", "-n", "1"],
                                 capture_output=True, text=True, timeout=60, check=False)
        finally:
            stop.set()
            t.join(30)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("nodes up 1/1   active controller ")
    header = next(i for i, line in enumerate(lines) if line.startswith("NODE"))
    row = lines[header + 1].split()
    assert row[:2] == ["1", b.metrics_url.removeprefix("http://")]
    cells = dict(zip(COLUMNS, [f"{row[0]} {row[1]}", *row[2:]]))
    assert cells["STATE"] == "ready"
    assert int(cells["LEADERS"]) >= 1
    assert float(cells["MSG/S IN"].replace(",", "")) > 0


def test_top_refuses_what_is_not_a_target(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pylog", "top", str(tmp_path), "--once"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2 and "neither http://HOST:PORT nor a cluster directory" in out.stderr


def test_targets_from_a_cluster_directory(tmp_path):
    for i, port in ((2, 9002), (1, 9001), (10, 9010)):
        (tmp_path / f"node-{i}.properties").write_text(
            f"node.id={i}\npylog.metrics.listeners=http://127.0.0.1:{port}\n", "utf-8"
        )
    assert targets([str(tmp_path)]) == [f"http://127.0.0.1:{p}" for p in (9001, 9002, 9010)]


def test_rates_and_the_p99_come_from_two_snapshots():
    def snap(at: float, messages: float, le_counts: dict[str, float]) -> Snapshot:
        s = Snapshot("http://n1:1", at, "ready")
        s.samples["pylog_node_info"] = {(("node_id", "1"),): 1}
        s.samples["kafka_server_brokertopicmetrics_messagesin_total"] = {
            (): messages, (("topic", "a"),): messages,  # the all-topics sample and one topic's
        }
        s.samples["kafka_network_requestmetrics_totaltimems_bucket"] = {
            (("le", le), ("request", "Produce")): n for le, n in le_counts.items()
        }
        return s

    old = snap(10.0, 1000, {"1.0": 10, "5.0": 10, "+Inf": 10})
    new = snap(12.0, 5000, {"1.0": 60, "5.0": 109, "+Inf": 110})
    (row,) = rows([new], {old.url: old})
    cells = dict(zip(COLUMNS, row))
    assert cells["NODE"] == "1 n1:1"
    assert cells["MSG/S IN"] == "2,000"  # (5000 - 1000) / 2 s, the all-topics sample only
    assert cells["PRODUCE P99 MS"] == "5"  # 99 of the 100 new requests took at most 5 ms
    (first,) = rows([new], {})
    assert dict(zip(COLUMNS, first))["MSG/S IN"] == "-"
