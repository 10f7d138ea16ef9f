"""A controller quorum that changes while the cluster serves (KIP-853), with real processes.

A three-node cluster finds its quorum through ``controller.quorum.bootstrap.servers`` (voters in
the metadata log). Under idempotent acks=all producers and a consumer group committing by hand,
a fourth controller joins (it catches up as an observer, then AddRaftVoter) and the active
controller is removed (RemoveRaftVoter: it resigns once the change commits and keeps following
the log as an observer, its broker serving on); the Jepsen-style checker then finds every
acknowledged record exactly once and in order. kafka-python's ``describe_metadata_quorum`` (a
real client's DescribeQuorum v2) shows the voters and observers with their directory ids.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from cluster_support import wait_for
from jepsen import History, Workload, check, read_all
from test_replication import (
    PARTITIONS,
    TOPIC,
    GroupConsumer,
    committed_offsets,
    create_replicated,
    wait_all_in_sync,
)

from pylog.cluster_info import describe_quorum
from pylog.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(300)


def voters_of(cluster: LocalCluster) -> dict[int, str]:
    q = describe_quorum(cluster.bootstrap_servers, timeout_s=2.0)
    return {v.node_id: v.directory_id for v in q.voters}


def test_a_controller_added_and_the_active_one_removed_under_load_loses_nothing(cluster_factory: Any) -> None:
    cluster: LocalCluster = cluster_factory(3, dynamic_quorum=True)
    assert set(voters_of(cluster)) == {1, 2, 3}
    create_replicated(cluster.bootstrap_servers)
    history = History()
    workload = Workload(cluster.bootstrap_servers, TOPIC, PARTITIONS, history).start()
    group = GroupConsumer(cluster.bootstrap_servers, TOPIC, history).start()
    time.sleep(3)
    added = cluster.add_controller()
    assert wait_for(lambda: set(voters_of(cluster)) == {1, 2, 3, added}, 30, "four voters")
    time.sleep(2)
    removed = cluster.controller_id()
    old_dir = cluster.directory_id(removed)
    cluster.remove_controller(removed)
    wait_for(lambda: set(voters_of(cluster)) == {1, 2, 3, added} - {removed}, 30, "three voters again")
    new_leader = wait_for(
        lambda: (c := cluster.controller_id()) != removed and c, 30, "another active controller"
    )
    q = describe_quorum(cluster.bootstrap_servers, timeout_s=2.0)
    assert q.leader_id == new_leader and removed not in {v.node_id for v in q.voters}

    def observers() -> dict[int, str]:
        return {o.node_id: o.directory_id for o in describe_quorum(cluster.bootstrap_servers).observers}

    # it follows the log as an observer: the new leader lists it once it has fetched from it
    wait_for(lambda: observers().get(removed) == old_dir, 15, f"{removed} listed as an observer")
    time.sleep(3)
    group.stop()
    workload.stop()
    wait_all_in_sync(cluster)
    read_all(cluster.bootstrap_servers, TOPIC, PARTITIONS, history)
    report = check(history)
    print(f"jepsen history (controller {added} added, active controller {removed} removed): {report}")
    assert report.ok, str(report)
    assert report.acknowledged > 1000, str(report)
    kept = committed_offsets(cluster.bootstrap_servers, TOPIC, "jepsen-group")
    for p, offset in group.committed.items():
        assert kept[p] >= offset, f"partition {p}: committed {offset}, the group now has {kept[p]}"
    wait_for(
        lambda: all(v.lag == 0 for v in describe_quorum(cluster.bootstrap_servers).voters),
        30,
        "voters caught up",
    )


def test_kafka_pythons_describe_metadata_quorum_shows_directory_ids(cluster_factory: Any) -> None:
    from kafka.admin import KafkaAdminClient

    cluster: LocalCluster = cluster_factory(3, dynamic_quorum=True)
    added = cluster.add_controller()
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:

        def described() -> dict[str, Any] | None:
            d = admin.describe_metadata_quorum()
            part = d["topics"][0]["partitions"][0]
            return d if len(part["current_voters"]) == 4 else None

        d = wait_for(described, 30, "four voters in DescribeQuorum")
        # a dynamic quorum runs kraft.version 1, finalized by the Raft log itself
        kraft = admin.describe_features()["kraft.version"]
        assert kraft["supported"] == (0, 1) and kraft["finalized"] == (1, 1), kraft
    finally:
        admin.close()
    part = d["topics"][0]["partitions"][0]
    dirs = {v["replica_id"]: v["replica_directory_id"] for v in part["current_voters"]}
    assert set(dirs) == {1, 2, 3, added}
    from pylog.cluster.voters import parse_directory_id

    for node_id, dir_id in dirs.items():  # kafka-python prints Kafka's Uuid text
        assert parse_directory_id(str(dir_id)) == parse_directory_id(cluster.directory_id(node_id))
    assert part["leader_id"] in dirs and part["high_watermark"] > 0
    nodes = {n["node_id"]: n["listeners"] for n in d["nodes"]}
    assert set(nodes) == set(dirs)
    assert nodes[added][0]["port"] == cluster.node(added).controller_port
    observers = {o["replica_id"] for o in part["observers"]}
    assert observers.isdisjoint(dirs)


def test_readmes_disk_replacement_procedure_runs_as_written(cluster_factory: Any) -> None:
    """README.md's procedure for a controller whose disk failed: its commands run one by one, the
    address, properties file and directory id put in (the old directory id read from the first
    command's output); ``pylog broker`` is the node's restart through LocalCluster."""
    import json
    import re
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from confluent_kafka import Producer

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    start = readme.index("## Changing the controller quorum")
    end = readme.index("\n## ", start + 10)
    (block,) = re.findall(r"^```sh\n(.*?)^```", readme[start:end], re.S | re.M)
    lines = [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    assert [line.split()[:3] for line in lines] == [
        ["pylog", "cluster", "quorum"],
        ["pylog", "storage", "format"],
        ["pylog", "broker", "--config-file"],
        ["pylog", "cluster", "remove-controller"],
        ["pylog", "cluster", "add-controller"],
    ]
    cluster: LocalCluster = cluster_factory(3, dynamic_quorum=True)
    create_replicated(cluster.bootstrap_servers, "kept", partitions=1)
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(50):
        p.produce("kept", str(i).encode(), partition=0)
    assert p.flush(30) == 0
    old_dir = cluster.directory_id(3)
    cluster.kill(3)
    shutil.rmtree(cluster.node(3).data_dir)  # the failed disk: a new, empty one in its place
    servers = ",".join(n.bootstrap for n in cluster.nodes.values() if n.running)
    env_path = f"{Path(sys.executable).parent}:{__import__('os').environ.get('PATH', '')}"
    found_dir = None
    for line in lines:
        line = line.replace("10.0.0.1:9092", servers).replace(
            "node-3.properties", str(cluster.node(3).config_path)
        )
        if found_dir is not None:
            line = line.replace("OLD-DIRECTORY-ID", found_dir)
        if line.startswith("pylog broker"):
            cluster.start_node(3)
            continue
        out = subprocess.run(
            ["bash", "-c", line],
            capture_output=True,
            text=True,
            timeout=120,
            env={"PATH": env_path},
            check=False,
        )
        assert out.returncode == 0, f"{line}\n{out.stdout}\n{out.stderr}"
        if line.startswith("pylog cluster quorum"):
            replicas = json.loads(out.stdout)["replicas"]
            found_dir = next(
                r["directory_id"] for r in replicas if r["node_id"] == 3 and r["role"] != "observer"
            )
            assert found_dir == old_dir
    new_dir = cluster.directory_id(3)
    assert new_dir and new_dir != old_dir
    voters = wait_for(lambda: v if len(v := voters_of(cluster)) == 3 else None, 30, "three voters")
    assert voters == {1: cluster.directory_id(1), 2: cluster.directory_id(2), 3: new_dir}
    wait_for(
        lambda: all(v.lag == 0 for v in describe_quorum(cluster.bootstrap_servers).voters), 30, "caught up"
    )
    history = History()
    read_all(cluster.bootstrap_servers, "kept", 1, history)
    assert [v for _, v in history.log[0]] == [str(i).encode() for i in range(50)]
