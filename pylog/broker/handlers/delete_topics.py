"""DeleteTopics: by name (v0-5) or by name or id (v6); the logs go when the removal applies."""

from __future__ import annotations

import uuid
from typing import Any

from pylog.protocol.api import ApiKey

from pylog.broker.context import RequestContext
from pylog.broker.registry import serves
from pylog.cluster.quorum import MetadataQuorum

ZERO_UUID = uuid.UUID(int=0)


@serves(ApiKey.DELETE_TOPICS, versions=(0, 6))
async def delete_topics(ctx: RequestContext, req: Any, *, quorum: MetadataQuorum) -> dict:
    if getattr(req, "topics", None):
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(n, ZERO_UUID) for n in req.topic_names or []]
    names = [n for n, _ in wanted if n]
    ids = [i for n, i in wanted if not n and i != ZERO_UUID]
    results = await quorum.execute(lambda c: c.delete_topics(names, ids))
    by_name = dict(zip(names, results[: len(names)]))
    by_id = dict(zip(ids, results[len(names) :]))
    responses = []
    for name, topic_id in wanted:
        r = by_name.get(name) if name else by_id.get(topic_id)
        if r is None:  # neither a name nor an id
            responses.append({"name": name, "topic_id": topic_id, "error_code": 42, "error_message": None})
            continue
        responses.append(
            {
                "name": r.name,
                "topic_id": r.topic_id or ZERO_UUID,
                "error_code": r.error_code,
                "error_message": r.error_message,
            }
        )
    return {"throttle_time_ms": 0, "responses": responses}
