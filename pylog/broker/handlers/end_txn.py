"""EndTxn: commit or abort the producer's transaction.

The answer is sent once PrepareCommit / PrepareAbort is in `__transaction_state` and the
markers are written (see the transaction shell), so committed records are readable by then.
"""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import EndTxnRequest, EndTxnResponse

from pylog.broker.coordinators.txn_shell import TxnShell, fenced_error, not_available
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error

error_response = top_level_error(EndTxnResponse)


@serves(ApiKey.END_TXN, versions=(0, 3), error_response=error_response)
def end_txn(ctx: RequestContext, req: EndTxnRequest, *, txn: TxnShell) -> EndTxnResponse:
    shell = txn
    txn_id = req.transactional_id
    error = not_available(shell, txn_id) if txn_id else ErrorCode.INVALID_REQUEST
    if error is ErrorCode.NONE and shell is not None and shell.coordinator is not None:
        out = shell.coordinator.end_txn(
            txn_id, req.producer_id, req.producer_epoch, bool(req.committed), now_ms=shell.clock()
        )
        error = shell.apply(out, lambda _r, e: e)
    return EndTxnResponse(throttle_time_ms=0, error_code=fenced_error(error, ctx.api_version, 2))
