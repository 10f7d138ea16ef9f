"""README.md's secured set-up runs as written: its shell blocks (certificates with openssl, a SCRAM
user with ``pylog storage format``, the properties file) in a temporary directory, the broker it
starts (on a free port instead of 9093), then its Python blocks against that broker."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_readme import BLOCK, README, SECURED, section

from pylog.local import free_port

README_PORT = "9093"


@pytest.mark.timeout(300)
def test_the_secured_setup_runs_as_written(tmp_path: Path) -> None:
    text = README.read_text()
    start, end = section(text, SECURED)
    found = [(m.group(1), m.group(2)) for m in BLOCK.finditer(text) if start <= m.start() < end]
    assert [kind for kind, _ in found] == ["sh", "sh", "python", "python"]
    port = str(free_port())
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    broker: subprocess.Popen[bytes] | None = None
    log = tmp_path / "broker.log"
    try:
        for kind, code in found:
            code = code.replace(f"127.0.0.1:{README_PORT}", f"127.0.0.1:{port}")
            if kind == "sh":
                script, started = code, re.search(r"^pylog broker .*$", code, re.M)
                if started:  # the broker runs in the background while the rest runs
                    script = code[: started.start()]
                subprocess.run(
                    ["bash", "-euc", script],
                    cwd=tmp_path,
                    env=env,
                    check=True,
                    timeout=120,
                    capture_output=True,
                )
                if started:
                    broker = subprocess.Popen(
                        ["bash", "-c", f"exec {started.group(0)}"],
                        cwd=tmp_path,
                        env=env,
                        stdout=subprocess.PIPE,
                        stderr=open(log, "wb"),  # noqa: SIM115 - the broker writes it until it stops
                    )
                    assert broker.stdout is not None
                    line = broker.stdout.readline().decode()
                    assert "pylog broker listening on" in line, log.read_text()[-3000:]
                continue
            out = subprocess.run(
                [sys.executable, "-c", code],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert out.returncode == 0, f"README example failed:\n{code}\n{out.stderr[-4000:]}"
            if "read_topic" in code:
                assert "first order" in out.stdout
    finally:
        if broker is not None:
            broker.terminate()
            try:
                broker.wait(20)
            except subprocess.TimeoutExpired:
                broker.kill()
                broker.wait()
