"""DescribeCluster: the brokers, the controller, the cluster id and, when asked, the caller's
authorized operations on the cluster (0 without DESCRIBE on it)."""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.acl_operations import AclOperation, ResourceType, operations_if_requested
from pylog.broker.authorization import Authorization
from pylog.broker.context import RequestContext
from pylog.broker.handler_table import serves
from pylog.broker.metadata import MetadataView

BROKERS_ENDPOINT = 1


@serves(ApiKey.DESCRIBE_CLUSTER, versions=(0, 1))
def describe_cluster(ctx: RequestContext, req: Any, *, metadata: MetadataView, authz: Authorization) -> dict:
    md = metadata
    endpoint_type = getattr(req, "endpoint_type", BROKERS_ENDPOINT)
    body: dict[str, Any] = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": endpoint_type,
        "cluster_id": md.cluster_id,
        "controller_id": md.controller_id,
        "brokers": [
            {"broker_id": node, "host": host, "port": port, "rack": rack}
            for node, host, port, rack in md.brokers(ctx.listener)
        ],
        "cluster_authorized_operations": operations_if_requested(
            req.include_cluster_authorized_operations,
            ResourceType.CLUSTER,
            authz.allowed(ctx, ResourceType.CLUSTER, "kafka-cluster"),
        )
        if not req.include_cluster_authorized_operations or authz.cluster(ctx, AclOperation.DESCRIBE)
        else 0,
    }
    if endpoint_type != BROKERS_ENDPOINT:
        body.update(
            error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message="Only the brokers endpoint type is served",
            controller_id=-1,
            brokers=[],
        )
    return body
