"""Sans-IO classic consumer group coordinator (JoinGroup / SyncGroup / Heartbeat / LeaveGroup,
offsets, `__consumer_offsets` records). See `membership` for the theory of operation and
`coordinator` for durability."""

from pylog.groups.coordinator import GroupCoordinator, append_error_to_response
from pylog.groups.group import ClassicGroup, GroupState, Member
from pylog.groups.records import partition_for
from pylog.groups.types import (
    CoordinatorRecord,
    DescribedGroup,
    DescribedMember,
    FetchedOffset,
    GroupConfig,
    JoinGroupMember,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    ListedGroup,
    OffsetCommitPartition,
    OffsetDeleteResult,
    OffsetFetchResult,
    Output,
    PartitionError,
    SyncGroupResult,
    TxnMarkerRecord,
    TxnOffsetRecord,
)

__all__ = [
    "ClassicGroup",
    "CoordinatorRecord",
    "DescribedGroup",
    "DescribedMember",
    "FetchedOffset",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "JoinGroupMember",
    "JoinGroupResult",
    "LeaveGroupResult",
    "LeaveMemberResult",
    "ListedGroup",
    "Member",
    "OffsetCommitPartition",
    "OffsetDeleteResult",
    "OffsetFetchResult",
    "Output",
    "PartitionError",
    "SyncGroupResult",
    "TxnMarkerRecord",
    "TxnOffsetRecord",
    "append_error_to_response",
    "partition_for",
]
