"""ListTransactions: the transactional ids this broker coordinates, filtered by state, producer
id and (v1) how long the transaction has been running. Unknown state names are echoed back. Only
the transactional ids the caller may DESCRIBE are listed."""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import ListTransactionsRequest, ListTransactionsResponse

from pylog.broker.access.authorization import Authorization
from pylog.broker.coordinators.txn_shell import TxnShell
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.security.acl_operations import AclOperation, ResourceType
from pylog.txn import TxnState


@serves(ApiKey.LIST_TRANSACTIONS, versions=(0, 1))
def list_transactions(
    ctx: RequestContext, req: ListTransactionsRequest, *, txn: TxnShell, authz: Authorization
) -> ListTransactionsResponse:
    shell = txn
    names = list(req.state_filters or [])
    unknown = [n for n in names if TxnState.from_kafka_name(n) is None]
    if shell is None or shell.coordinator is None:
        return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE, unknown, [])
    error, listed = shell.coordinator.list_transactions(
        names,
        list(req.producer_id_filters or []),
        getattr(req, "duration_filter", -1),
        now_ms=shell.clock(),
    )
    states = [
        ListTransactionsResponse.TransactionState(
            transactional_id=t.transactional_id,
            producer_id=t.producer_id,
            transaction_state=t.transaction_state,
        )
        for t in listed
    ]
    visible = authz.filter(
        ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, (s.transactional_id for s in states),
        audit=False,
    )
    states = [s for s in states if s.transactional_id in visible]
    return _answer(error, unknown, states)


def _answer(
    error: int, unknown: list[str], states: list[ListTransactionsResponse.TransactionState]
) -> ListTransactionsResponse:
    return ListTransactionsResponse(
        throttle_time_ms=0, error_code=error, unknown_state_filters=unknown, transaction_states=states
    )
