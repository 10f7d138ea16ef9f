"""DescribeClientQuotas (48) and AlterClientQuotas (49).

Describe is answered by any broker from its metadata image (DESCRIBE_CONFIGS on the cluster);
Alter runs on the controller (ALTER_CONFIGS on the cluster), which records ``ClientQuotaRecord``s
in the metadata log; brokers forward it. Rules in ``pylog.cluster.quota_control``.
"""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

from pylog.broker.access.authorization import Authorization
from pylog.broker.control.metadata import MetadataView
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.cluster.quorum import MetadataQuorum
from pylog.cluster.quota_control import (
    FilterComponent,
    QuotaAlteration,
    QuotaFilterError,
    QuotaOp,
    describe_quotas,
)
from pylog.security.acl_operations import AclOperation

describe_error = top_level_error(DescribeClientQuotasResponse)


@serves(ApiKey.DESCRIBE_CLIENT_QUOTAS, versions=(0, 1), error_response=describe_error)
def describe_client_quotas(
    ctx: RequestContext, req: DescribeClientQuotasRequest, *, metadata: MetadataView, authz: Authorization
) -> DescribeClientQuotasResponse:
    R = DescribeClientQuotasResponse
    if not authz.cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return R(throttle_time_ms=0, error_code=code, error_message=None, entries=None)
    components = [FilterComponent(c.entity_type, c.match_type, c.match) for c in req.components]
    try:
        found = describe_quotas(metadata.image.client_quotas, components, req.strict)
    except QuotaFilterError as exc:
        return R(throttle_time_ms=0, error_code=exc.code, error_message=str(exc), entries=None)
    entries = [
        R.EntryData(
            entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            values=[R.ValueData(key=k, value=v) for k, v in sorted(values.items())],
        )
        for entity, values in found
    ]
    return R(throttle_time_ms=0, error_code=0, error_message=None, entries=entries)


def alter_error(req: AlterClientQuotasRequest, code: int) -> AlterClientQuotasResponse:
    return AlterClientQuotasResponse(
        entries=[
            AlterClientQuotasResponse.EntryData(
                error_code=code,
                error_message=None,
                entity=[
                    AlterClientQuotasResponse.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                    for e in entry.entity
                ],
            )
            for entry in req.entries
        ]
    )


@serves(ApiKey.ALTER_CLIENT_QUOTAS, versions=(0, 1), error_response=alter_error)
async def alter_client_quotas(
    ctx: RequestContext, req: AlterClientQuotasRequest, *, quorum: MetadataQuorum, authz: Authorization
) -> AlterClientQuotasResponse:
    alterations = [
        QuotaAlteration(
            tuple((e.entity_type, e.entity_name) for e in entry.entity),
            [QuotaOp(op.key, op.value, op.remove) for op in entry.ops],
        )
        for entry in req.entries
    ]
    if not authz.cluster(ctx, AclOperation.ALTER_CONFIGS):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return AlterClientQuotasResponse(
            throttle_time_ms=0, entries=[_entry(a.entity, code, None) for a in alterations]
        )
    validate_only = req.validate_only
    results = await quorum.execute(lambda c: c.alter_client_quotas(alterations, validate_only=validate_only))
    return AlterClientQuotasResponse(
        throttle_time_ms=0, entries=[_entry(r.entity, r.error_code, r.error_message) for r in results]
    )


def _entry(
    entity: tuple[tuple[str, str | None], ...], code: int, message: str | None
) -> AlterClientQuotasResponse.EntryData:
    return AlterClientQuotasResponse.EntryData(
        error_code=code,
        error_message=message,
        entity=[AlterClientQuotasResponse.EntityData(entity_type=t, entity_name=n) for t, n in entity],
    )
