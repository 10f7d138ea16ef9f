"""DeleteTopics: by name (v0-5) or by name or id (v6); the logs go when the removal applies.
Each topic needs DELETE (TOPIC_AUTHORIZATION_FAILED); a topic id the caller may not DESCRIBE is
answered as unknown."""

from __future__ import annotations

import uuid
from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import DeleteTopicsRequest, DeleteTopicsResponse

from pylog.broker.access.authorization import Authorization
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.cluster.quorum import MetadataQuorum
from pylog.security.acl_operations import AclOperation

ZERO_UUID = uuid.UUID(int=0)


def error_response(req: DeleteTopicsRequest, code: int) -> DeleteTopicsResponse:
    names = [t.name for t in req.topics] if getattr(req, "topics", None) else req.topic_names
    return DeleteTopicsResponse(
        responses=[DeleteTopicsResponse.DeletableTopicResult(name=n, error_code=code) for n in names or []]
    )


@serves(ApiKey.DELETE_TOPICS, versions=(0, 6), error_response=error_response)
async def delete_topics(
    ctx: RequestContext, req: DeleteTopicsRequest, *, quorum: MetadataQuorum, authz: Authorization
) -> DeleteTopicsResponse:
    if getattr(req, "topics", None):
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(n, ZERO_UUID) for n in req.topic_names or []]
    refused: dict[tuple[Any, Any], tuple[int, str | None]] = {}
    for name, topic_id in wanted:
        if not name and topic_id != ZERO_UUID:
            topic = quorum.image.topic(topic_id)
            if topic is not None and not authz.topic(ctx, AclOperation.DESCRIBE, topic.name):
                refused[(name, topic_id)] = (ErrorCode.UNKNOWN_TOPIC_ID, None)
            elif topic is not None and not authz.topic(ctx, AclOperation.DELETE, topic.name):
                refused[(name, topic_id)] = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, topic.name)
        elif name and not authz.topic(ctx, AclOperation.DELETE, name):
            refused[(name, topic_id)] = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, name)
    answers = [
        DeleteTopicsResponse.DeletableTopicResult(
            name=shown, topic_id=topic_id, error_code=code, error_message=None
        )
        for (name, topic_id), (code, shown) in refused.items()
    ]
    wanted = [w for w in wanted if w not in refused]
    names = [n for n, _ in wanted if n]
    ids = [i for n, i in wanted if not n and i != ZERO_UUID]
    results = await quorum.execute(lambda c: c.delete_topics(names, ids))
    by_name = dict(zip(names, results[: len(names)]))
    by_id = dict(zip(ids, results[len(names) :]))
    responses: list[DeleteTopicsResponse.DeletableTopicResult] = []
    for name, topic_id in wanted:
        r = by_name.get(name) if name else by_id.get(topic_id)
        if r is None:  # neither a name nor an id
            responses.append(
                DeleteTopicsResponse.DeletableTopicResult(
                    name=name, topic_id=topic_id, error_code=42, error_message=None
                )
            )
            continue
        responses.append(
            DeleteTopicsResponse.DeletableTopicResult(
                name=r.name,
                topic_id=r.topic_id or ZERO_UUID,
                error_code=r.error_code,
                error_message=r.error_message,
            )
        )
    return DeleteTopicsResponse(throttle_time_ms=0, responses=[*responses, *answers])
