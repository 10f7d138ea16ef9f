"""AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the producer's transaction.

The client then sends TxnOffsetCommit to the group coordinator; the transaction's marker in
that partition decides whether those offsets count.
"""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

from pylog.broker.coordinators.group_shell import GroupShell
from pylog.broker.coordinators.txn_shell import TxnShell, fenced_error, not_available
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error

error_response = top_level_error(AddOffsetsToTxnResponse)


@serves(ApiKey.ADD_OFFSETS_TO_TXN, versions=(0, 3), error_response=error_response)
def add_offsets_to_txn(
    ctx: RequestContext, req: AddOffsetsToTxnRequest, *, txn: TxnShell, groups: GroupShell
) -> AddOffsetsToTxnResponse:
    shell = txn
    txn_id = req.transactional_id
    error = not_available(shell, txn_id) if txn_id else ErrorCode.INVALID_REQUEST
    if error is ErrorCode.NONE and not req.group_id:
        error = ErrorCode.INVALID_GROUP_ID
    if error is ErrorCode.NONE and groups is None:
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error is ErrorCode.NONE and shell is not None and shell.coordinator is not None and groups is not None:
        out = shell.coordinator.add_offsets_to_txn(
            txn_id,
            req.producer_id,
            req.producer_epoch,
            groups.partition_for(req.group_id),
            now_ms=shell.clock(),
        )
        error = shell.apply(out, lambda _r, e: e)
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=fenced_error(error, ctx.api_version, 2))
