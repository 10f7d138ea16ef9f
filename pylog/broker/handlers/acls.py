"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31).

DescribeAcls is answered by any broker from its metadata image (DESCRIBE on the cluster).
CreateAcls and DeleteAcls run on the controller (ALTER on the cluster), which commits
AccessControlEntryRecord / RemoveAccessControlEntryRecord; brokers forward them with the
caller's principal. Without an authorizer all three answer SECURITY_DISABLED.
"""

from __future__ import annotations

from collections.abc import Iterable

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)

from pylog.broker.access.authorization import Authorization
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.cluster.quorum import MetadataQuorum
from pylog.security.acl import AclBinding, AclBindingFilter
from pylog.security.acl_operations import AclOperation

NO_AUTHORIZER = "No Authorizer is configured."
CLUSTER_DENIED = "Cluster authorization failed."


def _grouped(acls: Iterable[AclBinding]) -> list[DescribeAclsResponse.DescribeAclsResource]:
    by_resource: dict[tuple[int, str, int], list[DescribeAclsResponse.AclDescription]] = {}
    for a in acls:
        by_resource.setdefault((a.resource_type, a.resource_name, a.pattern_type), []).append(
            DescribeAclsResponse.AclDescription(
                principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission_type
            )
        )
    return [
        DescribeAclsResponse.DescribeAclsResource(
            resource_type=rt, resource_name=name, pattern_type=pt, acls=entries
        )
        for (rt, name, pt), entries in sorted(by_resource.items(), key=lambda item: item[0])
    ]


describe_acls_error = top_level_error(DescribeAclsResponse)


@serves(ApiKey.DESCRIBE_ACLS, versions=(0, 3), error_response=describe_acls_error)
def describe_acls(
    ctx: RequestContext, req: DescribeAclsRequest, *, authz: Authorization
) -> DescribeAclsResponse:
    if not authz.cluster(ctx, AclOperation.DESCRIBE):
        return _described(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED)
    if not authz.enabled:
        return _described(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    f = AclBindingFilter(
        req.resource_type_filter,
        req.resource_name_filter,
        req.pattern_type_filter,
        req.principal_filter,
        req.host_filter,
        req.operation,
        req.permission_type,
    )
    problem = f.unknown()
    if problem is not None:
        return _described(ErrorCode.INVALID_REQUEST, problem)
    return _described(ErrorCode.NONE, None, _grouped(a for a in authz.acls() if f.matches(a)))


def _described(
    code: int, message: str | None, resources: list[DescribeAclsResponse.DescribeAclsResource] | None = None
) -> DescribeAclsResponse:
    return DescribeAclsResponse(
        throttle_time_ms=0, error_code=code, error_message=message, resources=resources or []
    )


def create_acls_error(req: CreateAclsRequest, code: int, message: str | None = None) -> CreateAclsResponse:
    return CreateAclsResponse(
        throttle_time_ms=0,
        results=[
            CreateAclsResponse.AclCreationResult(error_code=code, error_message=message)
            for _ in req.creations
        ],
    )


@serves(ApiKey.CREATE_ACLS, versions=(0, 3), error_response=create_acls_error)
async def create_acls(
    ctx: RequestContext, req: CreateAclsRequest, *, quorum: MetadataQuorum, authz: Authorization
) -> CreateAclsResponse:
    denied = _refusal(ctx, authz)
    if denied is not None:
        return create_acls_error(req, *denied)
    bindings = [
        AclBinding(
            c.resource_type,
            c.resource_name,
            c.resource_pattern_type,
            c.principal,
            c.host,
            c.operation,
            c.permission_type,
        )
        for c in req.creations
    ]
    results = await quorum.execute(lambda c: c.create_acls(bindings))
    return CreateAclsResponse(
        throttle_time_ms=0,
        results=[
            CreateAclsResponse.AclCreationResult(error_code=r.error_code, error_message=r.error_message)
            for r in results
        ],
    )


def delete_acls_error(req: DeleteAclsRequest, code: int, message: str | None = None) -> DeleteAclsResponse:
    return DeleteAclsResponse(
        throttle_time_ms=0,
        filter_results=[
            DeleteAclsResponse.DeleteAclsFilterResult(
                error_code=code, error_message=message, matching_acls=[]
            )
            for _ in req.filters
        ],
    )


@serves(ApiKey.DELETE_ACLS, versions=(0, 3), error_response=delete_acls_error)
async def delete_acls(
    ctx: RequestContext, req: DeleteAclsRequest, *, quorum: MetadataQuorum, authz: Authorization
) -> DeleteAclsResponse:
    denied = _refusal(ctx, authz)
    if denied is not None:
        return delete_acls_error(req, *denied)
    filters = [
        AclBindingFilter(
            f.resource_type_filter,
            f.resource_name_filter,
            f.pattern_type_filter,
            f.principal_filter,
            f.host_filter,
            f.operation,
            f.permission_type,
        )
        for f in req.filters
    ]
    results = await quorum.execute(lambda c: c.delete_acls(filters))
    out = []
    for r in results:
        matching = [
            DeleteAclsResponse.DeleteAclsMatchingAcl(
                error_code=0,
                error_message=None,
                resource_type=a.resource_type,
                resource_name=a.resource_name,
                pattern_type=a.pattern_type,
                principal=a.principal,
                host=a.host,
                operation=a.operation,
                permission_type=a.permission_type,
            )
            for a in r.deleted
        ]
        out.append(
            DeleteAclsResponse.DeleteAclsFilterResult(
                error_code=r.error_code, error_message=r.error_message, matching_acls=matching
            )
        )
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=out)


def _refusal(ctx: RequestContext, authz: Authorization) -> tuple[int, str] | None:
    """(error code, message) when the caller may not change ACLs here."""
    if not authz.cluster(ctx, AclOperation.ALTER):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED
    if not authz.enabled:
        return ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER
    return None
