"""Connection limits (Kafka's ``ConnectionQuotas``), sans-IO counting.

``max.connections`` bounds the connections of the whole node and
``listener.name.<listener>.max.connections`` those of one listener; ``max.connections.per.ip``
bounds each client address, with exceptions in ``max.connections.per.ip.overrides``
(``host:count,...``). A connection over a limit is closed as soon as it is accepted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from pylog.config import BrokerConfig, ConfigError
from pylog.model import INT32_MAX


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
    ) -> None:
        self.max_connections = max_connections
        self.per_ip = per_ip
        self.per_ip_overrides = dict(per_ip_overrides or {})
        self.per_listener = dict(per_listener or {})
        self.total = 0
        self._by_ip: Counter[str] = Counter()
        self._by_listener: Counter[str] = Counter()
        self.refused = 0

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
