"""``pylog cluster info``: the cluster id, its controller and brokers, and how many topics it holds."""

from __future__ import annotations

import argparse
from typing import Any

from pylog.admin.common import add_connection_options, admin_client, command, emit, print_table


def add_commands(sub: Any) -> None:
    """Add ``info`` to the ``pylog cluster`` subcommands."""
    p = sub.add_parser("info", help="cluster id, controller, brokers and topic count")
    add_connection_options(p)
    command(p, info)


def info(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        cluster = admin.describe_cluster()
        topics = admin.describe_topics()
    brokers = sorted(
        ({"node_id": b.get("broker_id", b.get("node_id")), "host": b["host"], "port": b["port"],
          "rack": b.get("rack")} for b in cluster.get("brokers", [])),
        key=lambda b: b["node_id"],
    )
    data = {
        "cluster_id": cluster.get("cluster_id"),
        "controller_id": cluster.get("controller_id"),
        "brokers": brokers,
        "topics": sum(1 for t in topics if not _internal(t)),
        "internal_topics": sum(1 for t in topics if _internal(t)),
    }
    emit(args, data, _render)
    return 0


def _internal(topic: dict[str, Any]) -> bool:
    return bool(topic.get("is_internal")) or str(topic.get("name", "")).startswith("__")


def _render(data: dict[str, Any]) -> None:
    print(f"CLUSTER     {data['cluster_id']}")
    print(f"CONTROLLER  {data['controller_id']}")
    print(f"TOPICS      {data['topics']} (+{data['internal_topics']} internal)")
    print()
    controller = data["controller_id"]
    rows = [[f"{b['node_id']}{'*' if b['node_id'] == controller else ''}", b["host"], b["port"], b["rack"]]
            for b in data["brokers"]]
    print_table(["BROKER", "HOST", "PORT", "RACK"], rows)
