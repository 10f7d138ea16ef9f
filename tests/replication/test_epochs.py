"""Leader epochs in requests (KIP-320) and diverging logs (KIP-595), deterministically."""

from __future__ import annotations

from pylog.protocol.errors import ErrorCode
from test_truncation import epochs

from pylog.replication import diverging_epoch, leader_epoch_error, truncation_on_divergence


def test_a_request_is_served_at_the_leaders_epoch_or_without_one() -> None:
    assert leader_epoch_error(-1, 5) is ErrorCode.NONE
    assert leader_epoch_error(5, 5) is ErrorCode.NONE
    assert leader_epoch_error(4, 5) is ErrorCode.FENCED_LEADER_EPOCH  # the asker missed a change
    assert leader_epoch_error(0, 5) is ErrorCode.FENCED_LEADER_EPOCH
    assert leader_epoch_error(6, 5) is ErrorCode.UNKNOWN_LEADER_EPOCH  # this broker is behind


def test_a_follower_in_step_gets_no_diverging_epoch() -> None:
    leader = epochs([(1, 0), (3, 10)], 20)
    assert diverging_epoch(-1, 5, leader) is None  # no epoch named: nothing to check
    assert diverging_epoch(3, 20, leader) is None
    assert diverging_epoch(1, 10, leader) is None  # epoch 1 ends at 10 and the follower is there


def test_a_follower_past_the_end_of_its_epoch_in_the_leaders_log_diverged() -> None:
    leader = epochs([(1, 0), (3, 10)], 20)
    assert diverging_epoch(1, 12, leader) == (1, 10)  # it holds epoch-1 records the leader does not
    assert diverging_epoch(2, 12, leader) == (1, 10)  # an epoch the leader never had


def test_the_follower_cuts_at_the_leaders_end_of_that_epoch_or_its_own() -> None:
    follower = epochs([(1, 0), (2, 8)], 12)  # its epoch 1 ended at 8, then an epoch the leader lacks
    assert truncation_on_divergence(12, 1, 10, follower) == 8  # its own end of epoch 1 comes first
    assert truncation_on_divergence(12, 2, 15, follower) == 12  # never past its log end
    assert truncation_on_divergence(12, 0, 5, follower) == 5  # an epoch it does not have: the leader's
