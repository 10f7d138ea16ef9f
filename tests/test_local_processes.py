"""No broker outlives what started it (`pylog.local_processes`): real ``pylog cluster start``,
`LocalBroker` and broker processes, killed with SIGKILL, checked by the pids they print."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pylog
from pylog.local_processes import PARENT_ENV, wait_gone

NO_REGISTRY = "schema.registry.listeners="  # not needed here: a faster start


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def start_cluster(home: Path, nodes: int) -> tuple[subprocess.Popen[str], list[int]]:
    """``pylog cluster start`` in the background; its process and the broker pids it prints."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pylog", "cluster", "start", "--nodes", str(nodes), "--data-dir", str(home),
         "--base-port", "0", "--config", NO_REGISTRY],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "data and logs in" in line:
            break
    pids = [int(p) for p in re.findall(r"node \d+: pid (\d+),", "".join(lines))]
    assert len(pids) == nodes, "".join(lines) + (proc.stderr.read() if proc.poll() is not None else "")
    for pid in pids:  # the brokers themselves, not a wrapper
        assert re.search(r"-m pylog broker --config-file \S+node-\d\.properties", cmdline(pid)), cmdline(pid)
    return proc, pids


@pytest.mark.timeout(180)
def test_kill_9_of_pylog_cluster_start_leaves_no_broker(tmp_path: Path) -> None:
    proc, pids = start_cluster(tmp_path / "cluster", 2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    left = wait_gone(pids, 40.0)
    assert not left, f"brokers {left} outlived their `pylog cluster start`"


@pytest.mark.timeout(180)
def test_kill_9_of_a_watchdog_leaves_no_broker(tmp_path: Path) -> None:
    quiet = {"schema.registry.listeners": ""}
    with pylog.LocalCluster(nodes=1, data_dir=tmp_path / "c", config=quiet) as cluster:
        node = cluster.node(1)
        broker, watchdog = node.pid, node.process
        assert broker is not None and watchdog is not None and broker != watchdog.pid
        os.kill(watchdog.pid, signal.SIGKILL)  # the wrapper, not the broker
        watchdog.wait(10)
        assert not wait_gone([broker], 20.0), "the broker outlived its watchdog"
    with pylog.LocalBroker(config=quiet) as local:
        broker, watchdog = local.pid, local.process
        assert broker is not None and watchdog is not None and "-m pylog broker" in cmdline(broker)
        os.kill(watchdog.pid, signal.SIGKILL)
        assert not wait_gone([broker], 20.0), "the broker outlived its watchdog"


@pytest.mark.timeout(180)
def test_pylog_cluster_stop_stops_a_background_cluster(tmp_path: Path) -> None:
    home = tmp_path / "cluster"
    proc, pids = start_cluster(home, 2)
    out = subprocess.run([sys.executable, "-m", "pylog", "cluster", "stop", str(home)], capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"stopped 2 node(s) (pids {pids[0]}, {pids[1]})"
    assert proc.wait(30) == 0  # the wrapper stopped its nodes, as on Ctrl-C
    assert not any(alive(p) for p in pids)
    assert not (home / "cluster.pid").exists()
    again = subprocess.run([sys.executable, "-m", "pylog", "cluster", "stop", str(home)], capture_output=True,
                           text=True, timeout=60, check=False)
    assert again.returncode == 0 and again.stdout.strip() == "stopped 0 node(s)"
    nothing = subprocess.run([sys.executable, "-m", "pylog", "cluster", "stop", str(tmp_path / "none")],
                             capture_output=True, text=True, timeout=60, check=False)
    assert nothing.returncode == 1 and "holds no pylog cluster" in nothing.stderr


@pytest.mark.timeout(120)
def test_a_broker_stops_when_its_parent_changes(tmp_path: Path) -> None:
    """The fallback where the kernel sends no signal: the broker polls its parent pid."""
    parent_code = f"""
import os, subprocess, sys
env = dict(os.environ, {PARENT_ENV}=str(os.getpid()))
broker = subprocess.Popen([sys.executable, "-m", "pylog", "broker", "--data-dir", {str(tmp_path / 'd')!r},
                           "--listen", "127.0.0.1:0", "--config", {NO_REGISTRY!r}], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
print(broker.pid, broker.stdout.readline(), flush=True)
sys.stdin.read()
"""
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    first = parent.stdout.readline()
    assert "listening on" in first, first
    broker = int(first.split()[0])
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(10)
    t0 = time.monotonic()
    assert not wait_gone([broker], 20.0), "the broker outlived its parent"
    print(f"the broker stopped {time.monotonic() - t0:.1f}s after its parent was killed")


def test_free_ports_are_not_handed_out_twice() -> None:
    """A port stays free until its listener starts, so the ports a cluster's nodes are given one
    after another must differ although each was free when chosen (2,000 random picks below the
    ephemeral range would repeat about 90 times)."""
    from pylog.local import free_port

    ports = [free_port() for _ in range(2000)]
    assert len(set(ports)) == len(ports)


def test_free_ports_lie_below_the_kernels_ephemeral_range() -> None:
    """A port the kernel also hands to outgoing connections could be taken between the choice and
    the node's listen; below the ephemeral range only another listener can take it."""
    import socket

    from pylog.local import EPHEMERAL_RANGE_FILE, LOW_PORT, free_port

    low = int(Path(EPHEMERAL_RANGE_FILE).read_text().split()[0])
    ports = {free_port() for _ in range(20)}
    assert all(LOW_PORT <= p < low for p in ports), (low, sorted(ports))
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports.pop()))
        s.listen()
