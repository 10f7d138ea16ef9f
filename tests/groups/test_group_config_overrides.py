"""A group's GROUP config overrides (KIP-848 / KIP-932), as the group coordinator reads them:
session timeouts and heartbeat intervals per group, deterministic."""

from __future__ import annotations

import random
import uuid

from group_support import load_all

from pylog.groups import GroupConfig, GroupCoordinator
from pylog.groups.consumer import ConsumerGroupConfig, Heartbeat
from pylog.groups.share import ShareGroupConfig, ShareHeartbeat

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


def coordinator() -> GroupCoordinator:
    c = GroupCoordinator(
        GroupConfig(offsets_topic_num_partitions=1),
        rng=random.Random(1),
        consumer=ConsumerGroupConfig(session_timeout_ms=10_000, heartbeat_interval_ms=1000),
        share=ShareGroupConfig(session_timeout_ms=10_000, heartbeat_interval_ms=1000),
    )
    c.set_group_configs(lambda g: OVERRIDES.get(g, {}))
    return load_all(c, [], now_ms=0)


def test_consumer_groups_take_their_own_session_timeout_and_heartbeat_interval() -> None:
    c = coordinator()

    def join(group: str) -> dict:
        hb = Heartbeat(group, "", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["t"])
        return c.consumer_group_heartbeat(hb, TOPICS, now_ms=0).response

    fast, slow = join("fast"), join("slow")
    assert fast["heartbeat_interval_ms"] == 500 and slow["heartbeat_interval_ms"] == 1000
    c.tick(2_001)  # past the fast group's session timeout only
    assert fast["member_id"] not in c.consumer_group("fast").members
    assert slow["member_id"] in c.consumer_group("slow").members
    c.tick(10_001)
    assert slow["member_id"] not in c.consumer_group("slow").members


def test_share_groups_take_their_own_session_timeout_and_heartbeat_interval() -> None:
    c = coordinator()

    def join(group: str) -> dict:
        return c.share_group_heartbeat(ShareHeartbeat(group, "", 0, ["t"]), TOPICS, now_ms=0).response

    fast, slow = join("fast"), join("slow")
    assert fast["heartbeat_interval_ms"] == 700 and slow["heartbeat_interval_ms"] == 1000
    c.tick(3_001)
    assert fast["member_id"] not in c.share_group("fast").members
    assert slow["member_id"] in c.share_group("slow").members
