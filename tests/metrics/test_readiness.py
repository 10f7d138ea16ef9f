"""/v1/status/ready of a broker that cannot register (its only controller is down): 503 with the
reason while it waits, live all along, 200 once the controller is back and the broker serves."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pylog


def status(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
    except OSError:
        return 0, {}  # not listening yet


def wait_status(url: str, code: int, timeout_s: float = 60) -> dict:
    deadline, seen = time.monotonic() + timeout_s, (0, {})
    while time.monotonic() < deadline:
        seen = status(url)
        if seen[0] == code:
            return seen[1]
        time.sleep(0.2)
    raise AssertionError(f"{url} answered {seen}, not {code}, for {timeout_s}s")


def test_ready_only_once_registered_and_serving(tmp_path: Path) -> None:
    with pylog.LocalCluster(1, brokers=1, data_dir=tmp_path / "c") as cluster:
        broker = cluster.node(2)
        assert broker.metrics_url is not None and len(cluster.metrics_urls) == 2
        assert wait_status(broker.metrics_url + "/v1/status/ready", 200) == {"status": "ready"}
        cluster.stop_node(2)
        cluster.stop_node(1)
        errors: list[BaseException] = []

        def start() -> None:
            try:
                cluster.start_node(2)
            except BaseException as exc:  # reported by the test below
                errors.append(exc)

        starting = threading.Thread(target=start)
        starting.start()
        try:
            body = wait_status(broker.metrics_url + "/v1/status/ready", 503)
            assert body["status"] == "not ready"
            assert "not registered with the controller" in body["reasons"]
            assert status(broker.metrics_url + "/v1/status/live") == (200, {"status": "live"})
            cluster.start_node(1)
        finally:
            starting.join(90)
        assert not errors, errors
        assert wait_status(broker.metrics_url + "/v1/status/ready", 200) == {"status": "ready"}


def test_the_kafka_listener_answers_only_as_a_registered_broker(tmp_path: Path) -> None:
    """As a new user would: start a broker, ask Metadata until it lists a broker, then create 50
    topics at once; every one is created (no 'only 0 broker(s) are registered'), on a fresh data
    directory and again on a restart of it."""
    import signal
    import subprocess
    import sys

    from confluent_kafka.admin import AdminClient, NewTopic

    from pylog.local import free_port

    port = free_port()
    for start in ("fresh", "restart"):
        with open(tmp_path / f"{start}.log", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "pylog", "broker", "--data-dir", str(tmp_path / "data"),
                 "--listen", f"127.0.0.1:{port}", "--config", "schema.registry.listeners="],
                stdout=log, stderr=subprocess.STDOUT,
            )
        try:
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
            deadline = time.monotonic() + 60
            while True:
                assert proc.poll() is None, (tmp_path / f"{start}.log").read_text()
                try:
                    if admin.list_topics(timeout=1).brokers:
                        break
                except Exception:  # not listening yet
                    pass
                assert time.monotonic() < deadline, "Metadata listed no broker within 60 s"
            topics = [NewTopic(f"{start}-{i}", 1, 1) for i in range(50)]
            failed = {}
            for name, future in admin.create_topics(topics, request_timeout=60).items():
                try:
                    future.result(60)
                except Exception as exc:
                    failed[name] = str(exc)
            assert not failed, failed
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
