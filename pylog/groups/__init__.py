"""Sans-IO group coordinator: classic, consumer (KIP-848) and share (KIP-932) groups, their
offsets and their `__consumer_offsets` records. `coordinator` composes the state machines
(`classic`, `consumer`, `migration`, `share`, `offsets`) over one `registry` of groups."""

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
    JoinRequest,
    LeaveGroupResult,
    LeaveMemberResult,
    ListedGroup,
    OffsetCommitPartition,
    OffsetDeleteResult,
    OffsetFetchResult,
    Output,
    PartitionError,
    SyncGroupResult,
    SyncRequest,
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
    "JoinRequest",
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
    "SyncRequest",
    "TxnMarkerRecord",
    "TxnOffsetRecord",
    "append_error_to_response",
    "partition_for",
]
