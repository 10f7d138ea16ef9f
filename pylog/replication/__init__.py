"""Partition replication rules, sans-IO: what a leader knows of its followers (ISR, high
watermark) and where a follower's log must be cut when it meets a new leader."""

from pylog.replication.leader_state import FollowerState, LeaderState
from pylog.replication.truncation import truncation_offset

__all__ = ["FollowerState", "LeaderState", "truncation_offset"]
