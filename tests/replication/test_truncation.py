"""Where a follower cuts its log: the KIP-101 / KIP-279 cases, never the high watermark."""

from __future__ import annotations

from collections.abc import Callable

from pylog.replication import truncation_offset


def epochs(entries: list[tuple[int, int]], end: int) -> Callable[[int], tuple[int, int]]:
    """The follower's own end offset for an epoch, from its (epoch, start offset) entries."""

    def lookup(epoch: int) -> tuple[int, int]:
        best = [(e, s) for e, s in entries if e <= epoch]
        if not best:
            return -1, -1
        e, _ = best[-1]
        later = [s for e2, s in entries if e2 > e]
        return e, later[0] if later else end

    return lookup


def test_same_epoch_cut_at_the_leaders_end() -> None:
    # follower: epoch 1 from 0, holds 0..9; the leader ended epoch 1 at 7 (then epoch 2)
    assert truncation_offset(10, 1, 7, epochs([(1, 0)], 10), requested_epoch=1) == 7


def test_nothing_to_cut_when_the_leader_has_more() -> None:
    assert truncation_offset(10, 1, 15, epochs([(1, 0)], 10), requested_epoch=1) == 10


def test_leader_never_had_our_last_epoch() -> None:
    # follower: epochs 1 (0..4) and 2 (5..9, written while it briefly led, never replicated);
    # the leader knows only epoch 1, which it ended at 6 (then epoch 3)
    own = epochs([(1, 0), (2, 5)], 10)
    assert truncation_offset(10, 1, 6, own, requested_epoch=2) == 5  # where our epoch 1 ended


def test_the_high_watermark_plays_no_part() -> None:
    # KIP-101 case 1: a follower that restarted with a high watermark above what survived
    # keeps every record the leader confirms
    own = epochs([(0, 0)], 2)
    assert truncation_offset(2, 0, 2, own, requested_epoch=0) == 2


def test_a_leader_knowing_no_epoch_as_old_as_ours_means_none_of_our_log_is_its() -> None:
    own = epochs([(1, 0)], 10)
    assert truncation_offset(10, -1, -1, own, requested_epoch=1) == 0


def test_an_empty_follower_has_nothing_to_cut() -> None:
    assert truncation_offset(0, -1, -1, epochs([], 0), requested_epoch=-1) == 0
