"""Which quota applies to a request, and how long its client is throttled (Kafka's
``ClientQuotaManager`` with its default quota callback, and ``ClientRequestQuotaManager``).

Theory of operation
-------------------
Quotas are set on ``user`` and ``client-id`` entities, each name given or the default. For a
request from user U with client id C, the first of these that has the key set is the quota, in
Kafka's order of precedence:

    1. user U, client-id C          5. user default, client-id default
    2. user U, client-id default    6. user default
    3. user U                       7. client-id C
    4. user default, client-id C    8. client-id default

The entity found also says who shares the rate it is measured against (Kafka's metric tags): a
quota on user U alone (3) or on the default user (6) is one rate per user, shared by all its client
ids; one on client ids alone (7, 8) is one rate per client id, whatever the user; the others are one
rate per (user, client id). A default quota is thus a separate quota for each user or client id it
applies to, never one shared by all of them. A request with no quota is not measured.

Each quota key has its own manager: ``producer_byte_rate`` counts produce request bytes,
``consumer_byte_rate`` fetch response bytes, ``request_percentage`` the time requests keep the
broker busy, in percent of one thread (so 200 is two threads' worth). Rates are ``SampledRate``s
over ``quota.window.num`` windows of ``quota.window.size.seconds``; a rate over its quota gives the
client a throttle time (``pylog.quotas.rate``), bounded by one window for request time as Kafka
bounds it. Rates a client has not fed for an hour are forgotten.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pylog.config import BrokerConfig, ConfigError
from pylog.quotas.entity import (
    CLIENT_ID,
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    IP,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    QuotaEntity,
)
from pylog.quotas.rate import SampledRate, throttle_time_ms


class _Default:
    """The default name of an entity type (``<default>``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<default>"


DEFAULT = _Default()
Tags = tuple[str, str]  # (user, client id) the rate is kept for; "" where not part of it

INACTIVE_EXPIRY_MS = 3_600_000
PERCENT_PER_NANO = 100.0 / 1e9  # request time in percent of one thread's second


def _part(name: str | None) -> str | _Default:
    return DEFAULT if name is None else name


def split_entity(entity: QuotaEntity) -> tuple[object, object] | None:
    """``(user part, client-id part)`` of a user / client-id entity, None for any other."""
    parts = dict(entity)
    if IP in parts or not parts:
        return None
    user = _part(parts[USER]) if USER in parts else None
    client = _part(parts[CLIENT_ID]) if CLIENT_ID in parts else None
    return user, client


@dataclass(slots=True)
class _Sensor:
    rate: SampledRate
    last_ms: int


class QuotaManager:
    """The quotas of one key and the rates they are measured with."""

    def __init__(self, key: str, samples: int, window_ms: int, *, max_throttle_ms: int | None = None) -> None:
        self.key = key
        self.samples = samples
        self.window_ms = window_ms
        self.max_throttle_ms = max_throttle_ms
        self._overrides: dict[tuple[object, object], float] = {}
        self._sensors: dict[Tags, _Sensor] = {}
        self._tags: dict[tuple[str, str], Tags] = {}
        self._swept_ms = 0

    def set_quotas(self, overrides: Mapping[tuple[object, object], float]) -> None:
        """Replace the quotas (``(user part, client-id part) -> bound``); rates are kept."""
        self._overrides = dict(overrides)
        self._tags.clear()

    @property
    def enabled(self) -> bool:
        return bool(self._overrides)

    def metric_tags(self, user: str, client_id: str) -> Tags:
        """Who shares the rate a request of ``user`` / ``client_id`` is measured against."""
        cached = self._tags.get((user, client_id))
        if cached is not None:
            return cached
        o = self._overrides
        if (user, client_id) in o or (user, DEFAULT) in o:
            tags = (user, client_id)
        elif (user, None) in o:
            tags = (user, "")
        elif (DEFAULT, client_id) in o or (DEFAULT, DEFAULT) in o:
            tags = (user, client_id)
        elif (DEFAULT, None) in o:
            tags = (user, "")
        else:
            tags = ("", client_id)
        if len(self._tags) > 100_000:
            self._tags.clear()
        self._tags[(user, client_id)] = tags
        return tags

    def limit(self, tags: Tags) -> float | None:
        """The quota of a rate, or None (unbounded)."""
        user, client = tags
        o = self._overrides
        if user and client:
            candidates: tuple[tuple[object, object], ...] = (
                (user, client),
                (user, DEFAULT),
                (DEFAULT, client),
                (DEFAULT, DEFAULT),
            )
        elif user:
            candidates = ((user, None), (DEFAULT, None))
        elif client:
            candidates = ((None, client), (None, DEFAULT))
        else:
            return None
        for c in candidates:
            bound = o.get(c)
            if bound is not None:
                return bound
        return None

    def quota(self, user: str, client_id: str) -> float | None:
        return self.limit(self.metric_tags(user, client_id))

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Count ``value`` for this client; the throttle time it has earned (0 within its quota)."""
        if not self._overrides:
            return 0
        tags = self.metric_tags(user, client_id)
        bound = self.limit(tags)
        if bound is None:
            return 0
        sensor = self._sensor(tags, now_ms)
        sensor.rate.record(value, now_ms)
        return throttle_time_ms(sensor.rate, bound, now_ms, self.max_throttle_ms)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a value recorded for a response that was not sent (a throttled fetch)."""
        sensor = self._sensors.get(self.metric_tags(user, client_id))
        if sensor is not None:
            sensor.rate.record(-value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """The most one response may carry without being throttled from a quiet start (Kafka caps a
        consumer's fetch size with it, or a fetch larger than this would be throttled forever)."""
        bound = self.quota(user, client_id)
        if bound is None:
            return None
        return bound * (self.samples - 1) * self.window_ms / 1000.0

    def rate(self, user: str, client_id: str, now_ms: int) -> float:
        """The measured rate of this client (0 if it is not measured)."""
        sensor = self._sensors.get(self.metric_tags(user, client_id))
        return 0.0 if sensor is None else sensor.rate.measure(now_ms)

    def _sensor(self, tags: Tags, now_ms: int) -> _Sensor:
        if now_ms - self._swept_ms >= 60_000:
            self._swept_ms = now_ms
            dead = [t for t, s in self._sensors.items() if now_ms - s.last_ms >= INACTIVE_EXPIRY_MS]
            for t in dead:
                del self._sensors[t]
        sensor = self._sensors.get(tags)
        if sensor is None:
            sensor = self._sensors[tags] = _Sensor(SampledRate(self.samples, self.window_ms), now_ms)
        sensor.last_ms = now_ms
        return sensor


class ClientQuotas:
    """The broker's client quotas: produce and fetch bandwidth and request time, per principal and
    client id, and the connection creation rate per client address."""

    def __init__(self, samples: int = 11, window_s: int = 1) -> None:
        window_ms = window_s * 1000
        self.samples, self.window_ms = samples, window_ms
        self.produce = QuotaManager(PRODUCER_BYTE_RATE, samples, window_ms)
        self.fetch = QuotaManager(CONSUMER_BYTE_RATE, samples, window_ms)
        self.request = QuotaManager(REQUEST_PERCENTAGE, samples, window_ms, max_throttle_ms=window_ms)
        self.ip_rates: dict[str | None, float] = {}  # address (None: the default) -> connections per second

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ClientQuotas:
        samples, window_s = config.int("quota.window.num"), config.int("quota.window.size.seconds")
        if samples < 1:
            raise ConfigError(f"quota.window.num must be at least 1, got {samples}")
        if window_s < 1:
            raise ConfigError(f"quota.window.size.seconds must be at least 1, got {window_s}")
        return cls(samples, window_s)

    def update(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """Take the quotas of the metadata image."""
        by_key: dict[str, dict[tuple[object, object], float]] = {
            PRODUCER_BYTE_RATE: {},
            CONSUMER_BYTE_RATE: {},
            REQUEST_PERCENTAGE: {},
        }
        ip_rates: dict[str | None, float] = {}
        for entity, values in quotas.items():
            parts = dict(entity)
            if IP in parts:
                if CONNECTION_CREATION_RATE in values:
                    ip_rates[parts[IP]] = values[CONNECTION_CREATION_RATE]
                continue
            split = split_entity(entity)
            if split is None:
                continue
            for key, value in values.items():
                if key in by_key:
                    by_key[key][split] = value
        self.produce.set_quotas(by_key[PRODUCER_BYTE_RATE])
        self.fetch.set_quotas(by_key[CONSUMER_BYTE_RATE])
        self.request.set_quotas(by_key[REQUEST_PERCENTAGE])
        self.ip_rates = ip_rates

    # ---- Kafka's per-API rules (KafkaApis.handleProduceRequest / handleFetchRequest / the rest)

    def on_produce(
        self, user: str, client_id: str, request_bytes: int, busy_ns: int, acks0: bool, now_ms: int
    ) -> int:
        """Produce counts its request bytes; with acks=0 request time is not throttled."""
        bandwidth = self.produce.record(user, client_id, request_bytes, now_ms)
        busy = 0 if acks0 else self.request.record(user, client_id, busy_ns * PERCENT_PER_NANO, now_ms)
        return max(bandwidth, busy)

    def on_fetch(self, user: str, client_id: str, response_bytes: int, busy_ns: int, now_ms: int) -> int:
        """A consumer's fetch counts its response bytes; when throttled its data is not sent (the
        caller answers with no records) and so is taken back out of the rate."""
        busy = self.request.record(user, client_id, busy_ns * PERCENT_PER_NANO, now_ms)
        bandwidth = self.fetch.record(user, client_id, response_bytes, now_ms)
        throttle = max(bandwidth, busy)
        if throttle > 0:
            self.fetch.unrecord(user, client_id, response_bytes, now_ms)
        return throttle

    def on_request(self, user: str, client_id: str, busy_ns: int, now_ms: int) -> int:
        return self.request.record(user, client_id, busy_ns * PERCENT_PER_NANO, now_ms)

    def fetch_max_bytes(self, user: str, client_id: str) -> int | None:
        cap = self.fetch.max_value_in_window(user, client_id)
        return None if cap is None else max(int(cap), 1)

    @property
    def enabled(self) -> bool:
        return self.produce.enabled or self.fetch.enabled or self.request.enabled
