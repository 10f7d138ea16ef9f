"""InitProducerId for idempotent producers: a fresh producer id, epoch 0.

Ids come from blocks reserved through the metadata log, so they are never
handed out twice, even across restarts. Transactional ids belong to the
transaction coordinator and are answered with NOT_COORDINATOR until it exists.
"""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.context import RequestContext
from pylog.broker.registry import handles


@handles(ApiKey.INIT_PRODUCER_ID, versions=(0, 4))
def init_producer_id(ctx: RequestContext, req: Any) -> Any:
    if req.transactional_id is not None:
        return _answer(ErrorCode.NOT_COORDINATOR, -1, -1)
    pid = ctx.broker.producer_ids.next_now()
    if pid is not None:
        return _answer(0, pid, 0)
    return _allocate(ctx)


async def _allocate(ctx: RequestContext) -> dict:
    try:
        pid = await ctx.broker.producer_ids.next()
    except Exception:
        return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1)
    return _answer(0, pid, 0)


def _answer(code: int, pid: int, epoch: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": pid, "producer_epoch": epoch}
