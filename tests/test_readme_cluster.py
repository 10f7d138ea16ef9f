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
    assert kinds == ["sh", "python", "properties"]


def test_pylog_cluster_start_as_written(tmp_path: Path) -> None:
    sh = [code for k, code in cluster_blocks() if k == "sh"]
    (command,) = [line for code in sh for line in code.splitlines() if line.strip()]
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
