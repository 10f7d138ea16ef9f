"""ListConfigResources (74; ListClientMetricsResources until Kafka 4.1): the config resources of
the given types (DESCRIBE_CONFIGS on the cluster). Version 0 lists CLIENT_METRICS resources (the
telemetry subscriptions) only; version 1 also groups with configs, brokers (as BROKER_LOGGER and
BROKER), and topics, every type when none is named; a type it cannot list fails the request with
UNSUPPORTED_VERSION, as in Kafka."""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import ListConfigResourcesRequest, ListConfigResourcesResponse

from pylog.broker.access.authorization import Authorization
from pylog.broker.control.metadata import MetadataView
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.cluster.records import ConfigResourceType as T
from pylog.security.acl_operations import AclOperation

# Kafka's order of the listing
V1_TYPES = (T.GROUP, T.CLIENT_METRICS, T.BROKER_LOGGER, T.BROKER, T.TOPIC)


error_response = top_level_error(ListConfigResourcesResponse)


@serves(ApiKey.LIST_CONFIG_RESOURCES, versions=(0, 1), error_response=error_response)
def list_config_resources(
    ctx: RequestContext, req: ListConfigResourcesRequest, *, metadata: MetadataView, authz: Authorization
) -> ListConfigResourcesResponse:
    if not authz.cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        return _answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    supported = V1_TYPES if ctx.api_version >= 1 else (T.CLIENT_METRICS,)
    asked = list(getattr(req, "resource_types", None) or supported)
    if any(t not in supported for t in asked):
        return _answer(ErrorCode.UNSUPPORTED_VERSION)
    image = metadata.image
    out: list[ListConfigResourcesResponse.ConfigResource] = []
    for rtype in supported:
        if rtype not in asked:
            continue
        if rtype in (T.GROUP, T.CLIENT_METRICS):
            names = image.config_resources(rtype)
        elif rtype in (T.BROKER_LOGGER, T.BROKER):
            names = [
                str(b.broker_id)
                for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
                if not b.fenced
            ]
        else:
            names = sorted(image.topics)
        out.extend(
            ListConfigResourcesResponse.ConfigResource(resource_name=n, resource_type=int(rtype))
            for n in names
        )
    return _answer(ErrorCode.NONE, out)


def _answer(
    code: int, resources: list[ListConfigResourcesResponse.ConfigResource] | None = None
) -> ListConfigResourcesResponse:
    return ListConfigResourcesResponse(throttle_time_ms=0, error_code=code, config_resources=resources or [])
