"""UpdateFeatures: change finalized feature levels, decided by the active controller (brokers
forward it there) under Kafka's rules (``pylog.cluster.feature_control``).

Version 0 names a downgrade with ``allow_downgrade`` (a safe downgrade), later versions with
``upgrade_type``. The answer carries one result per feature up to version 1, none from version 2
on, and a top-level error when the update failed (then every feature failed with it).
"""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.messages import UpdateFeaturesRequest, UpdateFeaturesResponse

from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.cluster.feature_control import FeatureUpdate, UpgradeType
from pylog.cluster.quorum import MetadataQuorum

error_response = top_level_error(UpdateFeaturesResponse)


@serves(ApiKey.UPDATE_FEATURES, versions=(0, 2), error_response=error_response)
async def update_features(
    ctx: RequestContext, req: UpdateFeaturesRequest, *, quorum: MetadataQuorum
) -> UpdateFeaturesResponse:
    updates = [
        FeatureUpdate(
            u.feature,
            u.max_version_level,
            (UpgradeType.SAFE_DOWNGRADE if u.allow_downgrade else UpgradeType.UPGRADE)
            if ctx.api_version == 0
            else u.upgrade_type,
        )
        for u in req.feature_updates
    ]
    validate_only = bool(getattr(req, "validate_only", False))
    result = await quorum.execute(
        lambda c: c.update_features(updates, node_id=quorum.node_id, validate_only=validate_only)
    )
    body = UpdateFeaturesResponse(
        throttle_time_ms=0, error_code=result.error_code, error_message=result.error_message, results=[]
    )
    if result.error_code == 0 and ctx.api_version <= 1:
        body.results = [
            UpdateFeaturesResponse.UpdatableFeatureResult(feature=u.feature, error_code=0, error_message=None)
            for u in req.feature_updates
        ]
    return body
