"""`LocalBroker`: a single-node pylog broker in a child process, for notebooks and examples.

    with pylog.LocalBroker() as broker:                 # free port, temporary data directory
        pylog.write_topic(df, "clicks", bootstrap_servers=broker.bootstrap_servers)

It runs ``python -m pylog broker --listen 127.0.0.1:0`` with the current interpreter and reads the
bound port from the line the broker prints. The broker's log goes to ``broker.log_path``.

The broker is started through a small watchdog process holding a pipe from this one: when this
process goes away, even killed (a notebook kernel shut down hard), the pipe closes and the watchdog
stops the broker; when the watchdog goes away, the broker stops too (`pylog.local_processes`). The
watchdog runs in its own session, so interrupting a notebook cell (SIGINT to the kernel's process
group) does not stop the broker; `stop` sends it SIGTERM, which it forwards. ``broker.pid`` is the
broker's own process id.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping
from pathlib import Path

from pylog.clock import SYSTEM_CLOCK, Clock

CLOCK: Clock = SYSTEM_CLOCK  # the harness's clock: it waits for processes, it keeps no node's time

_REMOVE_ENV = "PYLOG_LOCAL_BROKER_REMOVE"
_PID_FILE_ENV = "PYLOG_LOCAL_BROKER_PID_FILE"
_READY = re.compile(r"pylog broker listening on (\[?[^\s\]]+\]?):(\d+), data in (.+)$")
_REGISTRY = re.compile(r"^pylog schema registry on (\S+)$", re.MULTILINE)
_METRICS = re.compile(r"^pylog metrics on (\S+)$", re.MULTILINE)


class LocalBroker:
    """A pylog broker process. `start()` / `stop()`, or use it as a context manager.

    ``data_dir``: where the broker keeps its logs (default: a temporary directory, deleted on stop
    unless ``keep_data=True``). ``config``: Kafka broker configs (``{"num.partitions": "3"}``).
    """

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *, host: str = "127.0.0.1",
                 port: int = 0, config: Mapping[str, object] | None = None, log_level: str = "INFO",
                 keep_data: bool = False, startup_timeout_s: float = 60.0) -> None:
        self._tmp = Path(tempfile.mkdtemp(prefix="pylog-broker-"))
        self.data_dir = Path(data_dir).resolve() if data_dir is not None else self._tmp / "data"
        self._owns_data = data_dir is None and not keep_data
        self.listen = f"{host}:{port}"
        self.config = {str(k): str(v) for k, v in (config or {}).items()}
        self.log_level = log_level
        self.startup_timeout_s = startup_timeout_s
        self.log_path = self._tmp / "broker.log"
        self.host: str | None = None
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None  # the watchdog
        self._pid_path = self._tmp / "broker.pid"
        self._finalizer: weakref.finalize | None = None
        if registry_installed():
            self.config.setdefault("schema.registry.listeners", f"http://{host}:{free_port(host)}")
        listeners = self.config.get("schema.registry.listeners")
        # None without the `registry` extra (pip install -e '.[registry]')
        self.schema_registry_url = listeners.split(",")[0].strip() if listeners else None
        # /metrics and the health checks; config {"pylog.metrics.listeners": ""} turns them off
        self.config.setdefault("pylog.metrics.listeners", f"http://{host}:{free_port(host)}")
        metrics = self.config["pylog.metrics.listeners"]
        self.metrics_url: str | None = metrics.split(",")[0].strip() or None
        # Arrow Flight (pylog.flight.listeners); a port 0 is chosen here, so the address is known
        flight = [u.strip() for u in self.config.get("pylog.flight.listeners", "").split(",") if u.strip()]
        flight = [re.sub(r":0$", f":{free_port(host)}", u) for u in flight]
        if flight:
            self.config["pylog.flight.listeners"] = ",".join(flight)
        self.flight_urls: list[str] = flight
        self.flight_url: str | None = flight[0] if flight else None

    @property
    def bootstrap_servers(self) -> str:
        if self.port is None:
            raise RuntimeError("the broker is not running; call start() first")
        host = self.host or "127.0.0.1"
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        """The broker process itself (not its watchdog), while it runs."""
        if not self.running:
            return None
        with contextlib.suppress(OSError, ValueError):
            return int(self._pid_path.read_text())
        return None

    def start(self) -> LocalBroker:
        if self.running:
            return self
        args = [sys.executable, "-m", "pylog.local", "broker", "--data-dir", str(self.data_dir),
                "--listen", self.listen, "--log-level", self.log_level]
        for k, v in self.config.items():
            args += ["--config", f"{k}={v}"]
        out_path = self._tmp / "broker.stdout"
        env = dict(os.environ, **{_PID_FILE_ENV: str(self._pid_path)})
        if self._owns_data:  # the watchdog removes it if this process dies without stopping the broker
            env[_REMOVE_ENV] = str(self._tmp)
        with open(out_path, "wb") as out, open(self.log_path, "ab") as err:
            self.process = subprocess.Popen(args, stdout=out, stderr=err, stdin=subprocess.PIPE,
                                            start_new_session=True, env=env)
        self._finalizer = weakref.finalize(self, _terminate, self.process, None)
        deadline = CLOCK.monotonic_s() + self.startup_timeout_s
        while True:
            printed = out_path.read_text(errors="replace")
            match = _READY.search(printed)
            if match:
                self.host, self.port = match.group(1).strip("[]"), int(match.group(2))
                registry = _REGISTRY.search(printed)
                if registry:  # https when the broker's listeners use TLS
                    self.schema_registry_url = registry.group(1)
                metrics = _METRICS.search(printed)
                if metrics:
                    self.metrics_url = metrics.group(1)
                return self
            if self.process.poll() is not None:
                code = self.process.returncode
                self.process = None
                raise RuntimeError(f"the pylog broker exited with code {code} before listening:\n"
                                   f"{self.log_tail()}")
            if CLOCK.monotonic_s() > deadline:
                self.stop()
                raise TimeoutError(f"the pylog broker did not listen within {self.startup_timeout_s}s:\n"
                                   f"{self.log_tail()}")
            time.sleep(0.01)  # the first request of a test waits on this

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM, wait up to `timeout_s`, then SIGKILL; deletes a temporary data directory."""
        proc, self.process = self.process, None
        if proc is not None:
            _terminate(proc, timeout_s)
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        self.port = None
        if self._owns_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def close(self) -> None:
        """Stop the broker and remove the helper's temporary files (and a temporary data directory)."""
        self.stop()
        keep = not self._owns_data and self.data_dir.is_relative_to(self._tmp)
        if not keep:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def __enter__(self) -> LocalBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = f"bootstrap_servers={self.bootstrap_servers!r}" if self.running else "stopped"
        return f"LocalBroker({state}, data_dir={str(self.data_dir)!r})"


