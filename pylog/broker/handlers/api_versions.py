"""ApiVersions: the version table of the listener the request came in on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pylog.protocol.api import ApiKey

from pylog.broker.context import RequestContext
from pylog.broker.handler_table import serves


@serves(ApiKey.API_VERSIONS, versions=(0, 4))
def api_versions(ctx: RequestContext, req: Any, *, table: Mapping[int, tuple[int, int]]) -> dict:
    return {
        "error_code": 0,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in table.items()],
        "throttle_time_ms": 0,
    }
