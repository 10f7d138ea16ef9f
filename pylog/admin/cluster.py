"""``pylog cluster info``: the cluster id, its controller and brokers (racks, replica and leader
counts), and how many topics it holds; ``pylog cluster describe``: the same with under-replicated
and offline partitions and the reassignments in flight; ``pylog cluster rebalance``: even out
replicas and leaders (a plan, run with ``--execute``); ``pylog cluster remove-broker N``: move
everything off a broker and unregister it; ``pylog cluster log-dirs``: each broker's log directories
with their partitions and free space (DescribeLogDirs); ``pylog cluster start``: a local N-node cluster, one
process per node, until Ctrl-C or ``pylog cluster stop DIR``."""

from __future__ import annotations

import argparse
import threading
from typing import TYPE_CHECKING, Any

from pylog.admin.common import (
    AdminError,
    add_connection_options,
    admin_client,
    cluster_admin,
    command,
    emit,
    print_table,
)

if TYPE_CHECKING:
    from pylog.local_cluster import LocalCluster


def add_commands(sub: Any) -> None:
    """Add the ``pylog cluster`` subcommands."""
    p = sub.add_parser("info", help="cluster id, controller, brokers (racks, replicas, leaders), topic count")
    add_connection_options(p)
    command(p, info)
    d = sub.add_parser("describe", help="brokers, under-replicated and offline partitions, moves in flight")
    add_connection_options(d)
    command(d, describe)
    r = sub.add_parser("rebalance", help="even out replicas and leaders per broker (and rack)")
    add_connection_options(r, formats=())
    r.add_argument("--execute", action="store_true", help="run the plan (default: only print it)")
    r.add_argument("--throttle", type=_rate, default=None, metavar="BYTES/S",
                   help="replication throttle while moving (Kafka's *.replication.throttled.rate)")
    r.add_argument("--topic", action="append", default=None, metavar="NAME", help="only these topics")
    r.add_argument("--output-plan", default=None, metavar="FILE",
                   help="also write the plan as Kafka's reassignment JSON")
    command(r, rebalance)
    ld = sub.add_parser("log-dirs", help="each broker's log directories: partitions, bytes, free space")
    add_connection_options(ld)
    ld.add_argument("--broker", type=int, action="append", default=None, metavar="N",
                    help="only these brokers")
    ld.add_argument("--topic", action="append", default=None, metavar="NAME", help="only these topics")
    ld.add_argument("--partitions", action="store_true", help="one row per partition replica")
    command(ld, log_dirs)
    rb = sub.add_parser("remove-broker", help="move every replica off a broker, then unregister it")
    add_connection_options(rb, formats=())
    rb.add_argument("broker", type=int, help="the node id")
    rb.add_argument("--throttle", type=_rate, default=None, metavar="BYTES/S",
                    help="replication throttle while moving")
    rb.add_argument("--dry-run", action="store_true", help="only print the moves")
    command(rb, remove_broker)
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
        metrics = f", metrics {node.metrics_url}/metrics" if node.metrics_url else ""
        print(f"  node {node.node_id}: pid {node.pid}, broker {node.bootstrap}, "
              f"controller {node.host}:{node.controller_port}{metrics}")
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