def registry_installed() -> bool:
    """Whether the schema registry's dependencies (the `registry` extra) are installed."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("aiohttp", "fastavro"))


EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
LOW_PORT = 10000  # the lowest port handed out below the kernel's ephemeral range
RECENT_PORTS_KEPT = 4096  # ports this process handed out that free_port will not hand out again
_recent_ports: dict[int, None] = {}  # insertion-ordered: the oldest is forgotten first


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on, for a process started next to listen on.

    Chosen below the kernel's ephemeral range where there is one: a port the kernel handed out by
    ``bind(0)`` is also what it hands to the next outgoing connection, so between this call and the
    listener's start a client connecting anywhere could take it (EADDRINUSE at the node's start).
    A port this process handed out lately is never handed out again: it is free until its listener
    starts, so a cluster's nodes picked one after another could otherwise get the same port.
    """
    import random
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        low = int(Path(EPHEMERAL_RANGE_FILE).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    for _ in range(64 if low > LOW_PORT + 1000 else 0):
        port = random.randrange(LOW_PORT, low)
        if port in _recent_ports:
            continue
        with socket.socket(family) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        return _handed_out(port)
    with socket.socket(family) as s:
        s.bind((host, 0))
        return _handed_out(int(s.getsockname()[1]))


def _handed_out(port: int) -> int:
    _recent_ports[port] = None
    while len(_recent_ports) > RECENT_PORTS_KEPT:
        del _recent_ports[next(iter(_recent_ports))]
    return port


def _terminate(proc: subprocess.Popen[bytes], timeout_s: float | None) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s if timeout_s is not None else 10.0)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()


def _watchdog(args: list[str]) -> int:
    """Run ``python -m pylog <args>``; stop it on SIGTERM / SIGINT (forwarded) or when stdin closes.
    The broker stops by itself when this watchdog dies (`pylog.local_processes`)."""
    from pylog.local_processes import PARENT_ENV, die_with_parent

    env = dict(os.environ, **{PARENT_ENV: str(os.getpid())})
    env.pop(_PID_FILE_ENV, None)
    env.pop(_REMOVE_ENV, None)
    broker = subprocess.Popen([sys.executable, "-m", "pylog", *args], stdin=subprocess.DEVNULL, env=env,
                              preexec_fn=die_with_parent())
    pid_file = os.environ.get(_PID_FILE_ENV)
    if pid_file:  # the broker itself is signalled (kill -9, SIGSTOP) and its pid shown, not this watchdog
        tmp = Path(f"{pid_file}.tmp")
        tmp.write_text(str(broker.pid))
        tmp.replace(pid_file)
    stop_requested: list[tuple[float, str]] = []

    def stop(signum: object = None, _frame: object = None) -> None:
        if not stop_requested:
            stop_requested.append((CLOCK.monotonic_s(), "parent" if signum is None else "signal"))
            with contextlib.suppress(ProcessLookupError):
                broker.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def watch_parent() -> None:
        with contextlib.suppress(OSError):
            while os.read(0, 4096):  # unbuffered: no lock held at interpreter shutdown
                pass
        stop()

    threading.Thread(target=watch_parent, daemon=True).start()
    while True:
        try:
            code = broker.wait(timeout=1.0)
            break
        except subprocess.TimeoutExpired:
            if stop_requested and CLOCK.monotonic_s() - stop_requested[0][0] > 30:
                broker.kill()
    remove = os.environ.get(_REMOVE_ENV)
    if remove and stop_requested and stop_requested[0][1] == "parent":
        shutil.rmtree(remove, ignore_errors=True)
    return code


if __name__ == "__main__":
    raise SystemExit(_watchdog(sys.argv[1:]))
