"""The controller's broker and partition rules, deterministically (time passed in): registration,
heartbeats and fencing, leader election from the ISR, controlled shutdown, unclean election,
AlterPartition epochs, preferred election."""

from __future__ import annotations

import random
import uuid

from pylog.protocol.errors import ErrorCode

from pylog.cluster.controller import NewTopic, QuorumController
from pylog.cluster.image import MetadataImage
from pylog.cluster.partition_change import check_new_isr, elect_leader, on_broker_unusable, preferred_election
from pylog.cluster.records import BrokerEndpoint, PartitionRecord
from pylog.cluster.replica_control import PREFERRED, UNCLEAN, IsrChange

SESSION_MS = 1000


def cluster(n: int = 3, unclean: bool = False) -> QuorumController:
    c = QuorumController(rng=random.Random(7), session_timeout_ms=SESSION_MS, unclean_leader_election=unclean)
    for b in range(1, n + 1):
        r = c.register_broker(b, uuid.UUID(int=b), [BrokerEndpoint("PLAINTEXT", "h", 9000 + b)], now_ms=0)
        assert r.response.error_code == 0
        hb = c.broker_heartbeat(
            b, r.response.broker_epoch, 10**9, want_fence=False, want_shutdown=False, now_ms=0
        )
        assert not hb.response.is_fenced
    return c


def topic(c: QuorumController, replicas: list[int]) -> uuid.UUID:
    res = c.create_topics([NewTopic("t", assignments={0: replicas})])
    assert res.response[0].error_code == 0
    tid = res.response[0].topic_id
    assert tid is not None
    return tid


def test_a_registered_broker_stays_fenced_until_it_has_caught_up() -> None:
    c = QuorumController(rng=random.Random(1), session_timeout_ms=SESSION_MS)
    r = c.register_broker(1, uuid.UUID(int=1), [], now_ms=0, log_end_offset=10).response
    hb = c.broker_heartbeat(1, r.broker_epoch, 5, want_fence=False, want_shutdown=False, now_ms=1).response
    assert hb.is_fenced and not hb.is_caught_up
    hb = c.broker_heartbeat(1, r.broker_epoch, 11, want_fence=False, want_shutdown=False, now_ms=2).response
    assert not hb.is_fenced and hb.is_caught_up


def test_a_second_incarnation_waits_for_the_first_ones_session() -> None:
    c = cluster(1)
    r = c.register_broker(1, uuid.UUID(int=99), [], now_ms=500).response
    assert r.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    c.fence_expired_brokers(now_ms=SESSION_MS + 1)
    r = c.register_broker(1, uuid.UUID(int=99), [], now_ms=SESSION_MS + 2).response
    assert r.error_code == 0


def test_a_stale_epoch_heartbeat_is_refused() -> None:
    c = cluster(1)
    hb = c.broker_heartbeat(1, 12345, 0, want_fence=False, want_shutdown=False, now_ms=1).response
    assert hb.error_code == ErrorCode.STALE_BROKER_EPOCH


def test_a_silent_broker_is_fenced_and_its_partitions_move_to_the_isr() -> None:
    c = cluster(3)
    tid = topic(c, [1, 2, 3])
    for b in (2, 3):
        c.broker_heartbeat(b, b, 10**9, want_fence=False, want_shutdown=False, now_ms=SESSION_MS - 1)
    fenced = c.fence_expired_brokers(now_ms=SESSION_MS + 1).response
    assert fenced == [1]
    p = c.image.partition(tid, 0)
    assert p is not None and p.leader == 2 and p.isr == (2, 3) and p.leader_epoch == 1


def test_the_last_isr_member_stays_and_the_partition_goes_offline_then_comes_back() -> None:
    c = cluster(3)
    tid = topic(c, [1])
    c.broker_heartbeat(1, 1, 0, want_fence=True, want_shutdown=False, now_ms=1)
    p = c.image.partition(tid, 0)
    assert p is not None and p.leader == -1 and p.isr == (1,)
    c.broker_heartbeat(1, 1, 10**9, want_fence=False, want_shutdown=False, now_ms=2)
    p = c.image.partition(tid, 0)
    assert p is not None and p.leader == 1


def test_unclean_election_only_when_enabled() -> None:
    for unclean, leader in ((False, -1), (True, 2)):
        c = cluster(3, unclean=unclean)
        tid = topic(c, [1, 2])
        # 2 fell out of the ISR earlier
        c.alter_partition(1, 1, [IsrChange(tid, 0, 0, (1,), 0)])
        c.broker_heartbeat(1, 1, 0, want_fence=True, want_shutdown=False, now_ms=1)
        p = c.image.partition(tid, 0)
        assert p is not None and p.leader == leader


