"""`LocalCluster`: an N-node pylog cluster on this machine, one process per node, for notebooks,
demonstrations and fault tests.

    with pylog.LocalCluster(nodes=3) as cluster:
        pylog.write_topic(df, "clicks", bootstrap_servers=cluster.bootstrap_servers)
        cluster.kill(cluster.controller_id())        # kill -9 the active controller
        cluster.restart(1)

Every node is broker and controller (``process.roles=broker,controller``) with its own data
directory, configured with Kafka's KRaft settings written to ``node-N.properties``. Nodes are
started like `LocalBroker`s: through a watchdog that stops them when this process goes away.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.local import _PID_FILE_ENV, _READY, _REGISTRY, _terminate, free_port, registry_installed

CLOCK: Clock = SYSTEM_CLOCK  # the harness's clock: it waits for processes, it keeps no node's time

_FORMAT = [sys.executable, "-m", "pylog", "storage", "format", "--config-file"]


def new_cluster_id() -> str:
    """A random cluster id in Kafka's form (a base64url UUID without padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class LocalNode:
    """One node of a `LocalCluster`: its ports, files and process."""

    def __init__(self, node_id: int, host: str, broker_port: int, controller_port: int, home: Path) -> None:
        self.node_id = node_id
        self.host = host
        self.broker_port = broker_port
        self.controller_port = controller_port
        self.data_dir = home / f"node-{node_id}"
        self.config_path = home / f"node-{node_id}.properties"
        self.log_path = home / f"node-{node_id}.log"
        self.stdout_path = home / f"node-{node_id}.stdout"
        self.pid_path = home / f"node-{node_id}.pid"
        self.registry_port: int | None = None  # the schema registry this node serves, if any
        self.metrics_port: int | None = None  # where it serves /metrics and its health, if anywhere
        self.flight_port: int | None = None  # its Arrow Flight server, with pylog.flight.listeners
        self.process: subprocess.Popen[bytes] | None = None  # the watchdog
        self.starts = 0
        self.overrides: dict[str, str] = {}  # this node's own configs (broker.rack, ...)
        self.removed = False  # `LocalCluster.remove_node` took it out of the cluster

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.broker_port}"

    @property
    def metrics_url(self) -> str | None:
        """``http://host:port`` of the node's metrics listener (``/metrics``, ``/v1/status/ready``)."""
        return None if self.metrics_port is None else f"http://{self.host}:{self.metrics_port}"

    @property
    def flight_url(self) -> str | None:
        """``grpc://host:port`` of the node's Arrow Flight server, when the cluster serves Flight."""
        return None if self.flight_port is None else f"grpc://{self.host}:{self.flight_port}"

    @property
    def controller_bootstrap(self) -> str:
        """The controller listener (a voter's): ``--bootstrap-controller``."""
        return f"{self.host}:{self.controller_port}"

    @property
    def pid(self) -> int | None:
        """The broker process itself (not its watchdog), while it runs."""
        if self.process is None or self.process.poll() is not None:
            return None
        with contextlib.suppress(OSError, ValueError):
            return int(self.pid_path.read_text())
        return None

    @property
    def running(self) -> bool:
        return self.pid is not None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""


def _read_pid(node: LocalNode) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(node.pid_path.read_text())
    return None


