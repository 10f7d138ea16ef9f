"""Where a follower cuts its log when it starts following a leader (KIP-101 / KIP-279) or when
the leader tells it its log diverged (KIP-595), sans-IO.

The follower asks the leader (OffsetForLeaderEpoch) for the end offset of the follower's latest
epoch. The leader answers with the largest epoch it has that is not above the one asked for,
and where that epoch ends in its log. Everything in the follower's log past that point may
differ from the leader's and goes; when the leader's epoch is older than the follower's, the
follower also looks up where *it* ended that epoch, since its later entries were never the
leader's. The high watermark is never used: a replica's high watermark can be ahead of what
another replica holds after an unclean restart, and truncating to it loses or keeps the wrong
records (the KIP-101 scenarios).
"""

from __future__ import annotations

from collections.abc import Callable

UNDEFINED = -1


def truncation_offset(
    local_end_offset: int,
    leader_epoch: int,
    leader_end_offset: int,
    local_end_offset_for_epoch: Callable[[int], tuple[int, int]],
    requested_epoch: int,
) -> int:
    """The offset the follower's log is truncated to (== ``local_end_offset``: nothing to cut).

    ``leader_epoch`` / ``leader_end_offset`` are the leader's answer for ``requested_epoch``
    (UNDEFINED when the leader knows no epoch at or below it); ``local_end_offset_for_epoch(e)``
    is the follower's own (epoch, end offset) for epoch ``e``.
    """
    if leader_epoch == UNDEFINED or leader_end_offset == UNDEFINED:
        # The leader has nothing at or before our first epoch: none of our log is its.
        return 0 if requested_epoch != UNDEFINED else local_end_offset
    if leader_epoch < requested_epoch:
        local_epoch, local_end = local_end_offset_for_epoch(leader_epoch)
        if local_epoch == leader_epoch:
            return min(leader_end_offset, local_end, local_end_offset)
    return min(leader_end_offset, local_end_offset)


def truncation_on_divergence(
    local_end_offset: int,
    diverging_epoch: int,
    diverging_end_offset: int,
    local_end_offset_for_epoch: Callable[[int], tuple[int, int]],
) -> int:
    """Where a follower cuts its log when the leader's fetch answer names a diverging epoch
    (KIP-595): at the leader's end of that epoch, or earlier where the follower's own copy of
    that epoch ends, never past the follower's log end."""
    cut = min(diverging_end_offset, local_end_offset)
    local_epoch, local_end = local_end_offset_for_epoch(diverging_epoch)
    if local_epoch == diverging_epoch:
        cut = min(cut, local_end)
    return cut
