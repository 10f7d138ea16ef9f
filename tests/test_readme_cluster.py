"""README.md's cluster section runs as written: `pylog cluster start` serves a three-node cluster
that `pylog cluster info` describes, and the `LocalCluster` example survives its controller's
kill -9 and reads back both records."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_readme import BLOCK, CLUSTER, README, section

pytestmark = pytest.mark.timeout(300)


def cluster_blocks() -> list[tuple[str, str]]:
    text = README.read_text()
    start, end = section(text, CLUSTER)
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(text[start:end])]


def free_base(count: int) -> int:
    for base in range(21000, 60000, 97):
        ok = True
        for port in range(base, base + count):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port range")


def test_the_cluster_section_has_its_examples() -> None:
    kinds = [k for k, _ in cluster_blocks()]
    assert kinds == ["sh", "python", "properties", "sh", "sh"]


def test_pylog_cluster_start_as_written(tmp_path: Path) -> None:
    sh = next(code for k, code in cluster_blocks() if k == "sh")
    (command,) = [line for line in sh.splitlines() if line.strip()]
    assert command.startswith("pylog cluster start --nodes 3")
    command = re.sub(r"--base-port \d+", f"--base-port {free_base(6)}", command)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.Popen(shlex.split(command), cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 120
        servers = None
        lines = []
        while time.monotonic() < deadline and servers is None:
            line = proc.stdout.readline()
            lines.append(line)
            m = re.search(r"bootstrap servers (\S+)", line)
            if m:
                servers = m.group(1)
        assert servers is not None, "".join(lines)
        info = subprocess.run([sys.executable, "-m", "pylog", "cluster", "info", "-b", servers, "--format",
                               "json"], capture_output=True, text=True, timeout=60, check=True, env=env)
        assert '"controller_id"' in info.stdout and info.stdout.count('"node_id"') == 3
        assert (tmp_path / "pylog-cluster" / "node-1" / "meta.properties").exists()
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 0 and "stopping the cluster" in out


def test_the_local_cluster_example(tmp_path: Path) -> None:
    (code,) = [code for k, code in cluster_blocks() if k == "python"]
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=240, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[b'before', b'after']" in out.stdout


def test_adding_and_removing_brokers_as_written(tmp_path: Path) -> None:
    """The second shell block against a 3-node cluster that gained broker 4: plan, run the plan,
    rebalance, list, then remove broker 4 (stopped when the command asks for it)."""
    from pylog.local_cluster import LocalCluster
    from pylog.sdk.cluster_admin import ClusterAdminSync

    sh = [code for k, code in cluster_blocks() if k == "sh"][1]
    lines = [line.split("#")[0].strip() for line in sh.splitlines() if line.strip()]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    with LocalCluster(3, data_dir=tmp_path / "cluster") as cluster:
        env["PYLOG_BOOTSTRAP_SERVERS"] = cluster.bootstrap_servers
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        admin.create_topics([NewTopic("clicks", num_partitions=8, replication_factor=2)])
        admin.close()
        assert cluster.add_node() == 4
        for line in lines[:-1]:
            out = subprocess.run(shlex.split(line), cwd=tmp_path, env=env, capture_output=True, text=True,
                                 timeout=240)
            assert out.returncode == 0, (line, out.stdout, out.stderr)
        assert (tmp_path / "moves.json").exists()
        with ClusterAdminSync(cluster.bootstrap_servers) as ca:
            assert ca.state().brokers[4].replicas >= 3
        proc = subprocess.Popen(shlex.split(lines[-1]), cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if "stop it" in line:
                cluster.stop_node(4)
        assert proc.wait(120) == 0, "".join(seen)
        with ClusterAdminSync(cluster.bootstrap_servers.rsplit(",", 1)[0]) as ca:
            state = ca.state()
        assert sorted(state.brokers) == [1, 2, 3]
        assert all(4 not in p.replicas for p in state.partitions.values())


def test_tiered_storage_as_written(tmp_path: Path) -> None:
    """The tiered-storage block: a broker with the remote tier on a local directory, then a topic
    that uses it (refused with INVALID_CONFIG if the broker's side were not on)."""
    from sdk_helpers import Broker

    sh = [code for k, code in cluster_blocks() if k == "sh"][2]
    broker_line, create_line = (c.strip() for c in sh.replace("\\\n", " ").splitlines() if c.strip())
    assert broker_line.startswith("pylog broker") and create_line.startswith("pylog topic create clicks")
    words = shlex.split(broker_line.replace("$PWD", str(tmp_path)))
    config = dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--config")
    assert config["remote.log.storage.uri"] == f"file://{tmp_path}/remote"
    broker = Broker(tmp_path / "data", tmp_path / "broker.log", config)
    env = dict(os.environ, PYLOG_BOOTSTRAP_SERVERS=broker.bootstrap,
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    try:
        out = subprocess.run(["bash", "-c", create_line], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        described = subprocess.run(["pylog", "topic", "describe", "clicks"], cwd=tmp_path, env=env,
                                   capture_output=True, text=True, timeout=120, check=True).stdout
        assert "REMOTE TIER" in described, described
    finally:
        broker.stop()
