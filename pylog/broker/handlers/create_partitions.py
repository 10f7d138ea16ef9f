"""CreatePartitions: grow a topic's partition count through the controller (ALTER on the topic)."""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import CreatePartitionsRequest, CreatePartitionsResponse

from pylog.broker.access.authorization import Authorization
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.cluster.controller import NewPartitions
from pylog.cluster.quorum import MetadataQuorum
from pylog.security.acl_operations import AclOperation, ResourceType


def error_response(req: CreatePartitionsRequest, code: int) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(
        results=[
            CreatePartitionsResponse.CreatePartitionsTopicResult(name=t.name, error_code=code)
            for t in req.topics
        ]
    )


@serves(ApiKey.CREATE_PARTITIONS, versions=(0, 3), error_response=error_response)
async def create_partitions(
    ctx: RequestContext, req: CreatePartitionsRequest, *, quorum: MetadataQuorum, authz: Authorization
) -> CreatePartitionsResponse:
    allowed = authz.filter(ctx, AclOperation.ALTER, ResourceType.TOPIC, (t.name for t in req.topics))
    refused = [
        CreatePartitionsResponse.CreatePartitionsTopicResult(
            name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=None
        )
        for t in req.topics
        if t.name not in allowed
    ]
    answer = await _create(quorum, req, [t for t in req.topics if t.name in allowed])
    answer.results += refused
    return answer


async def _create(
    quorum: MetadataQuorum, req: CreatePartitionsRequest, wanted: list[Any]
) -> CreatePartitionsResponse:
    topics = [
        NewPartitions(
            t.name,
            t.count,
            None if t.assignments is None else [list(a.broker_ids) for a in t.assignments],
        )
        for t in wanted
    ]
    validate_only = bool(req.validate_only)
    results = await quorum.execute(
        lambda c: c.create_partitions(topics, validate_only=validate_only)
    )
    return CreatePartitionsResponse(
        throttle_time_ms=0,
        results=[
            CreatePartitionsResponse.CreatePartitionsTopicResult(
                name=r.name, error_code=r.error_code, error_message=r.error_message
            )
            for r in results
        ],
    )
