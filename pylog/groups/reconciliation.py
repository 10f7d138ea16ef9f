"""Incremental reconciliation of one consumer-group member towards its target (KIP-848).

Theory of operation. The coordinator keeps, per group, a *target assignment* stamped with an
assignment epoch, and per member its *current* assignment with a member epoch. A member walks
to its target in steps, each answered in a heartbeat, and never owns a partition that another
member still owns:

    STABLE ──(target epoch moved)──► compute next step
    next step:  keep   = current ∩ target
                revoke = current − target
                gain   = target − current, only partitions no other member still holds
    revoke ≠ ∅  → UNREVOKED_PARTITIONS: assigned = keep, epoch unchanged; the member must
                  confirm (owned partitions in a heartbeat) that it let `revoke` go
    some gain held elsewhere → UNRELEASED_PARTITIONS: epoch = target epoch, assigned = keep ∪
                  free gain; re-evaluated on each heartbeat until the holder releases
    otherwise  → STABLE at the target epoch

A partition therefore changes hands only after its previous owner confirmed the revocation,
which is what makes a rebalance free of duplicates without stopping the group. The functions
here are pure: the coordinator passes the current state, the target and who holds what.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

from pylog.groups.group_records import Assignment, normalise


class MemberState(IntEnum):
    """Kafka's `MemberState` codes (stored in ConsumerGroupCurrentMemberAssignment)."""

    UNREVOKED_PARTITIONS = 0
    UNRELEASED_PARTITIONS = 1
    STABLE = 2


@dataclass(frozen=True)
class MemberAssignment:
    state: MemberState = MemberState.STABLE
    member_epoch: int = 0
    previous_member_epoch: int = -1
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)


HolderOf = Callable[[uuid.UUID, int], "str | None"]
"""Which member holds (owns or is still revoking) a partition, None if nobody."""


def reconcile(
    member_id: str,
    current: MemberAssignment,
    target_epoch: int,
    target: Assignment,
    owned: Assignment | None,
    holder_of: HolderOf,
) -> MemberAssignment:
    """The member's next assignment state. `owned` is what the member reported in this heartbeat
    (None when it did not report)."""
    if current.state is MemberState.STABLE:
        if current.member_epoch == target_epoch:
            return current
        return _next(member_id, current, target_epoch, target, holder_of)
    if current.state is MemberState.UNREVOKED_PARTITIONS:
        if owned is None or _overlaps(owned, current.pending_revocation):
            return current
        return _next(member_id, current, target_epoch, target, holder_of)
    # UNRELEASED_PARTITIONS: pick up what the other members released meanwhile.
    return _next(member_id, current, target_epoch, target, holder_of)


def _next(
    member_id: str, current: MemberAssignment, target_epoch: int, target: Assignment, holder_of: HolderOf
) -> MemberAssignment:
    keep: dict[uuid.UUID, set[int]] = {}
    revoke: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for t in set(target) | set(current.assigned):
        want = target.get(t, frozenset())
        have = current.assigned.get(t, frozenset())
        keep[t] = set(have & want)
        revoke[t] = set(have - want)
        for p in want - have:
            holder = holder_of(t, p)
            if holder is None or holder == member_id:
                keep[t].add(p)
            else:
                unreleased = True
    kept, revoking = normalise(keep), normalise(revoke)
    if revoking:
        return MemberAssignment(
            MemberState.UNREVOKED_PARTITIONS,
            current.member_epoch,
            current.previous_member_epoch,
            _strip_gains(kept, current.assigned),
            revoking,
        )
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return MemberAssignment(state, target_epoch, current.member_epoch, kept, {})


def _strip_gains(kept: Assignment, had: Assignment) -> Assignment:
    """While revoking, the member keeps only partitions it already had (gains wait for the next step)."""
    return normalise({t: ps & had.get(t, frozenset()) for t, ps in kept.items()})


def _overlaps(a: Assignment, b: Assignment) -> bool:
    return any(a.get(t, frozenset()) & ps for t, ps in b.items())
