"""Partition reassignment in the controller: target with adding / removing replicas, ISR-driven
completion, cancel, replace, Kafka's errors, UnregisterBroker; and a seeded property test."""

from __future__ import annotations

import os
import random
import uuid

import pytest
from pylog.protocol.errors import ErrorCode

from pylog.cluster.controller import NewTopic, QuorumController
from pylog.cluster.image import MetadataImage, PartitionImage
from pylog.cluster.records import BrokerEndpoint, decode_records, encode_records
from pylog.cluster.replica_control import IsrChange, ReassignmentRequest


def controller(brokers: int = 5, seed: int = 1) -> QuorumController:
    c = QuorumController(rng=random.Random(seed))
    for b in range(1, brokers + 1):
        c.register_broker(b, uuid.UUID(int=b), [BrokerEndpoint("PLAINTEXT", "localhost", 9090 + b)])
        hb = c.broker_heartbeat(b, b, 10**9, want_fence=False, want_shutdown=False, now_ms=0)
        assert not hb.response.is_fenced
    return c


def topic(c: QuorumController, assignment: dict[int, list[int]], name: str = "t") -> None:
    (r,) = c.create_topics([NewTopic(name, assignments=assignment)]).response
    assert r.error_code == ErrorCode.NONE


def part(c: QuorumController, index: int = 0, name: str = "t") -> PartitionImage:
    p = c.image.partition(name, index)
    assert p is not None
    return p


def move(c: QuorumController, target: list[int] | None, index: int = 0, name: str = "t") -> int:
    res = c.alter_partition_reassignments(
        [ReassignmentRequest(name, index, None if target is None else tuple(target))]
    )
    return res.response[0].error_code


def catch_up(c: QuorumController, replica: int, index: int = 0, name: str = "t") -> int:
    """The leader adds ``replica`` to the ISR, as its fetch loop would once it caught up."""
    p = part(c, index, name)
    new_isr = tuple(r for r in p.replicas if r in p.isr or r == replica)
    epoch = c.image.brokers[p.leader].broker_epoch
    change = IsrChange(p.topic_id, index, p.leader_epoch, new_isr, p.partition_epoch)
    res = c.alter_partition(p.leader, epoch, [change])
    return res.response[1][0].error_code


def test_a_move_records_target_adding_and_removing_then_completes_when_in_sync() -> None:
    c = controller()
    topic(c, {0: [1, 2, 3]})
    assert move(c, [2, 3, 4]) == ErrorCode.NONE
    p = part(c)
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((2, 3, 4, 1), (4,), (1,))
    assert p.isr == (1, 2, 3) and p.leader == 1  # the new replica is not in sync yet
    listed = c.list_partition_reassignments(None).response[1]
    assert [(r.topic, r.partition, r.replicas, r.adding_replicas, r.removing_replicas) for r in listed] == [
        ("t", 0, (2, 3, 4, 1), (4,), (1,))
    ]
    assert catch_up(c, 4) == ErrorCode.NONE
    p = part(c)
    assert p.replicas == (2, 3, 4) and not p.reassigning
    assert set(p.isr) == {2, 3, 4}
    assert p.leader == 2  # leadership left the removed replica for the target's first
    assert c.list_partition_reassignments(None).response[1] == []


def test_leader_staying_in_the_target_keeps_leading() -> None:
    c = controller()
    topic(c, {0: [1, 2, 3]})
    move(c, [1, 2, 4])
    epoch = part(c).leader_epoch
    catch_up(c, 4)
    p = part(c)
    assert p.replicas == (1, 2, 4) and p.leader == 1 and p.leader_epoch == epoch


def test_two_new_replicas_complete_only_when_both_are_in_sync() -> None:
    c = controller()
    topic(c, {0: [1, 2, 3]})
    move(c, [3, 4, 5])
    catch_up(c, 4)
    p = part(c)
    assert p.reassigning and 4 in p.isr and p.replicas == (3, 4, 5, 1, 2)
    catch_up(c, 5)
    p = part(c)
    assert p.replicas == (3, 4, 5) and set(p.isr) == {3, 4, 5} and p.leader == 3


