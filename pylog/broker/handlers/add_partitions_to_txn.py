"""AddPartitionsToTxn (v0-3, one transaction per request): partitions join the producer's transaction.

As in Kafka, a request naming a partition the cluster does not know is refused whole: those
partitions get UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED. Otherwise the
coordinator's single answer applies to every partition. The batched v4+ form is broker-to-broker
(verification) and not served. Authorization: WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED everywhere), WRITE on each topic (a refused topic gets
TOPIC_AUTHORIZATION_FAILED and the rest OPERATION_NOT_ATTEMPTED, as an unknown one does).
"""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

from pylog.broker.access.authorization import Authorization
from pylog.broker.control.metadata import MetadataView
from pylog.broker.coordinators.txn_shell import TxnShell, fenced_error, not_available
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.security.acl_operations import AclOperation, ResourceType


def error_response(req: AddPartitionsToTxnRequest, code: int) -> AddPartitionsToTxnResponse:
    if getattr(req, "transactions", None):
        return AddPartitionsToTxnResponse(error_code=code, results_by_transaction=[])
    return AddPartitionsToTxnResponse(
        error_code=code,
        results_by_topic_v3_and_below=[
            AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(
                name=t.name,
                results_by_partition=[
                    AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(
                        partition_index=p, partition_error_code=code
                    )
                    for p in t.partitions
                ],
            )
            for t in req.v3_and_below_topics or []
        ],
    )


@serves(ApiKey.ADD_PARTITIONS_TO_TXN, versions=(0, 3), error_response=error_response)
def add_partitions_to_txn(
    ctx: RequestContext,
    req: AddPartitionsToTxnRequest,
    *,
    txn: TxnShell,
    metadata: MetadataView,
    authz: Authorization,
) -> AddPartitionsToTxnResponse:
    requested = [(t.name, list(t.partitions)) for t in req.v3_and_below_topics]
    image = metadata.image
    writable = authz.filter(ctx, AclOperation.WRITE, ResourceType.TOPIC, (n for n, _ in requested))
    refused = {
        (name, p): ErrorCode.TOPIC_AUTHORIZATION_FAILED
        for name, ps in requested
        for p in ps
        if name not in writable
    }
    refused.update(
        {
            (name, p): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            for name, ps in requested
            for p in ps
            if name in writable and image.partition(name, p) is None
        }
    )
    errors: dict[tuple[str, int], ErrorCode] = {}
    if not authz.transactional_id(ctx, AclOperation.WRITE, req.v3_and_below_transactional_id):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        errors = {(name, p): code for name, ps in requested for p in ps}
    elif refused:
        for name, ps in requested:
            for p in ps:
                errors[(name, p)] = refused.get((name, p), ErrorCode.OPERATION_NOT_ATTEMPTED)
    else:
        error = _add(ctx, req, txn, [(name, p) for name, ps in requested for p in ps])
        errors = {(name, p): error for name, ps in requested for p in ps}
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0,
        results_by_topic_v3_and_below=[
            AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(
                name=name,
                results_by_partition=[
                    AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(
                        partition_index=p, partition_error_code=errors[(name, p)]
                    )
                    for p in ps
                ],
            )
            for name, ps in requested
        ],
    )


def _add(ctx: RequestContext, req: Any, shell: TxnShell, partitions: list[tuple[str, int]]) -> ErrorCode:
    txn_id = req.v3_and_below_transactional_id
    error = not_available(shell, txn_id) if txn_id else ErrorCode.INVALID_REQUEST
    if error is ErrorCode.NONE and shell is not None and shell.coordinator is not None:
        out = shell.coordinator.add_partitions_to_txn(
            txn_id,
            req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch,
            partitions,
            now_ms=shell.clock(),
        )
        error = shell.apply(out, lambda _r, e: e)
    return fenced_error(error, ctx.api_version, 2)
