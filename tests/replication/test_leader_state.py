"""The leader's rules, deterministically: the high watermark over the (maximal) ISR, caught-up
times, ISR shrink and expansion, acks=all's min.insync.replicas check, the low watermark."""

from __future__ import annotations

from pylog.replication import LeaderState


def leader(isr: tuple[int, ...] = (1, 2, 3), hw: int = 0, now: int = 0, epoch_start: int = 0) -> LeaderState:
    return LeaderState(
        1,
        (1, 2, 3),
        isr,
        leader_epoch=5,
        partition_epoch=7,
        epoch_start_offset=epoch_start,
        high_watermark=hw,
        now_ms=now,
    )


def test_the_high_watermark_is_the_smallest_log_end_in_the_isr() -> None:
    s = leader()
    assert not s.maybe_advance_high_watermark(10)  # followers unknown yet (-1)
    s.on_follower_fetch(2, 10, 10, now_ms=1)
    assert not s.maybe_advance_high_watermark(10)
    s.on_follower_fetch(3, 4, 10, now_ms=1)
    assert s.maybe_advance_high_watermark(10) and s.high_watermark == 4
    s.on_follower_fetch(3, 10, 10, now_ms=2)
    assert s.maybe_advance_high_watermark(10) and s.high_watermark == 10


def test_the_high_watermark_never_moves_backward() -> None:
    s = leader(hw=8)
    s.on_follower_fetch(2, 3, 10, now_ms=1)
    s.on_follower_fetch(3, 3, 10, now_ms=1)
    assert not s.maybe_advance_high_watermark(10) and s.high_watermark == 8


def test_a_leader_alone_in_its_isr_commits_at_its_log_end() -> None:
    s = leader(isr=(1,))
    assert s.maybe_advance_high_watermark(42) and s.high_watermark == 42


def test_a_pending_expansion_is_waited_for_and_a_pending_shrink_is_not_yet_trusted() -> None:
    s = leader(isr=(1, 2))
    s.on_follower_fetch(2, 10, 10, now_ms=1)
    s.on_follower_fetch(3, 5, 10, now_ms=1)
    s.propose((1, 2, 3))  # 3 joining: the high watermark must now wait for it too
    assert s.maximal_isr == (1, 2, 3)
    s.maybe_advance_high_watermark(10)
    assert s.high_watermark == 5
    s.update_partition((1, 2, 3), (1, 2, 3), 8)
    assert s.pending_isr is None and s.isr == (1, 2, 3)
    s.propose((1, 2))  # 3 leaving: still counted until the controller agrees
    assert s.maximal_isr == (1, 2, 3)


def test_stale_partition_states_are_ignored() -> None:
    s = leader()
    s.update_partition((1, 2, 3), (1, 2), 6)
    assert s.isr == (1, 2, 3) and s.partition_epoch == 7


def test_a_follower_out_of_sync_for_longer_than_the_lag_time_is_dropped() -> None:
    s = leader(now=1000)  # a new leader gives every follower a full lag window from now
    s.on_follower_fetch(2, 10, 10, now_ms=1500)  # caught up at 1500
    s.on_follower_fetch(3, 5, 10, now_ms=1500)  # behind: last caught up at 1000
    assert s.isr_shrink(now_ms=2000, lag_time_max_ms=1000) is None
    assert s.isr_shrink(now_ms=2001, lag_time_max_ms=1000) == (1, 2)


def test_a_follower_that_keeps_up_under_load_stays_caught_up() -> None:
    s = leader(now=0)
    s.on_follower_fetch(2, 5, 10, now_ms=100)  # leader end 10 at this fetch
    s.on_follower_fetch(2, 10, 20, now_ms=900)  # reached what the leader had at the last fetch
    assert s.followers[2].last_caught_up_ms == 100
    assert s.isr_shrink(now_ms=1050, lag_time_max_ms=1000) == (1, 2)  # 3 never fetched; 2 stays


def test_only_the_fetching_follower_rejoins_once_it_reached_the_high_watermark_and_epoch_start() -> None:
    s = leader(isr=(1, 2), hw=10, epoch_start=10)
    s.on_follower_fetch(3, 9, 12, now_ms=1)
    assert s.isr_expand(3) is None
    s.on_follower_fetch(3, 10, 12, now_ms=2)
    assert s.isr_expand(3) == (1, 2, 3)
    assert s.isr_expand(2) is None  # already in
    s.propose((1, 2, 3))
    assert s.isr_expand(3) is None  # one change at a time


def test_acks_all_needs_min_insync_replicas_in_the_committed_isr() -> None:
    s = leader(isr=(1,))
    assert not s.enough_replicas(2)
    s.propose((1, 2))
    assert not s.enough_replicas(2)  # pending is not committed
    s.update_partition((1, 2, 3), (1, 2), 8)
    assert s.enough_replicas(2)


