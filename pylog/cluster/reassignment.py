"""Partition reassignment (KIP-455) as pure functions over partition images.

Theory of operation
-------------------
A reassignment moves a partition from its replicas ``R`` to a *target* ``T``. The controller
records it in the partition itself: ``replicas`` becomes ``T`` followed by the members of ``R``
not in ``T``; ``adding_replicas`` lists ``T - R`` and ``removing_replicas`` lists ``R - T``.
Every broker named in ``replicas`` hosts the partition, so the new replicas start as followers
of the current leader and fetch until they catch up; the leader adds each to the ISR
(AlterPartition) as it does for any follower. Once every adding replica is in the ISR the
reassignment *completes* in the same change: ``replicas`` becomes ``T``, the removed replicas
leave the ISR, and if the leader is one of them leadership passes to the first usable in-sync
replica in target order (the target's first replica when it is in sync). Brokers no longer named
drop their copies. A reassignment that adds nobody (a shrink or a reorder) completes at once.

A *cancel* reverts: the adding replicas leave ``replicas`` and the ISR, the removing ones stay.
A new target for a partition already moving is applied to the reverted state, so it replaces
the old target rather than stacking on it (Kafka's PartitionReassignmentRevert).

Each function returns the ``PartitionChangeRecord`` to commit, or None when nothing changes;
``usable`` is the set of brokers that may lead (registered, unfenced, not shutting down).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from pylog.cluster.image import PartitionImage
from pylog.cluster.records import LEADER_NO_CHANGE, NO_LEADER, PartitionChangeRecord


@dataclass(frozen=True)
class PartitionState:
    """The assignment fields of a partition that a reassignment changes."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @classmethod
    def of(cls, p: PartitionImage) -> PartitionState:
        return cls(p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas)


def _valid_leader(state: PartitionState, usable: Collection[int]) -> int:
    """Keep the current leader while it may lead; else the first usable in-sync replica."""
    if state.leader in state.replicas and state.leader in state.isr and state.leader in usable:
        return state.leader
    for r in state.replicas:
        if r in state.isr and r in usable:
            return r
    return NO_LEADER


def revert(state: PartitionState, usable: Collection[int]) -> PartitionState:
    """The partition as if no reassignment were in flight: the adding replicas are dropped."""
    if not state.adding and not state.removing:
        return state
    adding = set(state.adding)
    replicas = tuple(r for r in state.replicas if r not in adding)
    isr = tuple(r for r in state.isr if r not in adding)
    if not isr:  # only new replicas were in sync: an old one must lead again, uncleanly
        first = next((r for r in replicas if r in usable), replicas[0])
        isr = (first,)
    reverted = PartitionState(replicas, isr, state.leader)
    return PartitionState(replicas, isr, _valid_leader(reverted, usable))


def complete_if_ready(state: PartitionState, usable: Collection[int]) -> PartitionState:
    """Finish the reassignment once every adding replica is in sync (else ``state`` unchanged)."""
    if not state.adding and not state.removing:
        return state
    if any(r not in state.isr for r in state.adding):
        return state
    removing = set(state.removing)
    isr = tuple(r for r in state.isr if r not in removing)
    if not isr:
        return state
    done = PartitionState(tuple(r for r in state.replicas if r not in removing), isr, state.leader)
    leader = _valid_leader(done, usable)
    if leader == NO_LEADER and state.leader != NO_LEADER:
        return state  # nobody in the target could lead now: wait rather than go offline
    return PartitionState(done.replicas, done.isr, leader)


def target_state(state: PartitionState, target: Sequence[int], usable: Collection[int]) -> PartitionState:
    """Start moving to ``target`` (replacing any reassignment in flight), completing at once when
    nobody is added."""
    base = revert(state, usable)
    wanted = tuple(target)
    adding = tuple(r for r in wanted if r not in base.replicas)
    removing = tuple(r for r in base.replicas if r not in wanted)
    moving = PartitionState(wanted + removing, base.isr, base.leader, adding, removing)
    return complete_if_ready(moving, usable)


def change_record(p: PartitionImage, state: PartitionState) -> PartitionChangeRecord | None:
    """The record that takes ``p`` to ``state`` (None: they are the same)."""
    old = PartitionState.of(p)
    if state == old:
        return None
    return PartitionChangeRecord(
        p.topic_id,
        p.partition_id,
        isr=state.isr if state.isr != old.isr else None,
        leader=state.leader if state.leader != old.leader else LEADER_NO_CHANGE,
        replicas=state.replicas if state.replicas != old.replicas else None,
        adding_replicas=state.adding if state.adding != old.adding else None,
        removing_replicas=state.removing if state.removing != old.removing else None,
    )


def reassign(
    p: PartitionImage, target: Sequence[int], usable: Collection[int]
) -> PartitionChangeRecord | None:
    """AlterPartitionReassignments with a target."""
    return change_record(p, target_state(PartitionState.of(p), target, usable))


def cancel(p: PartitionImage, usable: Collection[int]) -> PartitionChangeRecord | None:
    """AlterPartitionReassignments with a null target."""
    return change_record(p, revert(PartitionState.of(p), usable))


def isr_changed(
    p: PartitionImage, new_isr: tuple[int, ...], usable: Collection[int]
) -> PartitionChangeRecord | None:
    """A leader's AlterPartition: the new ISR, and the reassignment's completion if it allows it."""
    state = PartitionState.of(p)
    moved = PartitionState(state.replicas, new_isr, state.leader, state.adding, state.removing)
    return change_record(p, complete_if_ready(moved, usable))