class LocalCluster:
    """``nodes`` pylog processes forming one cluster. `start()` / `stop()` or a context manager.

    ``data_dir``: the parent of the nodes' data directories (default: a temporary directory,
    removed on close unless ``keep_data``). ``base_port``: brokers listen on ``base_port ..
    base_port+N-1`` and controllers on the next N ports (0: free ports). ``config``: Kafka
    broker configs for every node. ``brokers`` adds that many broker-only nodes (``process.roles=
    broker``, following the metadata log as observers) after the ``nodes`` voters. ``hosts`` /
    ``command_prefix`` place node i on another
    address or run it through a prefix (``ip netns exec ...``), for network fault tests.
    ``dynamic_quorum`` finds the quorum through ``controller.quorum.bootstrap.servers`` with the
    voters in the metadata log (KIP-853; each voter formatted with ``--initial-controllers``), so
    `add_controller` / `remove_controller` can change it while the cluster runs.
    ``racks`` gives node i the ``broker.rack`` racks[i-1]. `add_node` starts one more broker
    that joins the running cluster; `remove_node` moves every replica off a broker, stops it and
    unregisters it.
    """

    def __init__(
        self,
        nodes: int = 3,
        *,
        brokers: int = 0,
        data_dir: str | os.PathLike[str] | None = None,
        base_port: int = 0,
        config: Mapping[str, object] | None = None,
        host: str = "127.0.0.1",
        hosts: Sequence[str] | None = None,
        command_prefix: Callable[[int], list[str]] | None = None,
        log_level: str = "INFO",
        keep_data: bool = False,
        startup_timeout_s: float = 60.0,
        racks: Sequence[str | None] | None = None,
        dynamic_quorum: bool = False,
    ) -> None:
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        if hosts is not None and len(hosts) != nodes + brokers:
            raise ValueError(f"hosts names {len(hosts)} addresses for {nodes + brokers} nodes")
        self.voter_count = nodes
        self.dynamic_quorum = dynamic_quorum
        self.controller_only: set[int] = set()  # nodes added by add_controller (process.roles=controller)
        self._tmp = Path(tempfile.mkdtemp(prefix="pylog-cluster-"))
        self.home = Path(data_dir).resolve() if data_dir is not None else self._tmp
        self.home.mkdir(parents=True, exist_ok=True)
        self._owns_data = data_dir is None and not keep_data
        self.config = {str(k): str(v) for k, v in (config or {}).items()}
        self.log_level = log_level
        self.startup_timeout_s = startup_timeout_s
        self.command_prefix = command_prefix
        self.cluster_id = self._existing_cluster_id() or new_cluster_id()
        self._registry = registry_installed() and "schema.registry.listeners" not in self.config
        self._metrics = "pylog.metrics.listeners" not in self.config  # each node on a port of its own
        total = nodes + brokers
        addresses = list(hosts) if hosts is not None else [host] * total
        self.nodes: dict[int, LocalNode] = {}
        for i in range(1, total + 1):
            h = addresses[i - 1]
            if base_port:
                bp, cp = base_port + i - 1, base_port + total + i - 1
            elif hosts is not None:
                bp, cp = 9092, 9093
            else:
                bp, cp = free_port(h), free_port(h)
            self.nodes[i] = LocalNode(i, h, bp, cp, self.home)
            if racks is not None and i <= len(racks) and racks[i - 1] is not None:
                self.nodes[i].overrides["broker.rack"] = str(racks[i - 1])
            if self._registry:
                self.nodes[i].registry_port = (
                    bp + 2 * total if base_port else 8081 if hosts is not None else free_port(h)
                )
            if self._metrics:
                self.nodes[i].metrics_port = (
                    bp + 3 * total if base_port else 9644 if hosts is not None else free_port(h)
                )

    def _existing_cluster_id(self) -> str | None:
        for meta in sorted(self.home.glob("node-*/meta.properties")):
            for line in meta.read_text("utf-8").splitlines():
                if line.startswith("cluster.id="):
                    return line.split("=", 1)[1].strip()
        return None

    # ------------------------------------------------------------------ addresses

    @property
    def schema_registry_url(self) -> str | None:
        """The schema registry every node serves (node 1's address), None without the extra."""
        n = self.nodes[min(self.nodes)]
        if n.registry_port is None:
            return None
        text = n.stdout_path.read_text(errors="replace") if n.stdout_path.exists() else ""
        printed = _REGISTRY.search(text)
        scheme = printed.group(1).partition(":")[0] if printed else "http"  # https behind TLS listeners
        return f"{scheme}://{n.host}:{n.registry_port}"

    @property
    def flight_urls(self) -> list[str]:
        """Every node's Arrow Flight server (config ``pylog.flight.listeners`` set to any grpc:// URL)."""
        return [u for n in self.nodes.values() if not n.removed and (u := n.flight_url) is not None]

    @property
    def metrics_urls(self) -> list[str]:
        """Every node's metrics listener (``/metrics``, ``/v1/status/live``, ``/v1/status/ready``)."""
        return [u for n in self.nodes.values() if not n.removed and (u := n.metrics_url) is not None]

    @property
    def bootstrap_servers(self) -> str:
        nodes = self.nodes.values()
        return ",".join(n.bootstrap for n in nodes if n.node_id not in self.controller_only and not n.removed)

    @property
    def voters(self) -> str:
        voters = [n for n in self.nodes.values() if n.node_id <= self.voter_count]
        return ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in voters)

    @property
    def controller_bootstrap(self) -> str:
        """The initial controllers' addresses (controller.quorum.bootstrap.servers)."""
        voters = [n for n in self.nodes.values() if n.node_id <= self.voter_count]
        return ",".join(f"{n.host}:{n.controller_port}" for n in voters)

    def node(self, node_id: int) -> LocalNode:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise ValueError(f"no node {node_id} in this cluster (nodes {sorted(self.nodes)})") from None

    # ------------------------------------------------------------------ lifecycle

    def properties(self, node: LocalNode) -> dict[str, str]:
        voter = node.node_id <= self.voter_count or node.node_id in self.controller_only
        listeners = f"PLAINTEXT://{node.host}:{node.broker_port}"
        if voter:
            listeners += f",CONTROLLER://{node.host}:{node.controller_port}"
        if node.node_id in self.controller_only:
            listeners = f"CONTROLLER://{node.host}:{node.controller_port}"
        roles = "broker,controller" if voter else "broker"
        if node.node_id in self.controller_only:
            roles = "controller"
        quorum = (
            {"controller.quorum.bootstrap.servers": self.controller_bootstrap}
            if self.dynamic_quorum
            else {"controller.quorum.voters": self.voters}
        )
        props = {
            "node.id": str(node.node_id),
            "process.roles": roles,
            **quorum,
            "listeners": listeners,
            "controller.listener.names": "CONTROLLER",
            "cluster.id": self.cluster_id,
            "log.dirs": str(node.data_dir),
        }
        if node.registry_port is not None:
            props["schema.registry.listeners"] = f"http://{node.host}:{node.registry_port}"
        if node.metrics_port is not None:
            props["pylog.metrics.listeners"] = f"http://{node.host}:{node.metrics_port}"
        props.update(self.config)
        if self.config.get("pylog.flight.listeners"):  # each node on a port of its own
            node.flight_port = node.flight_port or free_port(node.host)
            props["pylog.flight.listeners"] = f"grpc://{node.host}:{node.flight_port}"
        props.update(node.overrides)
        return props

    def start(self) -> LocalCluster:
        if self.dynamic_quorum:
            self._format_initial_controllers()
        for node in self.nodes.values():
            if not node.running and not node.removed:
                self._launch(node)
        for node in self.nodes.values():
            if not node.removed:
                self._wait_listening(node)
        return self

    def _write_properties(self, node: LocalNode) -> None:
        lines = [f"{k}={v}" for k, v in self.properties(node).items()]
        node.config_path.write_text("\n".join(lines) + "\n", "utf-8")

    def _format(self, node: LocalNode, *quorum_args: str) -> None:
        """``pylog storage format`` for a node whose data directory is not formatted yet."""
        if (node.data_dir / "meta.properties").exists():
            return
        self._write_properties(node)
        out = subprocess.run(
            [*_FORMAT, str(node.config_path), *quorum_args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f"formatting node {node.node_id} failed: {out.stderr.strip()}")

    def _format_initial_controllers(self) -> None:
        from pylog.cluster.voters import directory_id_str, new_directory_id

        initial = [n for n in self.nodes.values() if n.node_id <= self.voter_count]
        if all((n.data_dir / "meta.properties").exists() for n in initial):
            return
        spec = ",".join(
            f"{n.node_id}@{n.host}:{n.controller_port}:{directory_id_str(new_directory_id())}"
            for n in initial
        )
        for n in initial:
            self._format(n, "--initial-controllers", spec)

    def directory_id(self, node_id: int) -> str:
        """The directory id in the node's meta.properties (Kafka's text form)."""
        from pylog.broker.control.metadata import read_meta_properties

        return read_meta_properties(self.node(node_id).data_dir).get("directory.id", "")

    def add_controller(self, *, timeout_s: float = 60.0) -> int:
        """Start a new controller-only node that joins the running quorum: formatted with
        ``--no-initial-controllers``, it follows the log as an observer until caught up, then
        `pylog cluster add-controller` makes it a voter. Returns its node id."""
        if not self.dynamic_quorum:
            raise RuntimeError("a static quorum (controller.quorum.voters) cannot change (dynamic_quorum)")
        node_id = max(self.nodes) + 1
        h = self.nodes[min(self.nodes)].host
        node = self.nodes[node_id] = LocalNode(node_id, h, free_port(h), free_port(h), self.home)
        if self._metrics:
            node.metrics_port = free_port(h)
        self.controller_only.add(node_id)
        self._format(node, "--no-initial-controllers")
        self._launch(node)
        self._wait_listening(node)
        self._controller_command(
            "add-controller",
            "--config-file",
            str(node.config_path),
            timeout_s=timeout_s,
        )
        return node_id

    def remove_controller(
        self, node_id: int, directory_id: str | None = None, *, timeout_s: float = 60.0
    ) -> None:
        """`pylog cluster remove-controller` for the node's voter (its current directory id unless
        given). The node keeps running; a removed controller follows the log as an observer."""
        dir_text = directory_id or self.directory_id(node_id)
        self._controller_command(
            "remove-controller",
            "--controller-id",
            str(node_id),
            f"--controller-directory-id={dir_text}",  # one argument: an id may begin with "-"
            timeout_s=timeout_s,
        )

    def _controller_command(self, *args: str, timeout_s: float) -> str:
        servers = ",".join(
            n.bootstrap for n in self.nodes.values() if n.running and n.node_id not in self.controller_only
        )
        out = subprocess.run(
            [sys.executable, "-m", "pylog", "cluster", *args, "-b", servers, "--timeout", str(timeout_s)],
            capture_output=True,
            text=True,
            timeout=timeout_s + 30,
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f"pylog cluster {args[0]} failed: {out.stderr.strip()}")
        return out.stdout

    def _launch(self, node: LocalNode) -> None:
        self._write_properties(node)
        node.pid_path.unlink(missing_ok=True)
        node.stdout_path.write_bytes(b"")
        args = [
            sys.executable,
            "-m",
            "pylog.local",
            "broker",
            "--config-file",
            str(node.config_path),
            "--log-level",
            self.log_level,
        ]
        if self.command_prefix is not None:
            args = [*self.command_prefix(node.node_id), *args]
        env = dict(os.environ, PYTHONUNBUFFERED="1", **{_PID_FILE_ENV: str(node.pid_path)})
        node.starts += 1
        with open(node.stdout_path, "ab") as out, open(node.log_path, "ab") as err:
            err.write(f"\n===== start #{node.starts}\n".encode())
            err.flush()
            node.process = subprocess.Popen(
                args, stdout=out, stderr=err, stdin=subprocess.PIPE, start_new_session=True, env=env
            )

    def _wait_listening(self, node: LocalNode, timeout_s: float | None = None) -> None:
        deadline = CLOCK.monotonic_s() + (timeout_s or self.startup_timeout_s)
        while True:
            if _READY.search(node.stdout_path.read_text(errors="replace")):
                return
            if node.process is None or node.process.poll() is not None:
                code = None if node.process is None else node.process.returncode
                raise RuntimeError(
                    f"node {node.node_id} exited with code {code} before listening:\n{node.log_tail()}"
                )
            if CLOCK.monotonic_s() > deadline:
                raise TimeoutError(
                    f"node {node.node_id} did not listen within "
                    f"{timeout_s or self.startup_timeout_s}s:\n{node.log_tail()}"
                )
            time.sleep(0.05)

    def _signal(self, node_id: int, sig: signal.Signals) -> None:
        pid = self.node(node_id).pid
        if pid is None:
            raise RuntimeError(f"node {node_id} is not running")
        os.kill(pid, sig)

    def kill(self, node_id: int) -> None:
        """kill -9 the node's broker process (no shutdown of any kind)."""
        node = self.node(node_id)
        self._signal(node_id, signal.SIGKILL)
        if node.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.process.wait(timeout=10)

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the process keeps its sockets but answers nothing until `resume`."""
        self._signal(node_id, signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        self._signal(node_id, signal.SIGCONT)

    def stop_node(self, node_id: int, timeout_s: float = 30.0) -> None:
        """SIGTERM: a controlled shutdown (leadership moves away first), then exit."""
        self._stop([self.node(node_id)], timeout_s)

    def _stop(self, nodes: list[LocalNode], timeout_s: float) -> None:
        """SIGTERM every node at once (through its watchdog), wait, then kill -9 what is left."""
        procs = []
        for node in nodes:
            proc, node.process = node.process, None
            if proc is None:
                continue
            pid = _read_pid(node)
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)  # a paused node must run to stop
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            procs.append((proc, pid))
        deadline = CLOCK.monotonic_s() + timeout_s
        for proc, pid in procs:
            try:
                proc.wait(timeout=max(deadline - CLOCK.monotonic_s(), 0.1))
            except subprocess.TimeoutExpired:
                pass
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, 0)  # still there: the watchdog could not stop it
                    os.kill(pid, signal.SIGKILL)
            _terminate(proc, 5.0)

    def start_node(self, node_id: int) -> None:
        node = self.node(node_id)
        if node.running:
            return
        self._launch(node)
        self._wait_listening(node)

    def add_node(
        self, *, rack: str | None = None, config: Mapping[str, object] | None = None, timeout_s: float = 60.0
    ) -> int:
        """Start a new broker-only node (``process.roles=broker``) that joins the running cluster;
        returns its node id once it has registered and been unfenced."""
        from pylog.cluster_info import describe_cluster

        node_id = max(self.nodes) + 1
        host = self.nodes[min(self.nodes)].host
        node = LocalNode(node_id, host, free_port(host), free_port(host), self.home)
        if self._registry:
            node.registry_port = free_port(host)
        if self._metrics:
            node.metrics_port = free_port(host)
        if rack is not None:
            node.overrides["broker.rack"] = rack
        node.overrides.update({str(k): str(v) for k, v in (config or {}).items()})
        self.nodes[node_id] = node
        self._launch(node)
        self._wait_listening(node, timeout_s)
        deadline = CLOCK.monotonic_s() + timeout_s
        while True:
            with contextlib.suppress(OSError):
                if any(b[0] == node_id for b in describe_cluster(node.bootstrap, timeout_s=2.0).brokers):
                    return node_id
            if CLOCK.monotonic_s() > deadline:
                raise TimeoutError(f"node {node_id} did not register within {timeout_s}s:\n{node.log_tail()}")
            time.sleep(0.1)

    def remove_node(self, node_id: int, *, timeout_s: float = 300.0, throttle: int | None = None) -> None:
        """Move every replica off broker ``node_id`` (a reassignment), stop it and unregister it
        (UnregisterBroker), as ``pylog cluster remove-broker`` does. A node that is also a controller
        keeps its seat among the quorum's voters (stopped, like a failed one)."""
        from pylog.admin.moves import remove_broker

        node = self.node(node_id)
        others = ",".join(n.bootstrap for n in self.nodes.values() if n.node_id != node_id and n.running)
        remove_broker(others, node_id, stop=lambda: self.stop_node(node_id), timeout_s=timeout_s,
                      throttle=throttle)
        node.removed = True

    def restart(self, node_id: int, *, hard: bool = False) -> None:
        """Stop the node (SIGTERM, or kill -9 with ``hard``) and start it again on its data."""
        if self.node(node_id).running:
            self.kill(node_id) if hard else self.stop_node(node_id)
        self.node(node_id).process = None
        self.start_node(node_id)

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop(list(self.nodes.values()), timeout_s)

    def close(self) -> None:
        self.stop()
        if self._owns_data:
            shutil.rmtree(self.home, ignore_errors=True)
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ asking the cluster

    def controller_id(self, timeout_s: float = 10.0) -> int:
        """The active controller, as DescribeCluster on any running voter's controller listener
        reports it (brokers name any live broker)."""
        from pylog.cluster_info import describe_cluster

        deadline = CLOCK.monotonic_s() + timeout_s
        last: Exception | None = None
        while CLOCK.monotonic_s() < deadline:
            for node in self.nodes.values():
                controller = node.node_id <= self.voter_count or node.node_id in self.controller_only
                if not node.running or not controller:
                    continue
                try:
                    info = describe_cluster(node.controller_bootstrap, timeout_s=2.0, controllers=True)
                except OSError as exc:
                    last = exc
                    continue
                if info.controller_id >= 0 and self.node(info.controller_id).running:
                    return info.controller_id
            time.sleep(0.1)
        raise TimeoutError(f"no active controller within {timeout_s}s ({last})")

    def __repr__(self) -> str:
        up = [n.node_id for n in self.nodes.values() if n.running]
        servers = self.bootstrap_servers
        return f"LocalCluster(nodes={len(self.nodes)}, running={up}, bootstrap_servers={servers!r})"
