"""DescribeTransactions: state, producer, timeout and partitions of transactional ids (each needs
DESCRIBE; the topics of a transaction the caller may not DESCRIBE are left out)."""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import DescribeTransactionsRequest, DescribeTransactionsResponse

from pylog.broker.access.authorization import Authorization
from pylog.broker.coordinators.txn_shell import TxnShell, not_available
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.security.acl_operations import AclOperation
from pylog.txn import DescribedTransaction


@serves(ApiKey.DESCRIBE_TRANSACTIONS, versions=(0, 0))
def describe_transactions(
    ctx: RequestContext, req: DescribeTransactionsRequest, *, txn: TxnShell, authz: Authorization
) -> DescribeTransactionsResponse:
    shell = txn
    states = []
    for txn_id in req.transactional_ids:
        error = not_available(shell, txn_id) if txn_id else ErrorCode.NONE
        if not authz.transactional_id(ctx, AclOperation.DESCRIBE, txn_id):
            d = DescribedTransaction(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, txn_id)
        elif error is ErrorCode.NONE and shell is not None and shell.coordinator is not None:
            (d,) = shell.coordinator.describe_transactions([txn_id])
        else:
            d = DescribedTransaction(error, txn_id)
        states.append(
            DescribeTransactionsResponse.TransactionState(
                error_code=d.error,
                transactional_id=d.transactional_id,
                transaction_state=d.transaction_state,
                transaction_timeout_ms=d.transaction_timeout_ms,
                transaction_start_time_ms=d.transaction_start_time_ms,
                producer_id=d.producer_id,
                producer_epoch=d.producer_epoch,
                topics=[
                    DescribeTransactionsResponse.TopicData(topic=t, partitions=list(ps))
                    for t, ps in d.topics
                    if authz.topic(ctx, AclOperation.DESCRIBE, t)
                ],
            )
        )
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)