def test_controlled_shutdown_moves_leadership_before_letting_go() -> None:
    c = cluster(3)
    tid = topic(c, [1, 2, 3])
    hb = c.broker_heartbeat(1, 1, 10**9, want_fence=False, want_shutdown=True, now_ms=1).response
    p = c.image.partition(tid, 0)
    assert p is not None and p.leader == 2 and 1 not in p.isr
    assert hb.should_shut_down and c.image.brokers[1].fenced


def test_alter_partition_checks_leader_and_partition_epochs() -> None:
    c = cluster(3)
    tid = topic(c, [1, 2, 3])
    err, (r,) = c.alter_partition(1, 1, [IsrChange(tid, 0, 0, (1, 2), 0)]).response
    assert err == 0 and r.error_code == 0 and r.isr == (1, 2) and r.partition_epoch == 1
    _, (r,) = c.alter_partition(1, 1, [IsrChange(tid, 0, 0, (1,), 0)]).response
    assert r.error_code == ErrorCode.INVALID_UPDATE_VERSION
    _, (r,) = c.alter_partition(1, 1, [IsrChange(tid, 0, 9, (1,), 1)]).response
    assert r.error_code == ErrorCode.FENCED_LEADER_EPOCH
    _, (r,) = c.alter_partition(2, 2, [IsrChange(tid, 0, 0, (2,), 1)]).response
    assert r.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    c.broker_heartbeat(3, 3, 0, want_fence=True, want_shutdown=False, now_ms=1)
    _, (r,) = c.alter_partition(1, 1, [IsrChange(tid, 0, 0, (1, 2, 3), 1)]).response
    assert r.error_code == ErrorCode.INELIGIBLE_REPLICA


def test_preferred_and_unclean_elections() -> None:
    c = cluster(3)
    tid = topic(c, [1, 2, 3])
    c.broker_heartbeat(1, 1, 0, want_fence=True, want_shutdown=False, now_ms=1)  # 2 leads now
    c.broker_heartbeat(1, 1, 10**9, want_fence=False, want_shutdown=False, now_ms=2)
    (r,) = c.elect_leaders(PREFERRED, [("t", 0)]).response
    assert r.error_code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE  # 1 is not back in the ISR
    c.alter_partition(2, 2, [IsrChange(tid, 0, 1, (1, 2, 3), c.image.partition(tid, 0).partition_epoch)])
    (r,) = c.elect_leaders(PREFERRED, [("t", 0)]).response
    assert r.error_code == 0 and c.image.partition(tid, 0).leader == 1
    (r,) = c.elect_leaders(UNCLEAN, [("t", 0)]).response
    assert r.error_code == ErrorCode.ELECTION_NOT_NEEDED


def test_pure_rules() -> None:
    p = PartitionRecord(uuid.UUID(int=1), 0, (1, 2, 3), (2, 3), 1, 4, 9)
    image = MetadataImage()
    from pylog.cluster.records import TopicRecord

    image.apply(TopicRecord("t", uuid.UUID(int=1)))
    image.apply(p)
    part = image.partition("t", 0)
    assert part is not None
    assert elect_leader(part, part.isr, {2, 3}) == 2
    change = on_broker_unusable(part, 1, {2, 3}, unclean=False)
    assert change is not None and change.leader == 2
    assert preferred_election(part, {1, 2, 3}) is None  # 1 is not in sync
    assert check_new_isr(part, 1, (2, 3), {1, 2, 3}) is not None  # must include the leader
    assert check_new_isr(part, 1, (1, 2), {1, 2, 3}) is None


def test_time_the_controller_was_not_listening_does_not_fence_anyone() -> None:
    """A controller whose loop was busy for several sessions (a large batch of metadata applied)
    gives every broker the session time it could not listen for: the heartbeat waiting behind that
    work is processed before anyone is fenced; a broker that stays silent is fenced afterwards."""
    c = cluster(2)
    assert c.fence_expired_brokers(now_ms=250).response == []
    assert c.fence_expired_brokers(now_ms=5 * SESSION_MS).response == []  # deaf since 250
    hb = c.broker_heartbeat(1, 1, 10**9, want_fence=False, want_shutdown=False, now_ms=5 * SESSION_MS + 10)
    assert not hb.response.is_fenced
    fenced: list[int] = []
    for now in range(5 * SESSION_MS + 250, 7 * SESSION_MS, 250):  # listening again, every 250 ms
        fenced += c.fence_expired_brokers(now_ms=now).response
        c.broker_heartbeat(1, 1, 10**9, want_fence=False, want_shutdown=False, now_ms=now)
    assert fenced == [2]
    assert not c.image.brokers[1].fenced and c.image.brokers[2].fenced
