"""How much a follower asks for per partition, and that the leader's answer to a catching-up
follower carries several batches within the response budget while an idle partition's ask stays at
``replica.fetch.max.bytes`` (real partition logs, a manual clock, no sockets)."""

from __future__ import annotations

import uuid
from pathlib import Path

from records_util import make_batch

from pylog.broker.datapath.replica_fetcher import catching_up_fetch_bytes
from pylog.broker.datapath.replica_manager import FetchIsolation, FetchParams, FetchPosition, ReplicaManager
from pylog.clock import ManualClock
from pylog.config import BrokerConfig

MIB = 1 << 20


def test_a_lone_catching_up_partition_asks_for_the_whole_response_budget() -> None:
    assert catching_up_fetch_bytes(MIB, 10 * MIB, 1, 1) == 10 * MIB


def test_idle_partitions_keep_their_own_limit_and_the_rest_is_shared() -> None:
    # 4 idle partitions keep 1 MiB each; 2 catching up share the 6 MiB left
    assert catching_up_fetch_bytes(MIB, 10 * MIB, 6, 2) == 3 * MIB
    # the sum of the asks never exceeds the response budget when the limits allow it
    parts, busy = 7, 3
    assert catching_up_fetch_bytes(MIB, 10 * MIB, parts, busy) * busy + MIB * (parts - busy) <= 10 * MIB


def test_never_below_the_partition_limit() -> None:
    assert catching_up_fetch_bytes(MIB, 10 * MIB, 40, 20) == MIB  # many partitions: Kafka's limit
    assert catching_up_fetch_bytes(MIB, 10 * MIB, 3, 0) == MIB  # nobody catching up


def test_a_catching_up_follower_gets_several_batches_per_answer(tmp_path: Path) -> None:
    clock = ManualClock()
    replicas = ReplicaManager(BrokerConfig({"node.id": "1"}), tmp_path, clock.wall_ms, clock.monotonic_ms)
    try:
        part = replicas.ensure_partition("t", 0, uuid.uuid4(), {})
        part.become_leader(1, 3, 0, (1, 2), (1, 2), now_ms=0)
        batch = make_batch([b"v" * 1000] * 300)  # about 300 KB
        for _ in range(8):
            assert not replicas.append_records([("t", 0, batch)], acks=1, timeout_ms=0).results[0].error
        params = FetchParams(2, 0, 1, 10 * MIB, FetchIsolation.LOG_END)

        def answer(ask: int) -> int:
            got = replicas.fetch_messages(
                params,
                [("t", FetchPosition(0, 0, ask))],
                expand_isr=lambda _p, _r: None,
                stopping=lambda: False,
            )
            assert isinstance(got, list) and got[0].error == 0
            return got[0].size

        one_mib = answer(MIB)
        assert len(batch) * 3 <= one_mib <= MIB  # Kafka's default ask: whole batches within 1 MiB
        assert answer(catching_up_fetch_bytes(MIB, 10 * MIB, 1, 1)) == 8 * len(batch)  # all of them
        assert part.log_end_offset == 8 * 300
    finally:
        replicas.close()
