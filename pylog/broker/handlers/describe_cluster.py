"""DescribeCluster: the cluster id, its nodes and a controller, and, when asked, the caller's
authorized operations on the cluster (0 without DESCRIBE on it).

On a client listener it lists the live brokers (v2: the fenced ones too, when asked) and names a
random live broker as the controller, as Kafka's KRaft brokers do: that broker forwards. On the
controller listener (KIP-919, ``--bootstrap-controller`` tools) it lists the controllers and names
the active one; there it needs ALTER on the cluster, as on Kafka's controllers. Each listener
answers only its own endpoint type (MISMATCHED_ENDPOINT_TYPE otherwise; INVALID_REQUEST in v0).
"""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import DescribeClusterRequest, DescribeClusterResponse

from pylog.broker.access.authorization import Authorization
from pylog.broker.control.metadata import MetadataView, controller_for_clients
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.cluster.node_config import NodeSettings
from pylog.cluster.quorum import MetadataQuorum
from pylog.security.acl_operations import AclOperation, ResourceType, operations_if_requested

BROKERS_ENDPOINT = 1
CONTROLLERS_ENDPOINT = 2
_NAMES = {BROKERS_ENDPOINT: "BROKER", CONTROLLERS_ENDPOINT: "CONTROLLER"}


error_response = top_level_error(DescribeClusterResponse)


@serves(ApiKey.DESCRIBE_CLUSTER, versions=(0, 2), error_response=error_response)
def describe_cluster(
    ctx: RequestContext, req: DescribeClusterRequest, *, metadata: MetadataView, authz: Authorization,
    node_id: int,
) -> DescribeClusterResponse:
    md = metadata
    refused = _endpoint_error(ctx, req, BROKERS_ENDPOINT)
    if refused is not None:
        return refused
    if getattr(req, "include_fenced_brokers", False):
        brokers = [
            _node(b.broker_id, e.host, e.port, b.rack, b.fenced)
            for b in sorted(md.image.brokers.values(), key=lambda b: b.broker_id)
            if b.endpoints
            for e in [next((e for e in b.endpoints if e.name == ctx.listener), b.endpoints[0])]
        ]
    else:
        brokers = [_node(node, host, port, rack) for node, host, port, rack in md.brokers(ctx.listener)]
    controller = controller_for_clients(md, node_id, ctx.listener)
    return _answer(ctx, req, authz, BROKERS_ENDPOINT, md.cluster_id, controller, brokers)


@serves(ApiKey.DESCRIBE_CLUSTER, versions=(0, 2), error_response=error_response)
def describe_cluster_controllers(
    ctx: RequestContext,
    req: DescribeClusterRequest,
    *,
    quorum: MetadataQuorum,
    settings: NodeSettings,
    cluster_id: str,
    authz: Authorization,
) -> DescribeClusterResponse:
    refused = _endpoint_error(ctx, req, CONTROLLERS_ENDPOINT)
    if refused is not None:
        return refused
    if not authz.cluster(ctx, AclOperation.ALTER):
        return DescribeClusterResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, cluster_id=cluster_id
        )
    controllers = _controllers(quorum, settings)
    leader = -1 if quorum.leader_id is None else quorum.leader_id
    return _answer(ctx, req, authz, CONTROLLERS_ENDPOINT, cluster_id, leader, controllers)


def _controllers(
    quorum: MetadataQuorum, settings: NodeSettings
) -> list[DescribeClusterResponse.DescribeClusterBroker]:
    """The voters with their controller endpoints: from the log when the quorum is dynamic
    (KIP-853, kraft.version 1), else from ``controller.quorum.voters``."""
    vs = quorum.voter_set
    if vs is None:
        return [_node(v.node_id, v.host, v.port, None) for v in settings.voters]
    out = []
    for v in vs.voters:
        e = v.endpoint(settings.controller_listener_name) or v.endpoint()
        if e is not None:
            out.append(_node(v.node_id, e.host, e.port, None))
    return out


def _node(
    node_id: int, host: str, port: int, rack: str | None, fenced: bool = False
) -> DescribeClusterResponse.DescribeClusterBroker:
    return DescribeClusterResponse.DescribeClusterBroker(
        broker_id=node_id, host=host, port=port, rack=rack, is_fenced=fenced
    )


def _endpoint_error(
    ctx: RequestContext, req: DescribeClusterRequest, served: int
) -> DescribeClusterResponse | None:
    wanted = getattr(req, "endpoint_type", BROKERS_ENDPOINT)
    if wanted == served:
        return None
    if wanted not in _NAMES:
        code = ErrorCode.INVALID_REQUEST if ctx.api_version == 0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        message = f"Unsupported endpoint type {wanted}"
    else:
        code = ErrorCode.INVALID_REQUEST if ctx.api_version == 0 else ErrorCode.MISMATCHED_ENDPOINT_TYPE
        message = (
            f"The request was sent to an endpoint of type {_NAMES[served]}, "
            f"but we wanted an endpoint of type {_NAMES[wanted]}"
        )
    return DescribeClusterResponse(error_code=code, error_message=message, cluster_id="", brokers=[])


def _answer(
    ctx: RequestContext,
    req: DescribeClusterRequest,
    authz: Authorization,
    endpoint_type: int,
    cluster_id: str,
    controller_id: int,
    nodes: list[DescribeClusterResponse.DescribeClusterBroker],
) -> DescribeClusterResponse:
    requested = req.include_cluster_authorized_operations
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=endpoint_type,
        cluster_id=cluster_id,
        # a controller the client could not resolve among the nodes would only confuse it
        controller_id=controller_id if any(n.broker_id == controller_id for n in nodes) else -1,
        brokers=nodes,
        cluster_authorized_operations=operations_if_requested(
            requested, ResourceType.CLUSTER, authz.allowed(ctx, ResourceType.CLUSTER, "kafka-cluster")
        )
        if not requested or authz.cluster(ctx, AclOperation.DESCRIBE)
        else 0,
    )
