"""Handler tables: one function per Kafka API, bound to the few services it uses.

A handler module marks its function with ``@serves(api_key, versions)`` (an annotation, not a
registration); a listener's table is then built from an explicit list of ``route(fn, **services)``
(see ``pylog.broker.handlers``). ApiVersions is built from the table. Every API older than Kafka
3.7 is advertised from version 0 (old librdkafka checks exact versions), but only versions the wire
codec can decode are served; an older one actually sent is answered with UNSUPPORTED_VERSION. The
APIs added since (KIP-848, KIP-932, ...) are advertised from the lowest version served, as Kafka 4.2
advertises them: no old client checks them, and a client that picks the lowest advertised version
must get one that works (the share-group APIs start at 1; their version 0 was early access).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pylog.broker.network.context import RequestContext

# Returned by a handler that must not answer (Produce with acks=0).
NO_RESPONSE: Any = object()
# Returned by a handler to drop the connection without answering (failed acks=0 produce).
CLOSE_CONNECTION: Any = object()

# APIs below this key are advertised from version 0; from it on, from the lowest version served.
FIRST_EXACT_FLOOR_API = 68  # ConsumerGroupHeartbeat, the first API of Kafka 3.7

HandlerResult = Any  # a response body, an Awaitable of one, or NO_RESPONSE
Handler = Callable[["RequestContext", Any], "HandlerResult | Awaitable[HandlerResult]"]
ErrorResponse = Callable[[Any, int], Any]
"""An API's whole-request error answer: (request, error code) -> a response in which every entry
carries the code, echoing the request's topics and partitions so the client can match it."""


@dataclass(frozen=True)
class HandlerSpec:
    api_key: int
    min_version: int
    max_version: int
    fn: Handler
    name: str
    # None: the API has no error answer; a request that fails is answered by closing the connection
    error_response: ErrorResponse | None = None


def top_level_error(response: Callable[..., Any]) -> ErrorResponse:
    """The error response of an API whose answer is one top-level error code."""

    def error_response(_req: Any, code: int) -> Any:
        return response(error_code=code)

    return error_response


def serves(
    api_key: int, versions: tuple[int, int], error_response: ErrorResponse | None = None
) -> Callable[[Any], Any]:
    """Mark ``fn`` as the handler of ``api_key`` for ``versions`` (inclusive range), answering a
    request it cannot serve with ``error_response`` (defined next to it in its module)."""

    def mark(fn: Any) -> Any:
        fn.api_key = int(api_key)
        fn.versions = versions
        fn.api_name = getattr(api_key, "name", str(api_key))
        fn.error_response = error_response
        return fn

    return mark


def route(fn: Any, **services: Any) -> HandlerSpec:
    """A table entry: ``fn`` (marked with ``@serves``) with its services bound as keywords."""
    lo, hi = fn.versions
    bound = functools.partial(fn, **services) if services else fn
    return HandlerSpec(fn.api_key, lo, hi, bound, fn.api_name, fn.error_response)


class HandlerTable:
    """The handlers one listener serves, by API key, and the versions it advertises."""

    def __init__(self, specs: Iterable[HandlerSpec], codec: Mapping[int, tuple[int, int]]) -> None:
        self._specs: dict[int, HandlerSpec] = {}
        for spec in specs:
            if spec.api_key in self._specs:
                raise ValueError(f"two handlers for api key {spec.api_key} ({spec.name})")
            self._specs[spec.api_key] = spec
        self.advertised = advertised_versions(self._specs, codec)
        self._floors = {k: served_floor(self._specs[k], codec) for k in self.advertised}

    def lookup(self, api_key: int) -> HandlerSpec | None:
        return self._specs.get(api_key)

    def served_floor(self, api_key: int) -> int:
        return self._floors.get(api_key, 0)


def advertised_versions(
    specs: Mapping[int, HandlerSpec], codec: Mapping[int, tuple[int, int]]
) -> dict[int, tuple[int, int]]:
    """ApiVersions table: max = what both the handler and the codec support; min 0 for the APIs
    old clients check exactly, the lowest served version for the newer ones."""
    out = {}
    for key, spec in sorted(specs.items()):
        lo_hi = codec.get(key)
        if lo_hi is None:
            continue
        hi = min(spec.max_version, lo_hi[1])
        lo = max(spec.min_version, lo_hi[0])
        if hi >= lo:
            out[key] = (0 if key < FIRST_EXACT_FLOOR_API else lo, hi)
    return out


def served_floor(spec: HandlerSpec, codec: Mapping[int, tuple[int, int]]) -> int:
    """Lowest version actually served (advertised ranges of older APIs start at 0 regardless)."""
    return max(spec.min_version, codec.get(spec.api_key, (0, 0))[0])
