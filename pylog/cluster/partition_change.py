"""Leader election and ISR rules of the controller, as pure functions over partition images.

Theory of operation
-------------------
A partition's leader is always chosen from its ISR, in replica order, among *usable* brokers
(registered, unfenced, not in controlled shutdown); only ``unclean.leader.election.enable``
lets an out-of-sync replica lead, and then the ISR restarts as that replica alone. When a
broker is fenced or shuts down it leaves every ISR, except that the last member of an ISR
stays (so the replicas that may hold every committed record are still known when it comes
back), and partitions it led get a new leader from the rest of the ISR, or none (-1,
offline). When a broker is unfenced, offline partitions whose ISR names it get it as leader.
Preferred election moves leadership back to the first replica when it is usable and in sync.

Every rule returns the ``PartitionChangeRecord`` to commit, or None when nothing changes;
applying a record bumps the partition epoch, and the leader epoch when the leader changes
(``MetadataImage._apply_PartitionChangeRecord``).
"""

from __future__ import annotations

from collections.abc import Collection

from pylog.cluster.image import PartitionImage
from pylog.cluster.records import LEADER_NO_CHANGE, NO_LEADER, PartitionChangeRecord


def elect_leader(p: PartitionImage, isr: tuple[int, ...], usable: Collection[int]) -> int:
    """The first replica (in replica order) in ``isr`` that is usable, or NO_LEADER."""
    for r in p.replicas:
        if r in isr and r in usable:
            return r
    return NO_LEADER


def _change(p: PartitionImage, leader: int, isr: tuple[int, ...]) -> PartitionChangeRecord | None:
    leader_changed = leader != p.leader
    isr_changed = isr != p.isr
    if not leader_changed and not isr_changed:
        return None
    return PartitionChangeRecord(
        p.topic_id,
        p.partition_id,
        isr=isr if isr_changed else None,
        leader=leader if leader_changed else LEADER_NO_CHANGE,
    )


def on_broker_unusable(
    p: PartitionImage, broker_id: int, usable: Collection[int], unclean: bool
) -> PartitionChangeRecord | None:
    """``broker_id`` was fenced or began a controlled shutdown (``usable`` no longer has it)."""
    if broker_id not in p.replicas:
        return None
    isr = tuple(r for r in p.isr if r != broker_id) or p.isr
    leader = p.leader
    if leader == broker_id or leader not in usable:
        leader = elect_leader(p, isr, usable)
        if leader == NO_LEADER and unclean:
            leader, isr = _unclean(p, usable, isr)
    return _change(p, leader, isr)


def on_broker_usable(
    p: PartitionImage, broker_id: int, usable: Collection[int], unclean: bool
) -> PartitionChangeRecord | None:
    """``broker_id`` was unfenced: offline partitions it may lead get a leader again."""
    if broker_id not in p.replicas or p.leader != NO_LEADER:
        return None
    leader = elect_leader(p, p.isr, usable)
    isr = p.isr
    if leader == NO_LEADER and unclean:
        leader, isr = _unclean(p, usable, isr)
    return _change(p, leader, isr)


def preferred_election(p: PartitionImage, usable: Collection[int]) -> PartitionChangeRecord | None:
    """Move leadership to the preferred (first) replica when it is usable and in sync."""
    preferred = p.replicas[0] if p.replicas else NO_LEADER
    if preferred == p.leader or preferred not in p.isr or preferred not in usable:
        return None
    return _change(p, preferred, p.isr)


def unclean_election(p: PartitionImage, usable: Collection[int]) -> PartitionChangeRecord | None:
    """ElectLeaders UNCLEAN: an offline partition gets any usable replica as leader."""
    if p.leader != NO_LEADER:
        return None
    leader = elect_leader(p, p.isr, usable)
    isr = p.isr
    if leader == NO_LEADER:
        leader, isr = _unclean(p, usable, isr)
    return _change(p, leader, isr)


def _unclean(p: PartitionImage, usable: Collection[int], isr: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    for r in p.replicas:
        if r in usable:
            return r, (r,)
    return NO_LEADER, isr


def check_new_isr(
    p: PartitionImage, leader: int, new_isr: tuple[int, ...], usable: Collection[int]
) -> str | None:
    """Why an AlterPartition ISR is not acceptable (None: it is)."""
    if not new_isr:
        return "the ISR must not be empty"
    if leader not in new_isr:
        return f"the ISR {list(new_isr)} must include the leader {leader}"
    if len(set(new_isr)) != len(new_isr):
        return f"the ISR {list(new_isr)} names a replica twice"
    for r in new_isr:
        if r not in p.replicas:
            return f"broker {r} is not a replica of this partition"
        if r not in p.isr and r not in usable:
            return f"broker {r} is fenced or shutting down and cannot join the ISR"
    return None
