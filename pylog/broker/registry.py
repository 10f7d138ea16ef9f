"""Handler registry: one function per Kafka API, registered with the versions it serves.

ApiVersions is built from this table. Every API is advertised from version 0 (old
librdkafka checks exact versions), but only versions the wire codec can decode
are served; an older one actually sent is answered with UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pylog.broker.context import RequestContext

# Returned by a handler that must not answer (Produce with acks=0).
NO_RESPONSE: Any = object()
# Returned by a handler to drop the connection without answering (failed acks=0 produce).
CLOSE_CONNECTION: Any = object()

HandlerResult = Any  # a response body, an Awaitable of one, or NO_RESPONSE
Handler = Callable[["RequestContext", Any], "HandlerResult | Awaitable[HandlerResult]"]


@dataclass(frozen=True)
class HandlerSpec:
    api_key: int
    min_version: int
    max_version: int
    fn: Handler
    name: str


_REGISTRY: dict[int, HandlerSpec] = {}


def handles(api_key: int, versions: tuple[int, int]) -> Callable[[Handler], Handler]:
    """Register ``fn`` as the handler of ``api_key`` for ``versions`` (inclusive range)."""

    def register(fn: Handler) -> Handler:
        lo, hi = versions
        _REGISTRY[int(api_key)] = HandlerSpec(
            int(api_key), lo, hi, fn, getattr(api_key, "name", str(api_key))
        )
        return fn

    return register


def lookup(api_key: int) -> HandlerSpec | None:
    return _REGISTRY.get(api_key)


def advertised_versions(codec: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """ApiVersions table: min 0, max = what both the handler and the codec support."""
    out = {}
    for key, spec in sorted(_REGISTRY.items()):
        lo_hi = codec.get(key)
        if lo_hi is None:
            continue
        hi = min(spec.max_version, lo_hi[1])
        if hi >= max(spec.min_version, lo_hi[0]):
            out[key] = (0, hi)
    return out


def served_floor(api_key: int, codec: dict[int, tuple[int, int]]) -> int:
    """Lowest version actually served (advertised ranges start at 0 regardless)."""
    spec = _REGISTRY[api_key]
    return max(spec.min_version, codec.get(api_key, (0, 0))[0])
