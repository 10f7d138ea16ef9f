"""PylogClientMetrics (32002): what the clients connected to this broker last pushed (KIP-714),
for ``pylog.client_metrics`` and the notebook view. DESCRIBE on the cluster, as listing the
cluster's clients is (DescribeCluster's operations)."""

from __future__ import annotations

from pylog.protocol.api import PylogApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import PylogClientMetricsRequest, PylogClientMetricsResponse

from pylog.broker.access.authorization import Authorization
from pylog.broker.coordinators.telemetry_shell import TelemetryShell
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.security.acl_operations import AclOperation


@serves(PylogApiKey.CLIENT_METRICS, versions=(0, 0))
def client_metrics(
    ctx: RequestContext, req: PylogClientMetricsRequest, *, telemetry: TelemetryShell, authz: Authorization
) -> PylogClientMetricsResponse:
    if not authz.cluster(ctx, AclOperation.DESCRIBE):
        return PylogClientMetricsResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, clients=[]
        )
    wanted = None if req.client_instance_ids is None else set(req.client_instance_ids)
    clients = []
    for instance_id, inst in telemetry.manager.instances(telemetry.now_ms()):
        if wanted is not None and instance_id not in wanted:
            continue
        who, a = inst.identity, inst.assignment
        clients.append(
            PylogClientMetricsResponse.ClientInstance(
                client_instance_id=instance_id,
                client_id=who.client_id,
                client_software_name=who.client_software_name,
                client_software_version=who.client_software_version,
                client_source_address=who.client_source_address,
                client_source_port=-1 if who.client_source_port is None else who.client_source_port,
                principal=inst.principal,
                subscription_id=a.subscription_id,
                push_interval_ms=a.interval_ms,
                requested_metrics=list(a.metrics),
                pushes=inst.pushes,
                last_push_ms=inst.pushed_at_ms,
                terminating=inst.terminating,
                last_error_code=inst.last_error,
                metrics=inst.metrics if req.include_metrics else None,
            )
        )
    return PylogClientMetricsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, clients=clients)
