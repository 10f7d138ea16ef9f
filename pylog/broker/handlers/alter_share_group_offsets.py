"""AlterShareGroupOffsets (KIP-932 admin): move share partitions' start offsets.

Only an empty share group can be altered (NON_EMPTY_GROUP otherwise, as in Kafka): each named
share partition starts over at the given offset with nothing in flight, persisted before the
answer.
"""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse
from pylog.protocol.schema import ZERO_UUID

from pylog.broker.control.metadata import MetadataView
from pylog.broker.coordinators.group_shell import GroupShell
from pylog.broker.coordinators.share_shell import ShareShell
from pylog.broker.handlers.describe_share_group_offsets import share_group_error
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves


def error_response(req: AlterShareGroupOffsetsRequest, code: int) -> AlterShareGroupOffsetsResponse:
    return AlterShareGroupOffsetsResponse(
        error_code=0,
        responses=[
            AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name,
                partitions=[
                    AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponsePartition(
                        partition_index=p.partition_index, error_code=code, error_message=None
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )


@serves(ApiKey.ALTER_SHARE_GROUP_OFFSETS, versions=(0, 0), error_response=error_response)
def alter_share_group_offsets(
    ctx: RequestContext,
    req: AlterShareGroupOffsetsRequest,
    *,
    groups: GroupShell,
    share: ShareShell,
    metadata: MetadataView,
) -> AlterShareGroupOffsetsResponse:
    return alter(groups, share, metadata.image, req)


def alter(
    groups: GroupShell | None, share: ShareShell | None, image: Any, req: AlterShareGroupOffsetsRequest
) -> AlterShareGroupOffsetsResponse:
    R = AlterShareGroupOffsetsResponse
    error = share_group_error(groups, share, req.group_id, empty=True)
    if error is not ErrorCode.NONE or share is None or share.manager is None:
        return R(throttle_time_ms=0, error_code=error, error_message=error.name, responses=[])
    topics = []
    for t in req.topics:
        topic = image.topic(t.topic_name)
        parts = []
        for p in t.partitions:
            e = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if topic is not None and image.partition(t.topic_name, p.partition_index) is not None:
                key = (req.group_id, topic.topic_id, p.partition_index)
                e = share.key_error(key)
                if e is ErrorCode.NONE and p.start_offset < 0:
                    e = ErrorCode.INVALID_REQUEST
                if e is ErrorCode.NONE:
                    share.manager.reset(key, p.start_offset)
            parts.append(
                R.AlterShareGroupOffsetsResponsePartition(
                    partition_index=p.partition_index, error_code=e, error_message=None
                )
            )
        topics.append(
            R.AlterShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name, topic_id=topic.topic_id if topic else ZERO_UUID, partitions=parts
            )
        )
    if share.persist() is not ErrorCode.NONE:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return R(throttle_time_ms=0, error_code=code, error_message=None, responses=[])
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, responses=topics)
