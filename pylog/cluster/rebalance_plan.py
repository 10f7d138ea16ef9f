"""Plans that even out a cluster: which partitions move to which replicas (sans-IO).

Theory of operation
-------------------
A plan starts from the current assignment and changes as little as it can, in four passes:

1. *Evacuate*: a replica on a broker that is leaving (``remove``) or no longer registered is
   replaced, in the same position of the replica list, by the least-loaded eligible broker.
2. *Racks*: a partition with two replicas in one rack while some rack holds none of its
   replicas has one of them moved into such a rack (``broker.rack``, as placement does).
3. *Replicas*: while the most- and least-loaded brokers differ by more than one replica, one
   replica moves from the former to the latter, never onto a broker that already holds the
   partition and never lowering the number of racks the partition spans.
4. *Leaders*: the preferred leader is the first replica; while preferred-leader counts differ
   by more than one, a partition swaps the positions of an over-loaded first replica and an
   under-loaded one (a reorder moves no data; a preferred-leader election then moves leadership).

A broker keeps its position in the replica list of a partition it stays in, so a partition only
moves data to the brokers it gains. A removal that would lose data is refused: a partition whose
only in-sync replicas are on leaving brokers that are down has no copy left to move.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass

TopicPartition = tuple[str, int]
Assignment = Mapping[TopicPartition, tuple[int, ...]]


class PlanError(ValueError):
    """A plan that cannot be made without losing data or replicas."""


@dataclass(frozen=True)
class Plan:
    """``moves``: the partitions whose replica list changes, with their target lists."""

    moves: dict[TopicPartition, tuple[int, ...]]
    current: dict[TopicPartition, tuple[int, ...]]

    @property
    def target(self) -> dict[TopicPartition, tuple[int, ...]]:
        return {**self.current, **self.moves}

    def replica_moves(self) -> int:
        """How many replicas get copied to a broker that does not hold them now."""
        return sum(len(set(t) - set(self.current[tp])) for tp, t in self.moves.items())


def replica_counts(assignment: Assignment, brokers: Collection[int]) -> Counter[int]:
    counts: Counter[int] = Counter(dict.fromkeys(brokers, 0))
    for replicas in assignment.values():
        counts.update(replicas)
    return counts


def leader_counts(assignment: Assignment, brokers: Collection[int]) -> Counter[int]:
    counts: Counter[int] = Counter(dict.fromkeys(brokers, 0))
    counts.update(r[0] for r in assignment.values() if r)
    return counts


def plan(
    assignment: Assignment,
    brokers: Mapping[int, str | None],
    *,
    remove: Collection[int] = (),
    isr: Mapping[TopicPartition, tuple[int, ...]] | None = None,
    alive: Collection[int] | None = None,
) -> Plan:
    """A plan over ``brokers`` (id -> rack) that takes every replica off ``remove``.

    ``isr`` and ``alive`` (default: every broker) let it refuse a removal that would lose data."""
    current = {tp: tuple(r) for tp, r in assignment.items()}
    leaving = set(remove)
    keep = {b: rack for b, rack in brokers.items() if b not in leaving}
    if not keep:
        raise PlanError("no broker would be left to hold the replicas")
    gone = {b for r in current.values() for b in r} - set(brokers)
    _check_data_stays(current, leaving | gone, isr, alive)
    planner = _Planner(current, keep)
    planner.evacuate()
    planner.spread_racks()
    planner.balance_replicas()
    planner.balance_leaders()
    moves = {tp: tuple(r) for tp, r in planner.state.items() if tuple(r) != current[tp]}
    return Plan(moves, current)


def _check_data_stays(
    current: Assignment,
    leaving: set[int],
    isr: Mapping[TopicPartition, tuple[int, ...]] | None,
    alive: Collection[int] | None,
) -> None:
    if not leaving or isr is None or alive is None:
        return
    up = set(alive)
    lost = []
    for tp in sorted(current):
        in_sync = isr.get(tp) or current[tp]
        if all(r in leaving for r in in_sync) and not set(in_sync) & up:
            lost.append(
                f"{tp[0]}-{tp[1]}: its only in-sync replica{'s' if len(in_sync) > 1 else ''} "
                f"({', '.join(map(str, in_sync))}) would be removed while down: no copy would be left"
            )
    if lost:
        raise PlanError("; ".join(lost))


class _Planner:
    def __init__(
        self, current: dict[TopicPartition, tuple[int, ...]], keep: Mapping[int, str | None]
    ) -> None:
        self.state = {tp: list(r) for tp, r in current.items()}
        self.keep = sorted(keep)
        self.racks = {b: keep[b] or "" for b in keep}
        self.all_racks = set(self.racks.values())
        self.counts = Counter(dict.fromkeys(self.keep, 0))
        for replicas in current.values():
            self.counts.update(b for b in replicas if b in self.racks)

    def _put(self, tp: TopicPartition, i: int, b: int) -> None:
        old = self.state[tp][i]
        if old in self.racks:
            self.counts[old] -= 1
        self.state[tp][i] = b
        self.counts[b] += 1

    def _spans(self, replicas: list[int]) -> int:
        return len({self.racks.get(r, f"?{r}") for r in replicas})

    def evacuate(self) -> None:
        for tp in sorted(self.state):
            replicas = self.state[tp]
            for i, b in enumerate(replicas):
                if b in self.racks:
                    continue
                candidates = [c for c in self.keep if c not in replicas]
                if not candidates:
                    raise PlanError(
                        f"{tp[0]}-{tp[1]} has {len(replicas)} replicas but only {len(self.keep)} "
                        "broker(s) would remain"
                    )
                used = {self.racks.get(r) for j, r in enumerate(replicas) if j != i}
                best = min(candidates, key=lambda c: (self.racks[c] in used, self.counts[c], c))
                self._put(tp, i, best)

    def spread_racks(self) -> None:
        for tp in sorted(self.state):
            replicas = self.state[tp]
            while self._spans(replicas) < min(len(replicas), len(self.all_racks)):
                seen: set[str] = set()
                dup = 0
                for i, r in enumerate(replicas):
                    if self.racks[r] in seen:
                        dup = i
                        break
                    seen.add(self.racks[r])
                used = {self.racks[r] for r in replicas}
                free = [c for c in self.keep if self.racks[c] not in used]
                self._put(tp, dup, min(free, key=lambda c: (self.counts[c], c)))

    def balance_replicas(self) -> None:
        for _ in range(10 * len(self.state) * len(self.keep) + 1):
            order = sorted(self.keep, key=lambda b: (self.counts[b], b))
            if self.counts[order[-1]] - self.counts[order[0]] <= 1 or not self._move_one(order):
                return

    def _move_one(self, order: list[int]) -> bool:
        """Move one replica from a loaded broker to a light one; False when none can move."""
        for hi in reversed(order):
            for lo in order:
                if self.counts[hi] - self.counts[lo] <= 1:
                    break
                for tp in sorted(self.state):
                    replicas = self.state[tp]
                    if hi not in replicas or lo in replicas:
                        continue
                    i = replicas.index(hi)
                    if self._spans([*replicas[:i], lo, *replicas[i + 1 :]]) < self._spans(replicas):
                        continue
                    self._put(tp, i, lo)
                    return True
        return False

    def balance_leaders(self) -> None:
        leaders = Counter(dict.fromkeys(self.keep, 0))
        leaders.update(r[0] for r in self.state.values() if r)
        for _ in range(10 * len(self.state) + 1):
            order = sorted(self.keep, key=lambda b: (leaders[b], b))
            if leaders[order[-1]] - leaders[order[0]] <= 1 or not self._swap_one(order, leaders):
                return

    def _swap_one(self, order: list[int], leaders: Counter[int]) -> bool:
        for hi in reversed(order):
            for lo in order:
                if leaders[hi] - leaders[lo] <= 1:
                    break
                for tp in sorted(self.state):
                    replicas = self.state[tp]
                    if replicas[0] != hi or lo not in replicas:
                        continue
                    j = replicas.index(lo)
                    replicas[0], replicas[j] = lo, hi
                    leaders[hi] -= 1
                    leaders[lo] += 1
                    return True
        return False
