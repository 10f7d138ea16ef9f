"""The widgets' admin queries: the SDK's (`pylog.sdk.admin`)."""

from pylog.sdk.admin import (
    EARLIEST,
    LATEST,
    Admin,
    AsyncAdmin,
    Broker,
    ClusterInfo,
    GroupDescription,
    GroupListing,
    GroupMember,
    PartitionInfo,
    ShareOffset,
    decode_assignment,
)

__all__ = [
    "EARLIEST",
    "LATEST",
    "Admin",
    "AsyncAdmin",
    "Broker",
    "ClusterInfo",
    "GroupDescription",
    "GroupListing",
    "GroupMember",
    "PartitionInfo",
    "ShareOffset",
    "decode_assignment",
]
