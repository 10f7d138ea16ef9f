"""Client quota enforcement on a listener: the quota core (``pylog.quotas.client``) kept in step
with the metadata image and applied to every request, whatever its API.

After a request is handled, its client's usage is counted (produce request bytes, fetch response
bytes, the time the request kept the broker busy) and, when over a quota, the response goes out at
once carrying ``throttle_time_ms`` and the connection reads nothing more for that long (KIP-219:
the client also holds back). A throttled consumer fetch is answered without records, its bytes
taken back out of the rate, and every consumer fetch is capped to what the quota lets through from
a quiet start (Kafka's ``getMaxValueInQuotaWindow``), so one large response cannot stay throttled
forever. Followers' fetches and the transaction coordinator's markers are exempt, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pylog.protocol.api import ApiKey, response_class

from pylog.broker.network.context import RequestContext
from pylog.clock import SYSTEM_CLOCK
from pylog.cluster.image import MetadataImage
from pylog.quotas.client import ClientQuotas
from pylog.security.quotas import ConnectionQuotas

EXEMPT = frozenset({ApiKey.WRITE_TXN_MARKERS, ApiKey.ALTER_PARTITION})
"""Cluster actions Kafka never throttles (followers' fetches are recognised per request)."""

_HAS_THROTTLE: dict[int, bool] = {}


def is_follower_fetch(req: Any) -> bool:
    if getattr(req, "replica_id", -1) >= 0:
        return True
    state = getattr(req, "replica_state", None)
    return state is not None and state.replica_id >= 0


def has_throttle_field(api_key: int) -> bool:
    known = _HAS_THROTTLE.get(api_key)
    if known is None:
        try:
            known = "throttle_time_ms" in response_class(api_key)._fields
        except KeyError:
            known = False
        _HAS_THROTTLE[api_key] = known
    return known


def with_throttle(api_key: int, body: Any, throttle_ms: int) -> Any:
    """``body`` with ``throttle_time_ms`` set, for any response that has the field."""
    if not has_throttle_field(api_key):
        return body
    if isinstance(body, dict):
        return {**body, "throttle_time_ms": throttle_ms}
    if hasattr(body, "throttle_time_ms"):
        body.throttle_time_ms = throttle_ms
    return body


def without_records(body: Any) -> Any:
    """A fetch response with every partition's records emptied (its offsets and errors kept)."""

    def get(node: Any, name: str) -> Any:
        return node.get(name) if isinstance(node, dict) else getattr(node, name, None)

    for topic in get(body, "responses") or ():
        for part in get(topic, "partitions") or ():
            if isinstance(part, dict):
                part["records"] = b""
            else:
                part.records = b""
    return body


class QuotaEnforcer:
    """The broker's client quotas, shared by its client listeners."""

    def __init__(
        self,
        quotas: ClientQuotas,
        image: Callable[[], MetadataImage | None],
        connections: ConnectionQuotas | None = None,
        clock: Callable[[], int] = SYSTEM_CLOCK.monotonic_ms,
    ) -> None:
        self.quotas = quotas
        self._image = image
        self._connections = connections
        self._generation = -1
        self._image_id = 0
        self.clock = clock

    def sync(self) -> None:
        """Take the image's quotas if they changed."""
        image = self._image()
        if image is None:
            return
        if image.client_quota_generation == self._generation and id(image) == self._image_id:
            return
        self._generation, self._image_id = image.client_quota_generation, id(image)
        self.quotas.update(image.client_quotas)
        if self._connections is not None:
            self._connections.set_ip_rates(self.quotas.ip_rates)

    @property
    def active(self) -> bool:
        """Whether any produce, fetch or request quota is set (else nothing is measured)."""
        return self.quotas.enabled

    def throttle_connection(self, address: str) -> int:
        """Milliseconds to hold a new connection from ``address`` before closing it (0: accept)."""
        self.sync()
        if self._connections is None:
            return 0
        return self._connections.throttle_ip(address, self.clock())

    def before(self, ctx: RequestContext, req: Any) -> None:
        """Cap a consumer's fetch to what its quota can let through (Kafka caps ``max_bytes``)."""
        self.sync()
        if ctx.api_key != ApiKey.FETCH or not self.quotas.fetch.enabled or is_follower_fetch(req):
            return
        cap = self.quotas.fetch_max_bytes(ctx.principal.name, ctx.client_id or "")
        if cap is not None and getattr(req, "max_bytes", None) is not None and req.max_bytes > cap:
            req.max_bytes = cap

    def after(
        self,
        ctx: RequestContext,
        req: Any,
        *,
        request_bytes: int,
        response_bytes: int,
        busy_ns: int,
        answered: bool,
    ) -> int:
        """Count this request against its client's quotas; the throttle time it earned."""
        q = self.quotas
        if not q.enabled or ctx.api_key in EXEMPT:
            return 0
        user, client_id, t = ctx.principal.name, ctx.client_id or "", self.clock()
        if ctx.api_key == ApiKey.PRODUCE:
            return q.on_produce(user, client_id, request_bytes, busy_ns, not answered, t)
        if ctx.api_key == ApiKey.FETCH:
            if is_follower_fetch(req):
                return 0
            return q.on_fetch(user, client_id, response_bytes, busy_ns, t)
        return q.on_request(user, client_id, busy_ns, t)
