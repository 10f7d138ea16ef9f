"""FindCoordinator: the leader of the `__consumer_offsets` partition that holds a group (key type 0)
or of the `__transaction_state` partition that holds a transactional id (key type 1).

The first request creates the topic and waits for it (milliseconds with a quorum of one)
instead of answering COORDINATOR_NOT_AVAILABLE as Kafka does, so a fresh broker costs a first
consumer or transactional producer no retry back-off. v4+ batch several keys. A caller must
be allowed to DESCRIBE the group or transactional id it asks about.
"""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse

from pylog.broker.access.authorization import Authorization
from pylog.broker.control.metadata import MetadataView
from pylog.broker.coordinators.group_shell import GroupShell
from pylog.broker.coordinators.txn_shell import TxnShell
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.security.acl_operations import AclOperation

GROUP, TRANSACTION = 0, 1
NO_NODE = (-1, "", -1)
Answer = tuple[ErrorCode, tuple[int, str, int]]


error_response = top_level_error(FindCoordinatorResponse)


@serves(ApiKey.FIND_COORDINATOR, versions=(0, 6), error_response=error_response)
async def find_coordinator(
    ctx: RequestContext,
    req: FindCoordinatorRequest,
    *,
    groups: GroupShell,
    txn: TxnShell,
    metadata: MetadataView,
    authz: Authorization,
) -> FindCoordinatorResponse:
    key_type = getattr(req, "key_type", GROUP)
    keys = list(req.coordinator_keys or []) if ctx.api_version >= 4 else [req.key]
    answers = [
        await _find(groups, txn, metadata, key_type, key, ctx.listener)
        if (refused := _refused(ctx, authz, key_type, key)) is None
        else (refused, NO_NODE)
        for key in keys
    ]
    if ctx.api_version >= 4:
        return FindCoordinatorResponse(
            throttle_time_ms=0,
            coordinators=[
                FindCoordinatorResponse.Coordinator(
                    key=key,
                    node_id=node,
                    host=host,
                    port=port,
                    error_code=error,
                    error_message=_message(error),
                )
                for key, (error, (node, host, port)) in zip(keys, answers)
            ],
        )
    error, (node, host, port) = answers[0]
    return FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=error,
        error_message=_message(error),
        node_id=node,
        host=host,
        port=port,
    )


def _refused(ctx: RequestContext, authz: Authorization, key_type: int, key: str) -> ErrorCode | None:
    if key_type == GROUP and not authz.group(ctx, AclOperation.DESCRIBE, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if key_type == TRANSACTION and not authz.transactional_id(ctx, AclOperation.DESCRIBE, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return None


async def _find(
    groups: GroupShell, txn: TxnShell, metadata: MetadataView, key_type: int, key: str, listener: str
) -> Answer:
    if key_type == TRANSACTION:
        return await _find_transaction_coordinator(txn, metadata, key, listener)
    if key_type != GROUP:
        return ErrorCode.INVALID_REQUEST, NO_NODE
    shell = groups
    if shell is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE
    leaders = shell.offsets_leaders()
    if leaders is None:
        error = await shell.ensure_offsets_topic()
        if error is not ErrorCode.NONE:
            return error, NO_NODE
        leaders = shell.offsets_leaders()
    return _leader_of(metadata, leaders, shell.partition_for(key), listener)


async def _find_transaction_coordinator(
    shell: TxnShell, metadata: MetadataView, key: str, listener: str
) -> Answer:
    if not key:
        return ErrorCode.INVALID_REQUEST, NO_NODE
    if shell is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE
    leaders = shell.leaders()
    if leaders is None:
        error = await shell.ensure_topic()
        if error is not ErrorCode.NONE:
            return error, NO_NODE
        leaders = shell.leaders()
    return _leader_of(metadata, leaders, shell.partition_for(key), listener)


def _leader_of(
    metadata: MetadataView, leaders: dict[int, int] | None, partition: int, listener: str
) -> Answer:
    leader = (leaders or {}).get(partition, -1)
    for node, host, port, _rack in metadata.brokers(listener):
        if node == leader:
            return ErrorCode.NONE, (node, host, port)
    return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE


def _message(error: ErrorCode) -> str | None:
    return None if error is ErrorCode.NONE else error.name
