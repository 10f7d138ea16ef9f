"""Replication throttles (KIP-73) between real broker processes: a partition of some tens of MiB
moved to another broker with ``leader/follower.replication.throttled.rate`` at 2 MiB/s and the
moving replicas named in ``*.replication.throttled.replicas`` (as ``pylog cluster rebalance
--throttle`` sets them) moves at that rate, within 20%, with Kafka's default quota windows
(``replication.quota.window.num=11`` of a second, measured as Kafka's SimpleRate measures); the
same move without a throttle is the baseline."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from cluster_support import wait_for
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from pylog.admin.moves import execute
from pylog.local_cluster import LocalCluster
from pylog.sdk.cluster_admin import ClusterAdminSync

pytestmark = pytest.mark.timeout(300)

MiB = 1 << 20
RATE = 2 * MiB
SIZE = 40 * MiB
TOPIC = "bulk"


def _dir_bytes(path: Path) -> int:
    """The replica's log bytes (the `.wire` side files repeat the batches' bytes: not counted)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and f.suffix != ".wire")


def _fill(bootstrap: str, total: int, record: int = 256 * 1024) -> None:
    p = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "message.max.bytes": record + 4096}
    )
    payload = os.urandom(record)
    for _ in range(total // record):
        while True:
            try:
                p.produce(TOPIC, payload, partition=0)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(120) == 0, "records left unacknowledged"


def _move(cluster: LocalCluster, target: int, throttle: int | None) -> tuple[float, int]:
    with ClusterAdminSync(cluster.bootstrap_servers) as admin:
        took = execute(admin, {(TOPIC, 0): (target,)}, throttle=throttle, timeout_s=240, out=io.StringIO())
    path = cluster.node(target).data_dir / f"{TOPIC}-0"
    return took, _dir_bytes(path)


def test_a_throttled_move_keeps_to_the_rate() -> None:
    with LocalCluster(3) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[1]])])[TOPIC].result(30)
        _fill(cluster.bootstrap_servers, SIZE)

        free_s, free_bytes = _move(cluster, 2, None)
        throttled_s, throttled_bytes = _move(cluster, 3, RATE)
        free_rate, throttled_rate = free_bytes / free_s, throttled_bytes / throttled_s
        print(
            f"\nmove of {free_bytes / MiB:.1f} MiB: unthrottled {free_s:.1f}s ({free_rate / MiB:.1f} MiB/s); "
            f"throttled to {RATE / MiB:.0f} MiB/s: {throttled_s:.1f}s ({throttled_rate / MiB:.2f} MiB/s)"
        )
        assert throttled_bytes >= SIZE * 0.95
        assert 0.8 * RATE <= throttled_rate <= 1.2 * RATE
        assert free_rate > 1.5 * RATE, "the baseline must be faster than the throttle to show anything"

        # the move tool clears the throttle once done: every broker is back to no bound
        def cleared() -> bool:
            for b in (1, 2, 3):  # librdkafka asks one broker resource per call
                (future,) = admin.describe_configs([ConfigResource("BROKER", str(b))]).values()
                entry = future.result(30).get("leader.replication.throttled.rate")
                if entry is None or entry.value != str(2**63 - 1):
                    return False
            return True

        wait_for(cleared, 30, "the throttle rates cleared")

        # a list that is not partition:broker pairs is refused with Kafka's error, nothing stored
        set_op = AlterConfigOpType.SET
        entry = ConfigEntry("leader.replication.throttled.replicas", "0-1", incremental_operation=set_op)
        bad = ConfigResource("TOPIC", TOPIC, incremental_configs=[entry])
        (future,) = admin.incremental_alter_configs([bad]).values()
        with pytest.raises(KafkaException) as refused:
            future.result(30)
        assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
