"""KIP-392 preferred read replica rules (RackAwareReplicaSelector as Kafka's ReplicaManager uses it)."""

from __future__ import annotations

from pylog.replication.replica_selector import (
    NO_PREFERENCE,
    RACK_AWARE,
    ReplicaView,
    preferred_read_replica,
    rack_aware_select,
)

LEADER = ReplicaView(1, "r1", 100, 0)


def _f(broker: int, rack: str | None, leo: int = 100, since: int = 0) -> ReplicaView:
    return ReplicaView(broker, rack, leo, since)


def test_follower_in_the_clients_rack() -> None:
    followers = [(_f(2, "r2"), 0, True), (_f(3, "r3"), 0, True)]
    assert preferred_read_replica(RACK_AWARE, "r2", LEADER, followers, 50) == 2
    assert preferred_read_replica(RACK_AWARE, "r3", LEADER, followers, 50) == 3


def test_leader_in_the_clients_rack_is_no_preference() -> None:
    followers = [(_f(2, "r1"), 0, True)]
    assert preferred_read_replica(RACK_AWARE, "r1", LEADER, followers, 50) == NO_PREFERENCE


def test_no_rack_no_selector_or_no_replica_in_the_rack() -> None:
    followers = [(_f(2, "r2"), 0, True)]
    assert preferred_read_replica(RACK_AWARE, "", LEADER, followers, 50) == NO_PREFERENCE
    assert preferred_read_replica(RACK_AWARE, None, LEADER, followers, 50) == NO_PREFERENCE
    assert preferred_read_replica(None, "r2", LEADER, followers, 50) == NO_PREFERENCE
    assert preferred_read_replica(RACK_AWARE, "r9", LEADER, followers, 50) == NO_PREFERENCE


def test_out_of_sync_or_dead_followers_are_not_candidates() -> None:
    assert preferred_read_replica(RACK_AWARE, "r2", LEADER, [(_f(2, "r2"), 0, False)], 50) == NO_PREFERENCE


def test_a_follower_must_hold_the_fetch_offset() -> None:
    behind = [(_f(2, "r2", leo=40), 0, True)]
    assert preferred_read_replica(RACK_AWARE, "r2", LEADER, behind, 50) == NO_PREFERENCE
    assert preferred_read_replica(RACK_AWARE, "r2", LEADER, behind, 40) == 2
    trimmed = [(_f(2, "r2"), 60, True)]
    assert preferred_read_replica(RACK_AWARE, "r2", LEADER, trimmed, 50) == NO_PREFERENCE


def test_most_caught_up_in_the_rack_wins() -> None:
    candidates = [_f(2, "r2", leo=90), _f(3, "r2", leo=100, since=500), _f(4, "r2", leo=100, since=10)]
    assert rack_aware_select("r2", LEADER, candidates).broker_id == 4
