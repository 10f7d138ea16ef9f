"""InitProducerId: a fresh producer id (idempotent producers) or, with a transactional id, the
transaction coordinator's id and epoch for it (fencing older incarnations).

Ids come from blocks reserved through the metadata log, so they are never handed out twice,
even across restarts. PRODUCER_FENCED is reported as INVALID_PRODUCER_EPOCH before v4.
"""

from __future__ import annotations

from collections.abc import Awaitable

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import InitProducerIdRequest, InitProducerIdResponse

from pylog.broker.coordinators.producer_ids import ProducerIdManager
from pylog.broker.coordinators.txn_shell import TxnShell, fenced_error, not_available
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error

error_response = top_level_error(InitProducerIdResponse)


@serves(ApiKey.INIT_PRODUCER_ID, versions=(0, 4), error_response=error_response)
def init_producer_id(
    ctx: RequestContext, req: InitProducerIdRequest, *, producer_ids: ProducerIdManager, txn: TxnShell
) -> InitProducerIdResponse | Awaitable[InitProducerIdResponse]:
    if req.transactional_id is not None:
        return _transactional(ctx, req, txn)
    pid = producer_ids.next_now()
    if pid is not None:
        return _answer(0, pid, 0)
    return _allocate(producer_ids)


async def _allocate(producer_ids: ProducerIdManager) -> InitProducerIdResponse:
    try:
        pid = await producer_ids.next()
    except Exception:
        return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1)
    return _answer(0, pid, 0)


async def _transactional(
    ctx: RequestContext, req: InitProducerIdRequest, shell: TxnShell
) -> InitProducerIdResponse:
    txn_id = req.transactional_id
    assert txn_id is not None  # only transactional requests come here
    if txn_id and (error := not_available(shell, txn_id)) is not ErrorCode.NONE:
        return _answer(error, -1, -1)
    if shell is None:
        return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1)
    try:
        await shell.reserve_producer_id()  # the coordinator's allocator cannot wait
    except Exception:
        return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1)
    if txn_id and (error := not_available(shell, txn_id)) is not ErrorCode.NONE:
        return _answer(error, -1, -1)  # lost the partition while waiting
    if shell.coordinator is None:
        return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1)
    out = shell.coordinator.init_producer_id(
        txn_id,
        req.transaction_timeout_ms,
        producer_id=getattr(req, "producer_id", -1),
        producer_epoch=getattr(req, "producer_epoch", -1),
        now_ms=shell.clock(),
    )
    result = shell.apply(out, lambda r, e: type(r)(e))
    return _answer(fenced_error(result.error, ctx.api_version, 4), result.producer_id, result.producer_epoch)


def _answer(code: int, pid: int, epoch: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch)
