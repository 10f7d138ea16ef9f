"""Multi-node clusters for the fault tests: `LocalCluster` with short timeouts, waiting helpers,
and a network of namespaces whose links can be cut, for real network partitions.

Every node runs as its own `pylog broker` process (through LocalCluster). `NetnsFabric` puts
each node in its own network namespace behind a veth pair on one bridge (root only, which CI
and this machine are); cutting a node's link is a real partition: its sockets stay open and
nothing crosses, until the link comes back.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pylog.cluster_info import describe_cluster, describe_quorum
from pylog.local_cluster import LocalCluster

T = TypeVar("T")

# Short timeouts so faults are noticed in seconds (Kafka's defaults are for production).
FAST = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "300",
    "controller.quorum.election.timeout.ms": "1000",
    "replica.lag.time.max.ms": "4000",
    "replica.fetch.backoff.ms": "200",
    "log.flush.interval.messages": "1",
}


def wait_for(check: Callable[[], T | None], timeout_s: float, what: str, interval_s: float = 0.1) -> T:
    """Poll ``check`` until it returns something truthy; its value, or AssertionError after the timeout."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:
            last = exc
        time.sleep(interval_s)
    raise AssertionError(f"{what}: not within {timeout_s}s (last error: {last})")


def running_bootstrap(cluster: LocalCluster) -> str:
    return ",".join(n.bootstrap for n in cluster.nodes.values() if n.running)


def controller_seen(cluster: LocalCluster, *, through: int, not_: int | None = None) -> int | None:
    """The active controller as DescribeCluster on voter ``through``'s controller listener reports
    it (None if it reports none, or ``not_``); brokers name any live broker instead."""
    info = describe_cluster(cluster.node(through).controller_bootstrap, timeout_s=1.0, controllers=True)
    if info.controller_id < 0 or info.controller_id == not_:
        return None
    return info.controller_id


def quorum_caught_up(cluster: LocalCluster) -> bool:
    """Every voter's log end equals the high watermark, as the active controller reports it."""
    q = describe_quorum(running_bootstrap(cluster), timeout_s=2.0)
    return q.leader_id >= 0 and all(v.lag == 0 for v in q.voters)


def logs_of(cluster: LocalCluster, lines: int = 60) -> str:
    return "\n".join(f"--- node {n.node_id} ---\n{n.log_tail(lines)}" for n in cluster.nodes.values())


class NetnsFabric:
    """``n`` network namespaces on one bridge, addressed 10.<k>.<m>.11 .. (root only)."""

    def __init__(self, n: int) -> None:
        if os.geteuid() != 0:
            raise RuntimeError("network namespaces need root (CI and this project's machines run as root)")
        tag = uuid.uuid4().hex[:6]
        self.tag = tag
        self.bridge = f"plbr{tag}"
        octet = int(tag[:2], 16) % 200 + 20
        self.subnet = f"10.{octet}.{int(tag[2:4], 16)}"
        self.names = [f"pl{tag}n{i}" for i in range(1, n + 1)]
        self.hosts = [f"{self.subnet}.{10 + i}" for i in range(1, n + 1)]
        self._veths = [f"v{tag}{i}" for i in range(1, n + 1)]
        self._up = False

    def __enter__(self) -> NetnsFabric:
        try:
            self._ip("link", "add", self.bridge, "type", "bridge")
            self._ip("addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
            self._ip("link", "set", self.bridge, "up")
            for ns, veth, host in zip(self.names, self._veths, self.hosts):
                self._ip("netns", "add", ns)
                self._ip("link", "add", veth, "type", "veth", "peer", "name", f"{veth}p")
                self._ip("link", "set", f"{veth}p", "netns", ns)
                self._ip("link", "set", veth, "master", self.bridge)
                self._ip("link", "set", veth, "up")
                self._ip("netns", "exec", ns, "ip", "addr", "add", f"{host}/24", "dev", f"{veth}p")
                self._ip("netns", "exec", ns, "ip", "link", "set", f"{veth}p", "up")
                self._ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
            self._up = True
        except Exception:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        for ns, veth in zip(self.names, self._veths):
            with contextlib.suppress(subprocess.CalledProcessError):
                self._ip("link", "del", veth, check=False)
            with contextlib.suppress(subprocess.CalledProcessError):
                self._ip("netns", "del", ns, check=False)
        with contextlib.suppress(subprocess.CalledProcessError):
            self._ip("link", "del", self.bridge, check=False)
        self._up = False

    @staticmethod
    def _ip(*args: str, check: bool = True) -> None:
        subprocess.run(["ip", *args], check=check, capture_output=True, timeout=10)

    def prefix(self, node_id: int) -> list[str]:
        """The command prefix that runs a process in node ``node_id``'s namespace."""
        return ["ip", "netns", "exec", self.names[node_id - 1]]

    def isolate(self, node_id: int) -> None:
        """Cut node ``node_id`` off from every other node and from clients."""
        self._ip("link", "set", self._veths[node_id - 1], "down")

    def heal(self, node_id: int) -> None:
        self._ip("link", "set", self._veths[node_id - 1], "up")

    def cluster(self, home: Path, config: dict[str, str] | None = None) -> LocalCluster:
        return LocalCluster(
            len(self.names),
            data_dir=home,
            hosts=self.hosts,
            command_prefix=self.prefix,
            config={**FAST, **(config or {})},
            keep_data=True,
        )


def wait_until_fenced(bootstrap: str, node_id: int, timeout_s: float = 30) -> None:
    """Until broker ``node_id`` is gone from what ``bootstrap`` lists: a killed, paused or cut-off
    node stays a live broker until its session times out, and Metadata may name any live broker
    as the controller, which admin clients would then wait for."""
    from pylog.cluster_info import describe_cluster

    wait_for(
        lambda: all(b[0] != node_id for b in describe_cluster(bootstrap, timeout_s=1.0).brokers),
        timeout_s,
        f"broker {node_id} fenced",
    )
