"""CreatePartitions: grow a topic's partition count through the controller."""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.context import RequestContext
from pylog.broker.metadata import Outcome
from pylog.broker.registry import handles


@handles(ApiKey.CREATE_PARTITIONS, versions=(0, 3))
async def create_partitions(ctx: RequestContext, req: Any) -> dict:
    md = ctx.broker.metadata
    validate_only = bool(req.validate_only)
    names = [t.name for t in req.topics]
    outcomes: list[Outcome | None] = []
    todo: list[tuple[int, str, int]] = []
    for i, t in enumerate(req.topics):
        info = md.topic(t.name)
        current = len(info.partitions) if info is not None else 0
        if names.count(t.name) > 1:
            outcomes.append(Outcome(ErrorCode.INVALID_REQUEST, "Duplicate topic in request."))
        elif info is None:
            outcomes.append(Outcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic does not exist."))
        elif t.count < current:
            outcomes.append(
                Outcome(
                    ErrorCode.INVALID_PARTITIONS,
                    f"The topic {t.name} currently has {current} partition(s); "
                    f"{t.count} would not be an increase.",
                )
            )
        elif t.count == current:
            outcomes.append(
                Outcome(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
            )
        elif t.assignments is not None and len(t.assignments) != t.count - current:
            outcomes.append(
                Outcome(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Attempted to add {t.count - current} additional partition(s), but only "
                    f"{len(t.assignments)} assignment(s) were specified.",
                )
            )
        else:
            outcomes.append(None)
            todo.append((i, t.name, t.count))
    if todo:
        results = await md.create_partitions([(n, c) for _, n, c in todo], validate_only=validate_only)
        for (i, _, _), outcome in zip(todo, results):
            outcomes[i] = outcome
    return {
        "throttle_time_ms": 0,
        "results": [
            {"name": t.name, "error_code": o.error, "error_message": o.message}
            for t, o in zip(req.topics, outcomes)
            if o is not None
        ],
    }
