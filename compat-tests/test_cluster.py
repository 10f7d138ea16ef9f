"""Three pylog nodes as one cluster: the controller quorum, broker registration and fencing,
failover of the active controller (kill -9, SIGSTOP, a network partition), catch-up from a
snapshot, and every client seeing the cluster. Real processes, real sockets, real faults."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cluster_support import NetnsFabric, controller_seen, quorum_caught_up, wait_for, wait_until_fenced
from compat_clients import Rec, consume, kafkajs_admin, produce
from confluent_kafka.admin import AdminClient, NewTopic

from pylog.cluster_info import describe_cluster, describe_quorum
from pylog.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(240)

FAILOVER_S = 10.0


def create(bootstrap: str, *names: str, partitions: int = 1, rf: int = 1, timeout: float = 30.0) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, partitions, rf) for n in names], request_timeout=timeout)
    for f in futures.values():
        f.result(timeout)


def topics_through(bootstrap: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return {t for t in admin.list_topics(timeout=10).topics if not t.startswith("__")}


# ---------------------------------------------------------------------------------------------
# forming the cluster, and what clients see


def test_three_nodes_form_one_cluster_that_every_client_sees(
    cluster_factory: Any, kcat: str, kafkajs: Path
) -> None:
    cluster: LocalCluster = cluster_factory(3)
    bs = cluster.bootstrap_servers
    infos = [describe_cluster(n.bootstrap) for n in cluster.nodes.values()]
    assert len({i.cluster_id for i in infos}) == 1 and infos[0].cluster_id == cluster.cluster_id
    # a broker names itself as the controller (it forwards controller requests, as Kafka's KRaft
    # brokers do, and it is one the client reaches); the controllers' own listener names the
    # active one (KIP-919)
    assert [i.controller_id for i in infos] == list(cluster.nodes)
    assert all(sorted(b[0] for b in i.brokers) == [1, 2, 3] for i in infos)
    active = [describe_cluster(n.controller_bootstrap, controllers=True) for n in cluster.nodes.values()]
    controller = active[0].controller_id
    assert {i.controller_id for i in active} == {controller} and controller in cluster.nodes
    assert all(sorted(b[0] for b in i.brokers) == [1, 2, 3] for i in active)
    q = describe_quorum(bs)
    assert q.leader_id == controller and sorted(v.node_id for v in q.voters) == [1, 2, 3]

    # kafka-python
    from kafka.admin import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=bs)
    try:
        d = kp.describe_cluster()
        assert d["controller_id"] in cluster.nodes and len(d["brokers"]) == 3
    finally:
        kp.close()
    # confluent-kafka
    md = AdminClient({"bootstrap.servers": bs}).list_topics(timeout=10)
    assert md.controller_id in cluster.nodes and sorted(md.brokers) == [1, 2, 3]
    # aiokafka
    from aiokafka.admin import AIOKafkaAdminClient

    async def aio() -> Any:
        a = AIOKafkaAdminClient(bootstrap_servers=bs)
        await a.start()
        try:
            return await a.describe_cluster()
        finally:
            await a.close()

    d = asyncio.run(aio())
    assert d["controller_id"] in cluster.nodes and len(d["brokers"]) == 3
    # kcat
    out = subprocess.run(
        [kcat, "-b", bs, "-L"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    brokers = re.findall(r"broker (\d+) at \S+( \(controller\))?", out)
    assert sorted(int(b) for b, _ in brokers) == [1, 2, 3]
    assert len([int(b) for b, c in brokers if c]) == 1
    # kafkajs
    d = kafkajs_admin(cluster.node(1).bootstrap, "describeCluster")
    assert d["controller"] in cluster.nodes and len(d["brokers"]) == 3


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka", "aiokafka", "kcat", "kafkajs"])
def test_clients_keep_working_while_a_non_controller_node_restarts(
    cluster_factory: Any, client: str, kcat: str, kafkajs: Path
) -> None:
    cluster: LocalCluster = cluster_factory(3)
    topic = f"keep-{client}"
    create(cluster.bootstrap_servers, topic, partitions=3, rf=3)
    controller = cluster.controller_id()
    other = next(n for n in cluster.nodes if n != controller)
    cluster.stop_node(other)
    survivor = cluster.node(controller).bootstrap  # one address: every client finds the rest itself
    sent = [Rec(f"{client}-{i}".encode(), key=f"k{i}".encode()) for i in range(30)]
    produce(client, survivor, topic, sent)
    cluster.start_node(other)
    got = consume(client, survivor, topic, len(sent), partitions=(0, 1, 2))
    assert sorted(r.value for r in got) == sorted(r.value for r in sent)


# ---------------------------------------------------------------------------------------------
# losing the active controller


def test_kill_the_controller_a_new_one_takes_over_and_the_node_catches_up_from_a_snapshot(
    cluster_factory: Any,
) -> None:
    cluster: LocalCluster = cluster_factory(3, {"metadata.log.max.record.bytes.between.snapshots": "2048"})
    create(cluster.bootstrap_servers, "before")
    dead = cluster.controller_id()
    t0 = time.monotonic()
    cluster.kill(dead)
    survivor = next(n for n in cluster.nodes if n != dead)
    new = wait_for(
        lambda: controller_seen(cluster, through=survivor, not_=dead), FAILOVER_S, "a new controller"
    )
    elapsed = time.monotonic() - t0
    assert new != dead and elapsed < FAILOVER_S
    # until its session times out the dead node is still a live broker, which Metadata may name as
    # the controller (any live broker, as Kafka's KRaft brokers do): admin clients would wait for it
    through = cluster.node(survivor).bootstrap
    wait_until_fenced(through, dead)
    for node in cluster.nodes.values():
        if node.running:
            create(node.bootstrap, f"after-via-{node.node_id}")
    # enough metadata for the leader to snapshot and cut its log past what the dead node has
    create(cluster.node(survivor).bootstrap, *[f"bulk-{i}" for i in range(40)])
    wait_for(
        lambda: cluster.nodes[new].data_dir.joinpath("__cluster_metadata-0").glob("*.checkpoint"),
        10,
        "a metadata snapshot on the controller",
    )
    cluster.start_node(dead)
    wait_for(lambda: quorum_caught_up(cluster), 30, "the restarted voter caught up")
    want = {
        "before",
        *(f"after-via-{n}" for n in cluster.nodes if n != dead),
        *(f"bulk-{i}" for i in range(40)),
    }
    wait_for(lambda: want <= topics_through(cluster.node(dead).bootstrap), 30, "the restarted node's topics")
    assert "restored from a snapshot" in cluster.node(dead).log_path.read_text()


def test_pause_the_controller_past_the_election_timeout(cluster_factory: Any) -> None:
    cluster: LocalCluster = cluster_factory(3)
    create(cluster.bootstrap_servers, "kept")
    paused = cluster.controller_id()
    cluster.pause(paused)
    try:
        other = next(n for n in cluster.nodes if n != paused)
        wait_for(lambda: controller_seen(cluster, through=other, not_=paused), FAILOVER_S, "a new controller")
        # Metadata may name any live broker as the controller: wait until the paused one is fenced
        through = cluster.node(other).bootstrap
        wait_until_fenced(through, paused)
        create(through, "while-paused")
        time.sleep(2.0)  # well past the election timeout
    finally:
        cluster.resume(paused)

    def one_controller() -> bool:
        seen = {
            describe_cluster(n.controller_bootstrap, timeout_s=2.0, controllers=True).controller_id
            for n in cluster.nodes.values()
        }
        return len(seen) == 1 and -1 not in seen

    wait_for(one_controller, 20, "every node reporting the same controller")
    wait_for(lambda: quorum_caught_up(cluster), 20, "the quorum caught up")
    for node in cluster.nodes.values():
        wait_for(
            lambda n=node: {"kept", "while-paused"} <= topics_through(n.bootstrap), 20, "topics everywhere"
        )


def test_a_partition_isolating_the_controller(tmp_path: Path, cluster_factory: Any) -> None:
    with NetnsFabric(3) as net:
        cluster: LocalCluster = cluster_factory(cluster=net.cluster(tmp_path / "net"))
        create(cluster.bootstrap_servers, "before")
        isolated = cluster.controller_id()
        majority = [n for n in cluster.nodes if n != isolated]
        net.isolate(isolated)
        try:
            new = wait_for(
                lambda: controller_seen(cluster, through=majority[0], not_=isolated),
                FAILOVER_S,
                "majority elects",
            )
            assert new in majority
            # the isolated node stays a live broker until its session times out, and Metadata may
            # name any live broker as the controller: wait until the majority fenced it
            through = cluster.node(majority[1]).bootstrap
            wait_until_fenced(through, isolated)
            create(through, "majority-side")
            # the minority cannot commit: the isolated node answers nobody, and a request to it times out
            with pytest.raises(Exception):  # noqa: B017 - any failure: timeout or transport error
                create(cluster.node(isolated).bootstrap, "minority-side", timeout=3.0)
        finally:
            net.heal(isolated)
        wait_for(lambda: quorum_caught_up(cluster), 30, "the quorum converged after healing")

        def converged() -> bool:
            seen = [topics_through(n.bootstrap) for n in cluster.nodes.values()]
            return all(s == seen[0] for s in seen) and {"before", "majority-side"} <= seen[0]

        wait_for(converged, 30, "every node sees the same topics")
        assert "minority-side" not in topics_through(cluster.node(isolated).bootstrap)

        def one_controller_named() -> bool:
            ids = {
                describe_cluster(n.controller_bootstrap, controllers=True).controller_id
                for n in cluster.nodes.values()
            }
            return len(ids) == 1 and -1 not in ids

        # the rejoined node knows the active controller as soon as it has fetched from it
        wait_for(one_controller_named, 10, "every controller names the same active one")


# ---------------------------------------------------------------------------------------------
# bad configuration


def _start_node(config: dict[str, str], tmp: Path) -> subprocess.CompletedProcess[str]:
    props = tmp / "server.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
    return subprocess.run(
        [sys.executable, "-m", "pylog", "broker", "--config-file", str(props)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _kraft(tmp: Path, node_id: int = 1, **extra: str) -> dict[str, str]:
    return {
        "node.id": str(node_id),
        "process.roles": "broker,controller",
        "controller.quorum.voters": "1@127.0.0.1:29093,2@127.0.0.1:29094,3@127.0.0.1:29095",
        "listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{29092 + node_id}",
        "controller.listener.names": "CONTROLLER",
        "cluster.id": "bad-config-cluster",
        "log.dirs": str(tmp / "data"),
        **extra,
    }


def test_a_voter_list_without_this_node_stops_the_start(tmp_path: Path) -> None:
    out = _start_node(
        _kraft(tmp_path, node_id=4, listeners="PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"), tmp_path
    )
    assert out.returncode == 2
    assert "node.id 4 has the controller role but is not in controller.quorum.voters" in out.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("what", ["cluster.id", "node.id"])
def test_a_data_directory_of_another_cluster_or_node_stops_the_start(tmp_path: Path, what: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    other = "other-cluster" if what == "cluster.id" else "bad-config-cluster"
    other_node = 1 if what == "cluster.id" else 2
    meta = f"version=1\ncluster.id={other}\nnode.id={other_node}\n"
    (data / "meta.properties").write_text(meta)
    out = _start_node(_kraft(tmp_path), tmp_path)
    assert out.returncode == 2
    assert ("belongs to cluster other-cluster" if what == "cluster.id" else "belongs to node 2") in out.stderr
    assert sorted(p.name for p in data.iterdir() if p.name != ".lock") == ["meta.properties"]
    assert (data / "meta.properties").read_text() == meta


def test_a_second_node_with_a_running_nodes_id_stops(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: LocalCluster = cluster_factory(3)
    twin = dict(cluster.properties(cluster.node(2)))
    twin["log.dirs"] = str(tmp_path / "twin")
    twin["listeners"] = re.sub(r"PLAINTEXT://([^:,]+):\d+", r"PLAINTEXT://\1:0", twin["listeners"])
    out = _start_node(twin, tmp_path)
    assert out.returncode != 0
    assert "already in use" in out.stderr + out.stdout
    assert describe_cluster(cluster.node(2).bootstrap).controller_id in cluster.nodes


def test_cluster_settings_in_a_properties_file_with_kafka_names(tmp_path: Path) -> None:
    bad = _kraft(tmp_path, **{"controller.quorum.voters": "1@127.0.0.1"})
    out = _start_node(bad, tmp_path)
    assert out.returncode == 2 and "is not id@host:port" in out.stderr


def test_a_broker_only_node_follows_the_metadata_log_as_an_observer(cluster_factory: Any) -> None:
    cluster: LocalCluster = cluster_factory(
        3, {"metadata.log.max.record.bytes.between.snapshots": "2048"}, brokers=1
    )
    observer = cluster.node(4)
    assert "process.roles=broker\n" in observer.config_path.read_text()
    create(observer.bootstrap, "via-observer", partitions=4, rf=2)
    info = describe_cluster(observer.bootstrap)
    assert sorted(b[0] for b in info.brokers) == [1, 2, 3, 4] and info.controller_id in (1, 2, 3, 4)
    q = describe_quorum(observer.bootstrap)
    assert [o.node_id for o in q.observers] == [4] and sorted(v.node_id for v in q.voters) == [1, 2, 3]
    sent = [Rec(f"o-{i}".encode()) for i in range(40)]
    produce("confluent-kafka", observer.bootstrap, "via-observer", sent)
    got = consume("confluent-kafka", observer.bootstrap, "via-observer", len(sent), partitions=(0, 1, 2, 3))
    assert sorted(r.value for r in got) == sorted(r.value for r in sent)
    cluster.stop_node(4)
    create(cluster.node(1).bootstrap, *[f"while-away-{i}" for i in range(30)])
    cluster.start_node(4)
    want = {"via-observer", *(f"while-away-{i}" for i in range(30))}
    wait_for(lambda: want <= topics_through(observer.bootstrap), 30, "the observer's image after a restart")


def test_stopping_the_whole_cluster_stops_every_node_cleanly(cluster_factory: Any) -> None:
    """SIGTERM to every node at once (Ctrl-C on `pylog cluster start`): each node finishes its
    shutdown, though the controller quorum goes away under it, instead of waiting to be killed."""
    cluster: LocalCluster = cluster_factory(3)  # stopped at once: background tasks still starting
    began = time.monotonic()
    cluster.stop()
    print(f"the cluster stopped in {time.monotonic() - began:.1f}s")
    for node in cluster.nodes.values():
        assert "pylog broker stopped" in node.log_path.read_text(), node.log_tail()
