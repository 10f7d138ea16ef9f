"""``pylog cluster info``: the cluster id, its controller and brokers, and how many topics it holds;
``pylog cluster start``: a local N-node cluster, one process per node, until Ctrl-C or ``pylog cluster
stop DIR``."""

from __future__ import annotations

import argparse
import threading
from typing import TYPE_CHECKING, Any

from pylog.admin.common import add_connection_options, admin_client, command, emit, print_table

if TYPE_CHECKING:
    from pylog.local_cluster import LocalCluster


def add_commands(sub: Any) -> None:
    """Add ``info`` and ``start`` to the ``pylog cluster`` subcommands."""
    p = sub.add_parser("info", help="cluster id, controller, brokers and topic count")
    add_connection_options(p)
    command(p, info)
    s = sub.add_parser("start", help="start a local cluster, one broker+controller process per node")
    s.add_argument("--nodes", type=int, default=3, help="how many nodes (default 3)")
    s.add_argument("--data-dir", default="./pylog-cluster", help="parent of the nodes' data directories")
    s.add_argument(
        "--base-port",
        type=int,
        default=9092,
        help="brokers listen on BASE.., controllers on the next N ports (0: free ports)",
    )
    s.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="for every node")
    s.set_defaults(run=start)
    st = sub.add_parser("stop", help="stop a local cluster started in the background (pylog cluster start &)")
    st.add_argument("data_dir", nargs="?", default="./pylog-cluster", metavar="DIR",
                    help="the cluster's --data-dir (default ./pylog-cluster)")
    st.add_argument("--timeout", type=float, default=30.0, help="seconds before SIGKILL (default 30)")
    st.set_defaults(run=stop_command)
    add_controller_commands(sub)


def add_controller_commands(sub: Any) -> None:
    """``quorum``, ``add-controller``, ``remove-controller`` (pylog.admin.controllers)."""
    from pylog.admin import controllers

    controllers.add_commands(sub)


def start(args: argparse.Namespace) -> int:
    import os
    import signal
    import sys

    from pylog.config import ConfigError, parse_key_values
    from pylog.local_cluster import LocalCluster
    from pylog.local_processes import CLUSTER_PID_FILE

    if args.nodes < 1:
        print("pylog: --nodes must be at least 1", file=sys.stderr)
        return 2
    try:
        config = parse_key_values(args.config)
    except ConfigError as exc:
        print(f"pylog: {exc}", file=sys.stderr)
        return 2
    cluster = LocalCluster(
        args.nodes, data_dir=args.data_dir, base_port=args.base_port, config=config, keep_data=True
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    pid_file = cluster.home / CLUSTER_PID_FILE  # for `pylog cluster stop DIR`
    pid_file.write_text(f"{os.getpid()}\n")
    try:
        return _serve(cluster, args.nodes, stop)
    finally:
        pid_file.unlink(missing_ok=True)


def _serve(cluster: LocalCluster, nodes: int, stop: threading.Event) -> int:
    import sys

    try:
        cluster.start()
    except (RuntimeError, TimeoutError, OSError) as exc:
        print(f"pylog: the cluster did not start: {exc}", file=sys.stderr)
        cluster.stop()
        return 1
    print(f"pylog cluster of {nodes} nodes, bootstrap servers {cluster.bootstrap_servers}", flush=True)
    print(f"  controller quorum (KRaft voters) {cluster.voters}")
    if cluster.schema_registry_url:
        print(f"  schema registry {cluster.schema_registry_url}")
    for node in cluster.nodes.values():  # the brokers' own process ids
        print(f"  node {node.node_id}: pid {node.pid}, broker {node.bootstrap}, "
              f"controller {node.host}:{node.controller_port}")
    print(f"  data and logs in {cluster.home}; Ctrl-C or `pylog cluster stop {cluster.home}` stops "
          "every node", flush=True)
    while not stop.wait(0.5):
        down = [n.node_id for n in cluster.nodes.values() if not n.running]
        if len(down) == len(cluster.nodes):
            print("pylog: every node exited; see the logs in " + str(cluster.home), file=sys.stderr)
            return 1
    print("stopping the cluster", flush=True)
    cluster.stop()
    return 0


def stop_command(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from pylog.local_processes import stop_cluster_dir

    try:
        stopped = stop_cluster_dir(Path(args.data_dir), args.timeout)
    except FileNotFoundError as exc:
        print(f"pylog: {exc}", file=sys.stderr)
        return 1
    print(f"stopped {len(stopped)} node(s)" + (f" (pids {', '.join(map(str, stopped))})" if stopped else ""))
    return 0


def info(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        cluster = admin.describe_cluster()
        topics = admin.describe_topics()
        controller = _active_controller(admin, cluster.get("controller_id"))
    brokers = sorted(
        (
            {
                "node_id": b.get("broker_id", b.get("node_id")),
                "host": b["host"],
                "port": b["port"],
                "rack": b.get("rack"),
            }
            for b in cluster.get("brokers", [])
        ),
        key=lambda b: b["node_id"],
    )
    data = {
        "cluster_id": cluster.get("cluster_id"),
        "controller_id": controller,
        "brokers": brokers,
        "topics": sum(1 for t in topics if not _internal(t)),
        "internal_topics": sum(1 for t in topics if _internal(t)),
    }
    emit(args, data, _render)
    return 0


def _active_controller(admin: Any, named: int | None) -> int | None:
    """The metadata quorum's leader: brokers of a KRaft cluster name any live broker as the
    controller (it forwards), so DescribeCluster alone does not tell which node leads."""
    try:
        quorum = admin.describe_metadata_quorum()
        return int(quorum["topics"][0]["partitions"][0]["leader_id"])
    except Exception:  # a cluster without a KRaft quorum to describe
        return named


def _internal(topic: dict[str, Any]) -> bool:
    return bool(topic.get("is_internal")) or str(topic.get("name", "")).startswith("__")


def _render(data: dict[str, Any]) -> None:
    print(f"CLUSTER     {data['cluster_id']}")
    print(f"CONTROLLER  {data['controller_id']}")
    print(f"TOPICS      {data['topics']} (+{data['internal_topics']} internal)")
    print()
    controller = data["controller_id"]
    rows = [
        [f"{b['node_id']}{'*' if b['node_id'] == controller else ''}", b["host"], b["port"], b["rack"]]
        for b in data["brokers"]
    ]
    print_table(["BROKER", "HOST", "PORT", "RACK"], rows)
