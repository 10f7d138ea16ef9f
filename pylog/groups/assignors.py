"""Server-side partition assignors of consumer groups (`group.consumer.assignors`).

An assignor maps every member to the partitions it should own, given each member's subscribed
topic ids, its current target (for stickiness) and each topic's partition count. Both are pure
and deterministic: the same input gives the same target on every broker and after a restart.

* `uniform` (Kafka's default): spreads all subscribed partitions so member counts differ by at
  most one among members with the same subscription, keeping each member's current partitions
  where the balance allows (a member joining takes partitions from the others; nobody else moves).
* `range`: per topic, the sorted subscribers get consecutive ranges (co-partitioned topics land
  together), the first `partitions % members` getting one more.

Share groups (KIP-932) use `simple` (Kafka's SimpleAssignor): members sharing a subscription split
its partitions evenly, each partition going to one member while there are no more members than
partitions, and to ``ceil(members / partitions)`` members beyond that; current assignments stay
where the balance allows. Members with different subscriptions are assigned topic by topic.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from pylog.groups.group_records import Assignment, normalise

TopicPartition = tuple[uuid.UUID, int]


@dataclass(frozen=True)
class MemberSubscription:
    topic_ids: frozenset[uuid.UUID]
    current: Assignment = field(default_factory=dict)
    is_new: bool = False  # joined since the last target: the last in line for an extra partition


def uniform(
    members: Mapping[str, MemberSubscription], partitions: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    if not members:
        return {}
    order = sorted(members)
    wanted = sorted(
        {
            (t, p)
            for m in members.values()
            for t in m.topic_ids
            if t in partitions
            for p in range(partitions[t])
        },
        key=lambda tp: (str(tp[0]), tp[1]),
    )
    eligible = {m: [tp for tp in wanted if tp[0] in members[m].topic_ids] for m in order}
    # Quotas: the partitions a member may receive, balanced over the members that can take each.
    quota = _quotas(order, eligible, len(wanted), members)
    owned: dict[str, list[TopicPartition]] = {m: [] for m in order}
    taken: set[TopicPartition] = set()
    for m in sorted(order, key=lambda m: -_count(members[m].current)):  # sticky first
        for t, ps in sorted(members[m].current.items(), key=lambda i: str(i[0])):
            if t not in members[m].topic_ids or t not in partitions:
                continue
            for p in sorted(ps):
                if p < partitions[t] and (t, p) not in taken and len(owned[m]) < quota[m]:
                    owned[m].append((t, p))
                    taken.add((t, p))
    for tp in wanted:
        if tp in taken:
            continue
        candidates = [m for m in order if tp[0] in members[m].topic_ids]
        if not candidates:
            continue
        under = [m for m in candidates if len(owned[m]) < quota[m]] or candidates
        best = min(under, key=lambda m: (len(owned[m]), order.index(m)))
        owned[best].append(tp)
        taken.add(tp)
    return {m: _as_assignment(owned[m]) for m in order}


def _quotas(
    order: list[str],
    eligible: dict[str, list[TopicPartition]],
    total: int,
    members: Mapping[str, MemberSubscription],
) -> dict[str, int]:
    """Each member's share: `total // takers`, and one more for `total % takers` of them, given
    first to members that already hold more than the base (they keep it: sticky), then to members
    that were there before this target over members that just joined."""
    takers = [m for m in order if eligible[m]]
    if not takers:
        return {m: 0 for m in order}
    base, extra = divmod(total, len(takers))
    held = {m: sum(1 for tp in eligible[m] if tp[1] in members[m].current.get(tp[0], ())) for m in takers}
    ranked = sorted(takers, key=lambda m: (held[m] <= base, members[m].is_new, order.index(m)))
    extra_for = set(ranked[:extra])
    quota = {m: 0 for m in order}
    for m in takers:
        quota[m] = min(len(eligible[m]), base + (1 if m in extra_for else 0))
    return quota


def range_(
    members: Mapping[str, MemberSubscription], partitions: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for t, n in partitions.items():
        subscribers = sorted(m for m, s in members.items() if t in s.topic_ids)
        if not subscribers:
            continue
        base, extra = divmod(n, len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            size = base + (1 if i < extra else 0)
            out[m][t] = set(range(start, start + size))
            start += size
    return {m: normalise(a) for m, a in out.items()}


ASSIGNORS = {"uniform": uniform, "range": range_}


def simple(
    members: Mapping[str, MemberSubscription], partitions: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    """The share groups' assignor (Kafka's SimpleAssignor); see the module docstring."""
    out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    groups: dict[frozenset[uuid.UUID], list[str]] = {}
    for m in sorted(members):
        groups.setdefault(frozenset(t for t in members[m].topic_ids if t in partitions), []).append(m)
    if len(groups) == 1:  # homogeneous: one balance over all the subscribed partitions
        units = [(next(iter(groups)), groups[next(iter(groups))])]
    else:  # heterogeneous: topic by topic, among that topic's subscribers
        units = [
            (frozenset([t]), [m for m in sorted(members) if t in members[m].topic_ids])
            for t in sorted(partitions, key=str)
        ]
    for topics, ids in units:
        tps = [(t, p) for t in sorted(topics, key=str) for p in range(partitions[t])]
        if not ids or not tps:
            continue
        current = {
            m: [(t, p) for t, ps in members[m].current.items() if t in topics for p in sorted(ps)]
            for m in ids
        }
        for m, got in _share_balance(ids, tps, current).items():
            for t, p in got:
                out[m].setdefault(t, set()).add(p)
    return {m: normalise(a) for m, a in out.items()}


def _share_balance(
    ids: list[str], tps: list[TopicPartition], current: Mapping[str, list[TopicPartition]]
) -> dict[str, list[TopicPartition]]:
    """Kafka's SimpleHomogeneousAssignmentBuilder over members `ids` and partitions `tps`: each
    partition wants `sharing` members, member i wants its share of the ``sharing * len(tps)``
    assignments; current ones are kept unless a member or a partition has too many."""
    sharing = -(-len(ids) // len(tps))
    total = sharing * len(tps)
    desired = [-(-total * (i + 1) // len(ids)) - -(-total * i // len(ids)) for i in range(len(ids))]
    valid = set(tps)
    held: dict[str, list[TopicPartition]] = {}
    holders: dict[TopicPartition, list[str]] = {tp: [] for tp in tps}
    for i, m in enumerate(ids):
        keep = [tp for tp in current.get(m, []) if tp in valid][: desired[i]]  # too many: drop the rest
        held[m] = keep
        for tp in keep:
            holders[tp].append(m)
    for tp in tps:  # shared by more members than wanted (members joined or left)
        for m in holders[tp][sharing:]:
            held[m].remove(tp)
        del holders[tp][sharing:]
    unfilled = [m for i, m in enumerate(ids) if len(held[m]) < desired[i]]
    want = dict(zip(ids, desired))
    k = 0
    for tp in tps:
        if not unfilled:
            break
        tried = 0
        while len(holders[tp]) < sharing and unfilled and tried < len(unfilled):
            k %= len(unfilled)
            m = unfilled[k]
            if m in holders[tp]:
                k += 1
                tried += 1
                continue
            held[m].append(tp)
            holders[tp].append(m)
            tried = 0
            if len(held[m]) >= want[m]:
                unfilled.pop(k)
            else:
                k += 1
    return held


def _count(a: Assignment) -> int:
    return sum(len(ps) for ps in a.values())


def _as_assignment(tps: list[TopicPartition]) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for t, p in tps:
        out.setdefault(t, set()).add(p)
    return normalise(out)