def test_shrink_and_reorder_complete_at_once() -> None:
    c = controller()
    topic(c, {0: [1, 2, 3], 1: [1, 2, 3]})
    move(c, [2, 1], index=0)
    p = part(c, 0)
    assert p.replicas == (2, 1) and set(p.isr) == {1, 2} and not p.reassigning
    move(c, [3, 2, 1], index=1)
    p = part(c, 1)
    assert p.replicas == (3, 2, 1) and p.leader == 1 and not p.reassigning  # preferred election moves it


def test_cancel_reverts_the_adding_replicas() -> None:
    c = controller()
    topic(c, {0: [1, 2, 3]})
    move(c, [2, 3, 4])
    assert move(c, None) == ErrorCode.NONE
    p = part(c)
    assert set(p.replicas) == {1, 2, 3} and not p.reassigning and p.isr == (1, 2, 3) and p.leader == 1
    assert move(c, None) == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_cancel_after_a_new_replica_led_elects_an_old_one() -> None:
    c = controller()
    topic(c, {0: [1, 2, 3]})
    move(c, [4, 5, 1])
    catch_up(c, 4)
    fence(c, 1)  # the leader dies: 4 is in sync and first in replica order
    assert part(c).leader == 4
    move(c, None)
    p = part(c)
    assert set(p.replicas) == {1, 2, 3} and p.leader in (2, 3) and 4 not in p.isr


def test_a_new_target_replaces_the_one_in_flight() -> None:
    c = controller()
    topic(c, {0: [1, 2, 3]})
    move(c, [2, 3, 4])
    move(c, [1, 2, 5])
    p = part(c)
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((1, 2, 5, 3), (5,), (3,))
    catch_up(c, 5)
    p = part(c)
    assert p.replicas == (1, 2, 5) and not p.reassigning


def test_leader_killed_mid_move_then_move_completes() -> None:
    c = controller()
    topic(c, {0: [1, 2, 3]})
    move(c, [2, 3, 4])
    fence(c, 1)
    p = part(c)
    assert p.leader == 2 and 1 not in p.isr and p.reassigning
    catch_up(c, 4)
    p = part(c)
    assert p.replicas == (2, 3, 4) and p.leader == 2 and not p.reassigning


def fence(c: QuorumController, broker: int) -> None:
    b = c.image.brokers[broker]
    c.broker_heartbeat(broker, b.broker_epoch, 10**9, want_fence=True, want_shutdown=False, now_ms=0)
    assert c.image.brokers[broker].fenced


