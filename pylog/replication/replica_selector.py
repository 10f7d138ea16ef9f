"""Which replica a consumer should read from (KIP-392, ``replica.selector.class``), sans-IO.

Theory of operation
-------------------
A leader answering a consumer's Fetch (version 11 or later, which carries the client's
``rack_id``) may name a ``preferred_read_replica``: the consumer then fetches that partition from
the named follower until it fails there. Candidates are the leader and the followers that are in
the ISR, live, and hold the fetch offset (between their log start and log end offsets); a lagging
follower is left out so a consumer never falls behind the producers by reading from it.

``RackAwareReplicaSelector`` picks, when the client names a rack: the leader if it is in that
rack, else the most caught-up candidate in the rack (largest log end offset, then the most recently
caught up), else the leader. Choosing the leader is answered as -1 (no preference), as Kafka
does; so is a fetch without a rack, or a broker without a selector.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
SELECTORS = (RACK_AWARE,)
NO_PREFERENCE = -1


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """What the selector knows of one candidate replica (Kafka's ReplicaView)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_caught_up_ms: int


def rack_aware_select(
    client_rack: str | None, leader: ReplicaView, candidates: Iterable[ReplicaView]
) -> ReplicaView:
    """Kafka's RackAwareReplicaSelector.select over the leader and the in-sync candidates."""
    if not client_rack:
        return leader
    if leader.rack == client_rack:
        return leader
    same_rack = [c for c in candidates if c.rack == client_rack]
    if not same_rack:
        return leader
    return max(same_rack, key=lambda c: (c.log_end_offset, -c.time_since_caught_up_ms, -c.broker_id))


def preferred_read_replica(
    selector: str | None,
    client_rack: str | None,
    leader: ReplicaView,
    followers: Iterable[tuple[ReplicaView, int, bool]],
    fetch_offset: int,
) -> int:
    """The ``preferred_read_replica`` for a consumer fetch at ``fetch_offset`` answered by the
    leader: a follower's id, or -1. ``followers`` are (view, log start offset, eligible), eligible
    meaning in the ISR and on a live broker."""
    if selector is None:
        return NO_PREFERENCE
    candidates = [
        view
        for view, log_start, eligible in followers
        if eligible and log_start <= fetch_offset <= view.log_end_offset
    ]
    chosen = rack_aware_select(client_rack, leader, candidates)
    return NO_PREFERENCE if chosen.broker_id == leader.broker_id else chosen.broker_id
