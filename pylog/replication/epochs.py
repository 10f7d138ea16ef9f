"""Leader epochs in requests (KIP-320) and in a follower's fetch (KIP-595's diverging epoch), sans-IO.

A client or follower names the leader epoch it knows (``current_leader_epoch``). The partition
leader serves it only at its own epoch: an older one is fenced (FENCED_LEADER_EPOCH: the asker
missed a leader change and must refresh its metadata), a newer one is unknown here yet
(UNKNOWN_LEADER_EPOCH: this broker has not seen the change; the asker retries). A request
without an epoch (-1) is not checked. Fetch, ListOffsets and OffsetForLeaderEpoch all apply
this one rule, through ``Partition.check_leader_epoch``.

A follower's fetch also names the epoch of its last batch (``last_fetched_epoch``). If that
epoch ends in the leader's log before the follower's fetch offset, or the leader has no such
epoch, the follower's log has diverged: the leader answers with where the largest epoch it
has at or below that one ends (the ``diverging_epoch``) instead of records, and the follower
truncates there (``truncation.truncation_on_divergence``).
"""

from __future__ import annotations

from collections.abc import Callable

from pylog.protocol.errors import ErrorCode

NO_EPOCH = -1


def leader_epoch_error(current_leader_epoch: int, leader_epoch: int) -> ErrorCode:
    """NONE when a request for ``current_leader_epoch`` may be served by the leader of
    ``leader_epoch``; FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH otherwise."""
    if current_leader_epoch == NO_EPOCH:
        return ErrorCode.NONE
    if 0 <= current_leader_epoch < leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if current_leader_epoch > leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NONE


def diverging_epoch(
    last_fetched_epoch: int, fetch_offset: int, end_offset_for_epoch: Callable[[int], tuple[int, int]]
) -> tuple[int, int] | None:
    """(epoch, end offset) to tell a follower whose log diverged from the leader's, or None.
    ``end_offset_for_epoch`` is the leader's (largest epoch <= the one asked, where it ends)."""
    if last_fetched_epoch < 0:
        return None
    epoch, end = end_offset_for_epoch(last_fetched_epoch)
    if epoch != last_fetched_epoch or end < fetch_offset:
        return epoch, end
    return None
