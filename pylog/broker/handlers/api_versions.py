"""ApiVersions: the version table of the listener the request came in on, with the feature levels
this node supports and those the cluster finalized (KIP-584).

The finalized levels are read from the node's metadata image; their epoch is the image's offset.
``kraft.version`` is finalized by the Raft log's own control records (KIP-853), not by a
FeatureLevelRecord, so it is read from the quorum.
Before version 4 a supported feature whose lowest level is 0 is left out: older clients cannot
read such a range (Kafka's KAFKA-17492 rule).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pylog.protocol.api import ApiKey
from pylog.protocol.messages import ApiVersionsRequest, ApiVersionsResponse

from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.cluster.features import KRAFT_VERSION, SUPPORTED
from pylog.cluster.image import MetadataImage

FIRST_FEATURES_VERSION = 3


@serves(ApiKey.API_VERSIONS, versions=(0, 4))
def api_versions(
    ctx: RequestContext,
    req: ApiVersionsRequest,
    *,
    table: Mapping[int, tuple[int, int]],
    image: Callable[[], MetadataImage | None],
    kraft_version: Callable[[], int],
) -> ApiVersionsResponse:
    body = ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in table.items()
        ],
        throttle_time_ms=0,
    )
    if ctx.api_version >= FIRST_FEATURES_VERSION:
        body.supported_features = [
            ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=lo, max_version=hi)
            for name, (lo, hi) in sorted(SUPPORTED.items())
            if lo > 0 or ctx.api_version >= 4
        ]
        current = image()
        if current is not None:
            body.finalized_features_epoch = current.offset
            finalized = dict(current.features)
            if kraft := kraft_version():
                finalized[KRAFT_VERSION] = kraft
            body.finalized_features = [
                ApiVersionsResponse.FinalizedFeatureKey(
                    name=name, max_version_level=level, min_version_level=level
                )
                for name, level in sorted(finalized.items())
            ]
    return body