def _rate(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected bytes per second, got {value!r}") from None
    if n <= 0:
        raise argparse.ArgumentTypeError("the throttle must be a positive number of bytes per second")
    return n


def info(args: argparse.Namespace) -> int:
    with cluster_admin(args) as admin:
        data = _counts(admin.state())
    lag = _upload_lag(args)
    emit(args, {k: v for k, v in data.items() if k not in ("under_replicated", "offline", "reassignments")}
         | {"under_replicated": len(data["under_replicated"]), "offline": len(data["offline"]),
            "reassignments": len(data["reassignments"])} | ({"remote_tier": lag} if lag else {}), _render)
    return 0


def _upload_lag(args: argparse.Namespace) -> dict[str, int] | None:
    """Offsets of topics with remote.storage.enable not yet in the store (high watermark minus one
    past the latest tiered offset, summed over partitions); None when no topic is tiered."""
    from pylog.sdk.tiers import partition_tiers, tiered

    async def go(a: Any) -> dict[str, int] | None:
        info = await a.cluster(None)
        names = [t for t in info.topics if t not in info.internal_topics and not t.startswith("__")]
        tiered_topics = [t for t in names if await tiered(a, t)]
        if not tiered_topics:
            return None
        lags: list[int] = []
        for t in tiered_topics:
            rows = await partition_tiers(a, t, info.topics[t])
            lags += [r.upload_lag for r in rows.values() if r.upload_lag is not None]
        return {"tiered_topics": len(tiered_topics), "partitions": len(lags),
                "upload_lag": sum(lags), "max_partition_upload_lag": max(lags, default=0)}

    with admin_client(args) as admin:
        return admin.run(go)


def describe(args: argparse.Namespace) -> int:
    with cluster_admin(args) as admin:
        data = _counts(admin.state())
    emit(args, data, _render_describe)
    return 0


def _render(data: dict[str, Any]) -> None:
    print(f"CLUSTER     {data['cluster_id']}")
    print(f"CONTROLLER  {data['controller_id']}")
    topics = f"{data['topics']} (+{data['internal_topics']} internal)"
    print(f"TOPICS      {topics}, {data['partitions']} partitions")
    urp, offline, moving = (len(v) if isinstance(v, list) else v
                            for v in (data["under_replicated"], data["offline"], data["reassignments"]))
    print(f"HEALTH      {urp} under-replicated, {offline} offline, {moving} reassignment(s) in progress")
    if tier := data.get("remote_tier"):
        print(f"REMOTE TIER {tier['tiered_topics']} tiered topic(s), upload lag {tier['upload_lag']} offsets "
              f"({tier['max_partition_upload_lag']} at most in one of {tier['partitions']} partitions)")
    print()
    controller = data["controller_id"]
    rows = [
        [f"{b['node_id']}{'*' if b['node_id'] == controller else ''}", b["host"], b["port"], b["rack"],
         b["replicas"], b["leaders"]]
        for b in data["brokers"]
    ]
    print_table(["BROKER", "HOST", "PORT", "RACK", "REPLICAS", "LEADERS"], rows)


def _render_describe(data: dict[str, Any]) -> None:
    _render(data)
    for title, key in (("UNDER-REPLICATED", "under_replicated"), ("OFFLINE", "offline"),
                       ("REASSIGNMENTS IN PROGRESS", "reassignments")):
        items = data[key]
        if not items:
            continue
        print()
        print(title)
        print_table(["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "ADDING", "REMOVING"],
                    [[p["topic"], p["partition"], p["leader"], p["replicas"], p["isr"],
                      p["adding_replicas"] or None, p["removing_replicas"] or None] for p in items])


def log_dirs(args: argparse.Namespace) -> int:
    with cluster_admin(args) as admin:
        dirs = admin.describe_log_dirs(args.broker, args.topic)
    data = [
        {"broker": d.broker, "log_dir": d.path, "error": d.error, "total_bytes": d.total_bytes,
         "usable_bytes": d.usable_bytes, "size_bytes": d.size_bytes,
         "partitions": [{"topic": t, "partition": p, "size": size, "offset_lag": lag, "future": future}
                        for future, parts in ((False, d.partitions), (True, d.future))
                        for (t, p), (size, lag) in sorted(parts.items())]}
        for d in dirs
    ]
    emit(args, data, _render_partitions if args.partitions else _render_log_dirs)
    return 0


def _render_log_dirs(data: list[dict[str, Any]]) -> None:
    print_table(["BROKER", "LOG-DIR", "PARTITIONS", "MOVING-IN", "BYTES", "USABLE", "TOTAL", "ERROR"],
                [[d["broker"], d["log_dir"], sum(not p["future"] for p in d["partitions"]),
                  sum(p["future"] for p in d["partitions"]), d["size_bytes"], d["usable_bytes"],
                  d["total_bytes"], _error_name(d["error"])] for d in data])


def _render_partitions(data: list[dict[str, Any]]) -> None:
    print_table(["BROKER", "LOG-DIR", "TOPIC", "PARTITION", "BYTES", "OFFSET-LAG", "FUTURE"],
                [[d["broker"], d["log_dir"], p["topic"], p["partition"], p["size"], p["offset_lag"],
                  "yes" if p["future"] else None] for d in data for p in d["partitions"]])


def _error_name(code: int) -> str | None:
    from pylog.protocol.errors import ErrorCode

    return ErrorCode.of(code).name if code else None


def rebalance(args: argparse.Namespace) -> int:
    from pylog.admin.moves import cluster_plan, execute, print_moves, reassignment_json

    with cluster_admin(args) as admin:
        state = admin.state()
        if state.reassignments:
            raise AdminError(f"{len(state.reassignments)} reassignment(s) already in progress; "
                             "wait for them (pylog cluster describe) or cancel them first")
        p = cluster_plan(state, topics=set(args.topic) if args.topic else None)
        print_moves(p)
        if args.output_plan:
            with open(args.output_plan, "w", encoding="utf-8") as f:
                f.write(reassignment_json(p.moves) + "\n")
        if not args.execute:
            if p.moves:
                print("(a plan only: run again with --execute to move)")
            return 0
        took = execute(admin, p.moves, throttle=args.throttle, timeout_s=max(args.timeout, 3600.0))
        print(f"rebalance done in {took:.1f}s")
        _render(_counts(admin.state()))
    return 0


def _counts(state: Any) -> dict[str, Any]:
    data = state.to_dict()
    data["topics"] = len({t for t, _ in state.partitions} - state.internal_topics)
    data["internal_topics"] = len(state.internal_topics)
    return data


def remove_broker(args: argparse.Namespace) -> int:
    from pylog.admin.common import client_security
    from pylog.admin.moves import cluster_plan, print_moves, remove_broker

    if args.dry_run:
        with cluster_admin(args) as admin:
            print_moves(cluster_plan(admin.state(), remove=(args.broker,)))
        return 0
    remove_broker(args.bootstrap_servers, args.broker, throttle=args.throttle,
                  security=client_security(args), timeout_s=max(args.timeout, 3600.0))
    return 0
