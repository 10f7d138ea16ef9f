"""Partition replication rules, sans-IO: what a leader knows of its followers (ISR, high
watermark, low watermark, acks=all), which leader epochs a request may name, and where a
follower's log must be cut when it meets a new leader or a diverging one. The shell around them
(fetchers, AlterPartition, delayed produce and fetch) lives in ``pylog.broker``; the controller's
election rules, which produce metadata records, in ``pylog.cluster.partition_change``."""

from pylog.replication.epochs import diverging_epoch, leader_epoch_error
from pylog.replication.leader_state import FollowerState, LeaderState
from pylog.replication.truncation import truncation_offset, truncation_on_divergence

__all__ = [
    "FollowerState",
    "LeaderState",
    "diverging_epoch",
    "leader_epoch_error",
    "truncation_offset",
    "truncation_on_divergence",
]