@pytest.mark.parametrize(
    ("name", "index", "target", "code", "message"),
    [
        ("t", 0, [1, 9], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "includes broker 9, but no such broker"),
        ("t", 0, [1, 2, 1], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "the broker 1 more than once"),
        ("t", 0, [], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "empty replica list"),
        ("nope", 0, [1, 2], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition nope-0"),
        ("t", 7, [1, 2], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t-7"),
    ],
)
def test_bad_plans_get_kafkas_errors_and_change_nothing(
    name: str, index: int, target: list[int], code: int, message: str
) -> None:
    c = controller()
    topic(c, {0: [1, 2, 3]})
    before = c.image.to_dict()
    res = c.alter_partition_reassignments([ReassignmentRequest(name, index, tuple(target))])
    (r,) = res.response
    assert r.error_code == code and message in (r.error_message or "")
    assert res.records == () and c.image.to_dict() == before


def test_one_bad_item_does_not_stop_the_others() -> None:
    c = controller()
    topic(c, {0: [1, 2, 3], 1: [1, 2, 3]})
    res = c.alter_partition_reassignments(
        [ReassignmentRequest("t", 0, (1, 9, 3)), ReassignmentRequest("t", 1, (2, 3, 4))]
    )
    assert [r.error_code for r in res.response] == [ErrorCode.INVALID_REPLICA_ASSIGNMENT, ErrorCode.NONE]
    assert not part(c, 0).reassigning and part(c, 1).reassigning


def test_replication_factor_change_refused_when_disallowed() -> None:
    c = controller()
    topic(c, {0: [1, 2, 3]})
    res = c.alter_partition_reassignments(
        [ReassignmentRequest("t", 0, (1, 2))], allow_replication_factor_change=False
    )
    assert res.response[0].error_code == ErrorCode.INVALID_REPLICATION_FACTOR and res.records == ()


def test_inactive_controller_answers_not_controller() -> None:
    c = controller()
    topic(c, {0: [1, 2, 3]})
    c.deactivate()
    assert move(c, [2, 3, 4]) == ErrorCode.NOT_CONTROLLER
    assert c.list_partition_reassignments(None).response[0] == ErrorCode.NOT_CONTROLLER
    assert c.unregister_broker(1).response.error_code == ErrorCode.NOT_CONTROLLER


def test_unregister_broker() -> None:
    c = controller()
    topic(c, {0: [1, 2, 3]})
    assert c.unregister_broker(9).response.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED
    res = c.unregister_broker(1)
    assert res.response.error_code == ErrorCode.NONE
    assert 1 not in c.image.brokers and 1 not in part(c).isr and part(c).leader == 2
    assert type(res.records[-1]).__name__ == "UnregisterBrokerRecord"
    assert move(c, [1, 2, 3]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT  # no longer registered


def test_records_and_snapshots_carry_the_reassignment() -> None:
    c = controller()
    topic(c, {0: [1, 2, 3]})
    res = c.alter_partition_reassignments([ReassignmentRequest("t", 0, (2, 3, 4))])
    assert decode_records(encode_records(res.records)) == list(res.records)
    copy = MetadataImage.from_records(
        c.image.to_records(), offset=1, next_producer_id=0, last_broker_epoch=c.image.last_broker_epoch
    )
    p = copy.partition("t", 0)
    assert p is not None and p.adding_replicas == (4,) and p.removing_replicas == (1,)


# ---------------------------------------------------------------------- property test


def check_invariants(p: PartitionImage) -> None:
    assert len(set(p.replicas)) == len(p.replicas)
    assert set(p.adding_replicas) <= set(p.replicas) and set(p.removing_replicas) <= set(p.replicas)
    assert not set(p.adding_replicas) & set(p.removing_replicas)
    assert p.isr and set(p.isr) <= set(p.replicas)
    assert p.leader == -1 or p.leader in p.isr
    if p.reassigning:
        target = p.target_replicas
        assert p.replicas[: len(target)] == target  # the target comes first, then the removed ones
        assert set(p.adding_replicas) <= set(target)


def test_reassignment_property_random_histories() -> None:
    seed = int(os.environ.get("PYLOG_TEST_SEED", random.randrange(2**32)))
    print(f"reassignment property test seed={seed}")
    rng = random.Random(seed)
    for _ in range(60):
        brokers = rng.randint(3, 6)
        c = controller(brokers, seed=rng.randrange(2**32))
        rf = rng.randint(1, 3)
        topic(c, {0: rng.sample(range(1, brokers + 1), rf)})
        last_target: tuple[int, ...] | None = None
        for _step in range(25):
            p = part(c)
            op = rng.random()
            if op < 0.3:
                target = tuple(rng.sample(range(1, brokers + 1), rng.randint(1, brokers)))
                assert move(c, list(target)) == ErrorCode.NONE
                last_target = target
            elif op < 0.4:
                code = move(c, None)
                assert code == (ErrorCode.NONE if p.reassigning else ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
                last_target = None
            elif op < 0.8 and p.leader != -1:
                behind = [r for r in p.replicas if r not in p.isr and not c.image.brokers[r].fenced]
                if behind:
                    catch_up(c, rng.choice(behind))
            else:
                b = rng.randint(1, brokers)
                reg = c.image.brokers[b]
                c.broker_heartbeat(
                    b, reg.broker_epoch, 10**9, want_fence=not reg.fenced, want_shutdown=False, now_ms=0
                )
            check_invariants(part(c))
        # heal: every broker up, every replica catches up: the last target is where it ends
        for b, reg in c.image.brokers.items():
            if reg.fenced:
                c.broker_heartbeat(
                    b, reg.broker_epoch, 10**9, want_fence=False, want_shutdown=False, now_ms=0
                )
        for _ in range(brokers + 1):
            p = part(c)
            if p.leader == -1:
                break
            for r in p.replicas:
                if r not in part(c).isr:
                    catch_up(c, r)
        p = part(c)
        check_invariants(p)
        if p.leader != -1:
            assert not p.reassigning, (seed, p)
            if last_target is not None:
                assert p.replicas == last_target, (seed, p, last_target)
