"""Share groups' `simple` assignor (Kafka's SimpleAssignor): an even split while members are fewer
than partitions, each partition shared by ``ceil(members / partitions)`` members beyond that,
current assignments kept where the balance allows, heterogeneous subscriptions topic by topic."""

from __future__ import annotations

import uuid
from collections import Counter

from pylog.groups.assignors import MemberSubscription, simple

T, U = uuid.UUID(int=1), uuid.UUID(int=2)


def sub(*topics: uuid.UUID, current: dict | None = None) -> MemberSubscription:
    return MemberSubscription(frozenset(topics), current or {})


def flat(target: dict) -> dict[str, set[tuple[uuid.UUID, int]]]:
    return {m: {(t, p) for t, ps in a.items() for p in ps} for m, a in target.items()}


def test_fewer_members_than_partitions_split_them() -> None:
    target = flat(simple({"a": sub(T), "b": sub(T)}, {T: 4}))
    assert len(target["a"]) == len(target["b"]) == 2
    assert target["a"] | target["b"] == {(T, p) for p in range(4)} and not target["a"] & target["b"]


def test_more_members_than_partitions_share_them() -> None:
    target = flat(simple({m: sub(T) for m in "abcde"}, {T: 2}))
    per_partition = Counter(tp for tps in target.values() for tp in tps)
    assert per_partition == {(T, 0): 3, (T, 1): 3}  # ceil(5 / 2) members each
    assert sorted(len(tps) for tps in target.values()) == [1, 1, 1, 1, 2]
    assert flat(simple({"a": sub(T), "b": sub(T)}, {T: 1})) == {"a": {(T, 0)}, "b": {(T, 0)}}


def test_a_joining_member_takes_partitions_only_from_the_others_surplus() -> None:
    alone = simple({"a": sub(T)}, {T: 4})
    assert flat(alone)["a"] == {(T, p) for p in range(4)}
    two = flat(simple({"a": sub(T, current=alone["a"]), "b": sub(T)}, {T: 4}))
    assert two["a"] < flat(alone)["a"] and len(two["a"]) == 2 and len(two["b"]) == 2
    again = simple({"a": sub(T, current={T: frozenset(p for _, p in two["a"])}), "b": sub(T)}, {T: 4})
    assert flat(again)["a"] == two["a"]  # stable: the same input keeps the same target


def test_heterogeneous_subscriptions_are_assigned_topic_by_topic() -> None:
    target = flat(simple({"a": sub(T), "b": sub(T, U)}, {T: 2, U: 3}))
    assert {tp for tp in target["b"] if tp[0] == U} == {(U, p) for p in range(3)}
    assert not {tp for tp in target["a"] if tp[0] == U}
    on_t = {tp for tps in target.values() for tp in tps if tp[0] == T}
    assert target["a"] & {(T, 0), (T, 1)} and len(on_t) == 2