def test_the_low_watermark_waits_for_every_follower_on_a_live_broker() -> None:
    s = leader()
    assert s.low_watermark(50, live={1, 2, 3}) == -1  # followers not heard from yet
    s.on_follower_fetch(2, 100, 100, now_ms=1, log_start_offset=50)
    s.on_follower_fetch(3, 100, 100, now_ms=1, log_start_offset=20)
    assert s.low_watermark(50, live={1, 2, 3}) == 20
    assert s.low_watermark(50, live={1, 2}) == 50  # replica 3's broker is fenced: not waited for
    s.on_follower_fetch(3, 100, 100, now_ms=2, log_start_offset=60)
    assert s.low_watermark(50, live={1, 2, 3}) == 50  # never past the leader's own log start


def test_a_newer_committed_state_answers_a_proposal_even_when_it_decided_more() -> None:
    """A reassignment completing on the ISR expansion commits (1, 2, 4), not the (1, 2, 3, 4) asked
    for: the removed replica 3 must stop counting, or the high watermark would wait for it forever."""
    s = leader(isr=(1, 2, 3))
    s.update_partition((1, 2, 4, 3), (1, 2, 3), 8)  # moving 3 -> 4
    s.on_follower_fetch(4, 10, 10, now_ms=1)
    s.propose((1, 2, 3, 4))
    s.update_partition((1, 2, 4), (1, 2, 4), 9)
    assert s.pending_isr is None and s.maximal_isr == (1, 2, 4) and 3 not in s.followers
    s.on_follower_fetch(2, 10, 10, now_ms=2)
    assert s.maybe_advance_high_watermark(10) and s.high_watermark == 10


def test_a_proposal_naming_a_replica_the_committed_state_dropped_is_outdated() -> None:
    """The AlterPartition answer completing a move (3 -> 4) arrives before the image's record: the
    leader still tracks 3, which fetches once more and is proposed back. The record then drops 3
    at the same partition epoch; the proposal can never be accepted and must not hold the high
    watermark back."""
    s = leader(isr=(1, 2, 3))
    s.update_partition((1, 2, 4, 3), (1, 2, 3), 8)  # moving 3 -> 4
    s.update_partition((1, 2, 4, 3), (1, 2, 4), 9)  # AlterPartition's answer: the move completed
    s.on_follower_fetch(3, 10, 10, now_ms=1)
    assert s.isr_expand(3) == (1, 2, 4, 3)
    s.propose((1, 2, 4, 3))
    s.update_partition((1, 2, 4), (1, 2, 4), 9)  # the image's record, same partition epoch
    assert s.pending_isr is None and s.maximal_isr == (1, 2, 4)
    s.on_follower_fetch(2, 10, 10, now_ms=2)
    s.on_follower_fetch(4, 10, 10, now_ms=2)
    assert s.maybe_advance_high_watermark(10) and s.high_watermark == 10


def test_a_proposal_refused_as_stale_waits_for_the_newer_partition_state() -> None:
    s = leader(isr=(1, 2), hw=10)
    s.on_follower_fetch(3, 10, 12, now_ms=1)
    s.propose((1, 2, 3))
    s.isr_change_failed(stale=True)  # INVALID_UPDATE_VERSION: the controller holds a newer state
    assert s.isr_expand(3) is None and s.isr_shrink(now_ms=10**9, lag_time_max_ms=1) is None
    s.update_partition((1, 2, 3), (1, 2), 8)  # the newer state arrives with the metadata
    assert s.isr_expand(3) == (1, 2, 3)
    s.propose((1, 2, 3))
    s.isr_change_failed()  # lost, or refused for another reason: proposed again at once
    assert s.isr_expand(3) == (1, 2, 3)


def test_a_stale_refusal_that_arrives_after_the_newer_state_blocks_nothing() -> None:
    """The controller fences a broker (partition epoch 7 -> 8, ISR without it) while the leader's
    shrink at epoch 7 is in flight; the metadata brings epoch 8 before the refusal of the shrink
    arrives. The leader must still take the broker back once it catches up: only the leader
    proposes that, so blocking epoch 8 would keep it out of the ISR for good."""
    s = leader(isr=(1, 2, 3), hw=10)
    s.propose((1, 2))
    s.update_partition((1, 2, 3), (1, 2), 8)  # the newer state, first
    s.on_follower_fetch(3, 10, 10, now_ms=1)
    s.isr_change_failed(stale=True, sent_epoch=7)  # then the refusal of the epoch-7 proposal
    assert s.isr_expand(3) == (1, 2, 3)
    s.propose((1, 2, 3))
    s.isr_change_failed(stale=True, sent_epoch=7)  # a late refusal keeps the newer proposal
    assert s.pending_isr == (1, 2, 3)
    s.isr_change_failed(stale=True, sent_epoch=8)  # refused at the epoch held: wait for a newer one
    assert s.pending_isr is None and s.isr_expand(3) is None
