"""Connection limits (Kafka's ``ConnectionQuotas``), sans-IO counting.

``max.connections`` bounds the connections of the whole node and
``listener.name.<listener>.max.connections`` those of one listener; ``max.connections.per.ip``
bounds each client address, with exceptions in ``max.connections.per.ip.overrides``
(``host:count,...``). A connection over a limit is closed as soon as it is accepted.

The ``connection_creation_rate`` client quota of an ``ip`` entity (or of the default ip) bounds how
fast one address may open connections, measured as client quotas are (``quota.window.num``
windows of ``quota.window.size.seconds``): a connection over the rate is not counted and is closed
once its throttle time (at most one window) has passed, as Kafka's acceptor closes it.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Mapping

from pylog.config import BrokerConfig, ConfigError
from pylog.model import INT32_MAX
from pylog.quotas.rate import SampledRate, throttle_time_ms

IP_SENSOR_EXPIRY_MS = 3_600_000


def parse_overrides(value: str | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in (value or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        try:
            if not sep or not host:
                raise ValueError
            out[host.strip("[]")] = int(count)
        except ValueError:
            raise ConfigError(f"max.connections.per.ip.overrides entry {item!r} is not host:count") from None
    return out


class ConnectionQuotas:
    def __init__(
        self,
        *,
        max_connections: int = INT32_MAX,
        per_ip: int = INT32_MAX,
        per_ip_overrides: Mapping[str, int] | None = None,
        per_listener: Mapping[str, int] | None = None,
        quota_samples: int = 11,
        quota_window_ms: int = 1000,
    ) -> None:
        self.max_connections = max_connections
        self.per_ip = per_ip
        self.per_ip_overrides = dict(per_ip_overrides or {})
        self.per_listener = dict(per_listener or {})
        self.total = 0
        self._by_ip: Counter[str] = Counter()
        self._by_listener: Counter[str] = Counter()
        self.refused = 0
        self.quota_samples, self.quota_window_ms = quota_samples, quota_window_ms
        self._ip_rates: dict[str | None, float] = {}  # address (None: the default) -> per second
        self._ip_sensors: dict[str, tuple[SampledRate, list[int]]] = {}  # address -> (rate, [last ms])
        self._swept_ms = 0
        self.throttled = 0

    @classmethod
    def from_config(cls, config: BrokerConfig, listeners: list[str]) -> ConnectionQuotas:
        per_listener = {}
        for name in listeners:
            raw = config.listener_raw(name, "max.connections")
            if raw is not None and raw != config.raw("max.connections"):
                per_listener[name] = int(raw)
        return cls(
            max_connections=config.int("max.connections"),
            per_ip=config.int("max.connections.per.ip"),
            per_ip_overrides=parse_overrides(config.raw("max.connections.per.ip.overrides")),
            per_listener=per_listener,
            quota_samples=max(config.int("quota.window.num"), 1),
            quota_window_ms=max(config.int("quota.window.size.seconds"), 1) * 1000,
        )

    def admit(self, listener: str, address: str) -> str | None:
        """Count a new connection, or say which limit refuses it (nothing is counted then)."""
        limit_ip = self.per_ip_overrides.get(address, self.per_ip)
        if self._by_ip[address] >= limit_ip:
            reason = f"max.connections.per.ip ({limit_ip}) reached for {address}"
        elif self.total >= self.max_connections:
            reason = f"max.connections ({self.max_connections}) reached"
        elif self._by_listener[listener] >= self.per_listener.get(listener, INT32_MAX):
            reason = (
                f"listener.name.{listener.lower()}.max.connections ({self.per_listener[listener]}) reached"
            )
        else:
            self.total += 1
            self._by_ip[address] += 1
            self._by_listener[listener] += 1
            return None
        self.refused += 1
        return reason

    def release(self, listener: str, address: str) -> None:
        self.total -= 1
        self._by_ip[address] -= 1
        if self._by_ip[address] <= 0:
            del self._by_ip[address]
        self._by_listener[listener] -= 1

    # --- connection_creation_rate (Kafka's ConnectionQuotas.recordIpConnectionMaybeThrottle) ---

    def set_ip_rates(self, rates: Mapping[str | None, float]) -> None:
        """The ``connection_creation_rate`` quotas by address (None: the default ip)."""
        self._ip_rates = {None if a is None else _canonical(a): r for a, r in rates.items()}

    def ip_rate(self, address: str) -> float | None:
        if not self._ip_rates:
            return None
        rate = self._ip_rates.get(_canonical(address))
        return self._ip_rates.get(None) if rate is None else rate

    def throttle_ip(self, address: str, now_ms: int) -> int:
        """Count a new connection of ``address`` against its creation rate: 0 when it may go on, else
        how long to hold it before closing it (it is then not counted)."""
        bound = self.ip_rate(address)
        if bound is None:
            return 0
        if now_ms - self._swept_ms >= 60_000:
            self._swept_ms = now_ms
            idle = [a for a, (_, last) in self._ip_sensors.items() if now_ms - last[0] >= IP_SENSOR_EXPIRY_MS]
            for a in idle:
                del self._ip_sensors[a]
        entry = self._ip_sensors.get(address)
        if entry is None:
            rate = SampledRate(self.quota_samples, self.quota_window_ms)
            entry = self._ip_sensors[address] = (rate, [now_ms])
        rate, last = entry
        last[0] = now_ms
        rate.record(1.0, now_ms)
        throttle = throttle_time_ms(rate, bound, now_ms, self.quota_window_ms)
        if throttle > 0:
            rate.record(-1.0, now_ms)
            self.throttled += 1
        return throttle


def _canonical(address: str) -> str:
    """One spelling per address (``::1`` and ``0:0:0:0:0:0:0:1`` are one IPv6 address)."""
    try:
        return ipaddress.ip_address(address.strip("[]")).compressed
    except ValueError:
        return address
