"""DeleteShareGroupOffsets (KIP-932 admin): forget a share group's state of whole topics.

Only an empty share group (NON_EMPTY_GROUP otherwise); the state of every partition of each named
topic gets a tombstone in `__share_group_state`, so the next fetch starts at
`share.auto.offset.reset`. Errors are per topic (UNKNOWN_TOPIC_OR_PARTITION for a topic that
does not exist), as the released protocol answers.
"""

from __future__ import annotations

import uuid
from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse
from pylog.protocol.schema import ZERO_UUID

from pylog.broker.control.metadata import MetadataView
from pylog.broker.coordinators.group_shell import GroupShell
from pylog.broker.coordinators.share_shell import ShareShell
from pylog.broker.handlers.describe_share_group_offsets import share_group_error
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.groups.types import Output
from pylog.share.state import ShareKey


def error_response(req: DeleteShareGroupOffsetsRequest, code: int) -> DeleteShareGroupOffsetsResponse:
    return DeleteShareGroupOffsetsResponse(
        error_code=0,
        responses=[
            DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name, error_code=code, error_message=None
            )
            for t in req.topics
        ],
    )


@serves(ApiKey.DELETE_SHARE_GROUP_OFFSETS, versions=(0, 0), error_response=error_response)
def delete_share_group_offsets(
    ctx: RequestContext,
    req: DeleteShareGroupOffsetsRequest,
    *,
    groups: GroupShell,
    share: ShareShell,
    metadata: MetadataView,
) -> DeleteShareGroupOffsetsResponse:
    return delete(groups, share, metadata.image, req)


def delete(
    groups: GroupShell | None, share: ShareShell | None, image: Any, req: DeleteShareGroupOffsetsRequest
) -> DeleteShareGroupOffsetsResponse:
    R = DeleteShareGroupOffsetsResponse
    error = share_group_error(groups, share, req.group_id, empty=True)
    if error is not ErrorCode.NONE or share is None or share.manager is None:
        return R(throttle_time_ms=0, error_code=error, error_message=error.name, responses=[])
    out = Output()
    topics = []
    for t in req.topics:
        topic = image.topic(t.topic_name)
        e = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if topic is not None:
            e = ErrorCode.NONE
            for key in _share_partitions(share, req.group_id, topic.topic_id):
                e = share.key_error(key)
                if e is not ErrorCode.NONE:
                    break
                out.records.append(share.manager.delete(key))
        topics.append(
            R.DeleteShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name,
                topic_id=topic.topic_id if topic else ZERO_UUID,
                error_code=e,
                error_message=None,
            )
        )
    out.response = R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, responses=topics)

    def failed(response: Any, error: int) -> DeleteShareGroupOffsetsResponse:
        return R(throttle_time_ms=0, error_code=error, error_message=None, responses=[])

    answer: DeleteShareGroupOffsetsResponse = share.apply(out, failed)
    return answer


def _share_partitions(share: ShareShell, group_id: str, topic_id: uuid.UUID) -> list[ShareKey]:
    """The share partitions of `topic_id` that `group_id` has state for (persisted or in memory)."""
    assert share.coordinator is not None and share.manager is not None
    keys = set(share.coordinator.keys()) | set(share.manager.partitions)
    return sorted(k for k in keys if k[0] == group_id and k[1] == topic_id)
