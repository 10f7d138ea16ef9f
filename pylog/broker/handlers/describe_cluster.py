"""DescribeCluster: the brokers, the controller and the cluster id."""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.context import RequestContext
from pylog.broker.registry import handles

BROKERS_ENDPOINT = 1
AUTHORIZED_OPS_UNKNOWN = -2147483648


@handles(ApiKey.DESCRIBE_CLUSTER, versions=(0, 1))
def describe_cluster(ctx: RequestContext, req: Any) -> dict:
    md = ctx.broker.metadata
    endpoint_type = getattr(req, "endpoint_type", BROKERS_ENDPOINT)
    if endpoint_type != BROKERS_ENDPOINT:
        return {
            "error_code": ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            "error_message": "Only the broker endpoint type is served",
            "endpoint_type": endpoint_type,
            "cluster_id": md.cluster_id,
            "controller_id": -1,
            "brokers": [],
        }
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": BROKERS_ENDPOINT,
        "cluster_id": md.cluster_id,
        "controller_id": md.controller_id,
        "brokers": [
            {"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack} for b in md.brokers()
        ],
        "cluster_authorized_operations": AUTHORIZED_OPS_UNKNOWN,
    }
