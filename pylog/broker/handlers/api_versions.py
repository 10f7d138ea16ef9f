"""ApiVersions: the version table built from the handler registry."""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey

from pylog.broker.context import RequestContext
from pylog.broker.registry import handles


@handles(ApiKey.API_VERSIONS, versions=(0, 4))
def api_versions(ctx: RequestContext, req: Any) -> dict:
    table = ctx.broker.server.api_versions
    return {
        "error_code": 0,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in table.items()],
        "throttle_time_ms": 0,
    }
