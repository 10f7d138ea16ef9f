"""Consumer-group members as processes (so they can be SIGTERMed or SIGKILLed) and waiting for a
group to settle into an expected assignment."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from compat_clients import JS_CLI

MEMBER_PY = Path(__file__).parent / "members" / "group_member.py"
GROUP_CLIENTS = ("kafka-python", "confluent-kafka", "aiokafka", "kafkajs")


class Member:
    """A group member process that reports its assignment as JSON lines."""

    def __init__(
        self, client: str, bootstrap: str, topic: str, group: str, log_dir: Path, session_ms: int = 6000
    ):
        self.client = client
        self.name = f"{client}-{id(self):x}"
        self.log_path = log_dir / f"member-{self.name}.log"
        if client == "kafkajs":
            args = {"brokers": [bootstrap], "topic": topic, "groupId": group, "sessionTimeout": session_ms}
            cmd = ["node", str(JS_CLI), "member", json.dumps(args)]
        else:
            cmd = [sys.executable, str(MEMBER_PY), client, bootstrap, topic, group, str(session_ms)]
        self._err = open(self.log_path, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._err, stdin=subprocess.DEVNULL)
        self.assignment: list[int] | None = None
        self.events: queue.Queue[dict[str, object]] = queue.Queue()
        self.stopped = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in iter(self.proc.stdout.readline, b""):
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "assigned":
                self.assignment = list(event["partitions"])  # type: ignore[call-overload]
            if event.get("event") == "stopped":
                self.stopped = True
            self.events.put(event)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def leave(self, timeout: float = 30.0) -> None:
        """SIGTERM: the client closes and sends LeaveGroup."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"{self.name} did not leave within {timeout}s\n{self.log()}") from None

    def kill(self) -> None:
        """SIGKILL: the member vanishes; only the session timeout tells the coordinator."""
        self.proc.kill()
        self.proc.wait(10)

    def log(self) -> str:
        self._err.flush()
        return self.log_path.read_text("utf-8", "replace")[-3000:]

    def close(self) -> None:
        if self.alive():
            self.proc.kill()
            self.proc.wait(10)
        self._err.close()


def describe(members: Sequence[Member]) -> str:
    return "; ".join(f"{m.name}{'' if m.alive() else ' (exited)'}: {m.assignment}" for m in members)


def wait_for(cond: Callable[[], bool], timeout: float, what: str, members: Sequence[Member] = ()) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        for m in members:
            if not m.alive() and not m.stopped:
                raise AssertionError(f"{m.name} exited with {m.proc.returncode}:\n{m.log()}")
        time.sleep(0.1)
    logs = "\n".join(f"--- {m.name}\n{m.log()}" for m in members)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}: {describe(members)}\n{logs}")


def balanced(members: Sequence[Member], partitions: int) -> bool:
    """Every partition assigned exactly once, each member within one of an even share."""
    got = [m.assignment for m in members]
    if any(a is None for a in got):
        return False
    flat = [p for a in got for p in a]  # type: ignore[union-attr]
    if sorted(flat) != list(range(partitions)):
        return False
    share = partitions // len(members)
    return all(share <= len(a) <= share + (partitions % len(members) > 0) for a in got)  # type: ignore[arg-type]


def wait_balanced(members: Sequence[Member], partitions: int, timeout: float) -> None:
    wait_for(
        lambda: balanced(members, partitions),
        timeout,
        f"{len(members)} members to share {partitions} partitions",
        members,
    )
