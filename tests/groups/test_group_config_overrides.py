"""A group's GROUP config overrides (KIP-848 / KIP-932), as the consumer and share group
coordinators read them: session timeouts and heartbeat intervals per group, deterministic."""

from __future__ import annotations

import random
import uuid

from pylog.groups.consumer_coordinator import ConsumerGroupConfig, ConsumerGroupCoordinator, Heartbeat
from pylog.groups.share_group_coordinator import ShareGroupConfig, ShareGroupCoordinator

T = uuid.UUID(int=7)
TOPICS = {"t": (T, 2)}
OVERRIDES = {
    "fast": {
        "consumer.session.timeout.ms": "2000",
        "consumer.heartbeat.interval.ms": "500",
        "share.session.timeout.ms": "3000",
        "share.heartbeat.interval.ms": "700",
    }
}


def consumer_join(c: ConsumerGroupCoordinator, group: str) -> dict:
    hb = Heartbeat(group, "", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["t"])
    return c.heartbeat(hb, TOPICS, now_ms=0).response


def test_consumer_groups_take_their_own_session_timeout_and_heartbeat_interval() -> None:
    cfg = ConsumerGroupConfig(
        session_timeout_ms=10_000, heartbeat_interval_ms=1000, offsets_topic_num_partitions=1
    )
    c = ConsumerGroupCoordinator(cfg, rng=random.Random(1), group_configs=lambda g: OVERRIDES.get(g, {}))
    fast, slow = consumer_join(c, "fast"), consumer_join(c, "slow")
    assert fast["heartbeat_interval_ms"] == 500 and slow["heartbeat_interval_ms"] == 1000
    c.tick(2_001)  # past the fast group's session timeout only
    assert fast["member_id"] not in c.group("fast").members
    assert slow["member_id"] in c.group("slow").members
    c.tick(10_001)
    assert slow["member_id"] not in c.group("slow").members


def test_share_groups_take_their_own_session_timeout_and_heartbeat_interval() -> None:
    cfg = ShareGroupConfig(
        session_timeout_ms=10_000, heartbeat_interval_ms=1000, offsets_topic_num_partitions=1
    )
    c = ShareGroupCoordinator(cfg, rng=random.Random(1), group_configs=lambda g: OVERRIDES.get(g, {}))
    fast = c.heartbeat("fast", "", 0, ["t"], TOPICS, now_ms=0).response
    slow = c.heartbeat("slow", "", 0, ["t"], TOPICS, now_ms=0).response
    assert fast["heartbeat_interval_ms"] == 700 and slow["heartbeat_interval_ms"] == 1000
    c.tick(3_001)
    assert not c.is_member("fast", fast["member_id"]) and c.is_member("slow", slow["member_id"])
