"""Telemetry subscriptions: CLIENT_METRICS config resources, and which of them a client matches.

A subscription names metric prefixes (``metrics``; ``*`` is every metric), a push interval
(``interval.ms``, 5 minutes unless set) and ``match`` selectors, each ``selector=regex`` on the
client's identity: ``client_instance_id``, ``client_id``, ``client_software_name``,
``client_software_version``, ``client_source_address``, ``client_source_port``. A client matches a
subscription when every selector's regex matches the whole attribute (no selector: every client).
A client gets the union of the metrics of the subscriptions it matches (just ``*`` if any asks for
everything) at the shortest of their intervals, and a subscription id computed from them and its
instance id (Kafka's CRC32C of the metrics and interval, XORed with the instance id's hash), so
every broker hands the same client the same id for the same subscriptions.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

import crc32c

from pylog.cluster.image import MetadataImage
from pylog.cluster.records import ConfigResourceType

ALL_METRICS = "*"
DEFAULT_INTERVAL_MS = 300_000


@dataclass(frozen=True)
class ClientIdentity:
    client_instance_id: uuid.UUID
    client_id: str | None
    client_software_name: str | None
    client_software_version: str | None
    client_source_address: str | None
    client_source_port: int | None

    def attribute(self, selector: str) -> str | None:
        value = getattr(self, selector, None)
        return None if value is None else str(value)


@dataclass(frozen=True)
class Subscription:
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, client: ClientIdentity) -> bool:
        for selector, pattern in self.match:
            value = client.attribute(selector)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


@dataclass(frozen=True)
class Assignment:
    """What one client instance is asked to push."""

    subscription_id: int
    metrics: tuple[str, ...]
    interval_ms: int


def _items(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def parse_subscription(name: str, configs: Mapping[str, str]) -> Subscription | None:
    """A subscription from its configs (validated when they were written); None if unreadable."""
    try:
        interval = int(configs.get("interval.ms", DEFAULT_INTERVAL_MS))
        match = []
        for item in _items(configs.get("match")):
            selector, _, regex = item.partition("=")
            match.append((selector.strip(), re.compile(regex.strip())))
    except (ValueError, re.error):
        return None
    return Subscription(name, tuple(_items(configs.get("metrics"))), interval, tuple(match))


def subscriptions_of(image: MetadataImage) -> tuple[Subscription, ...]:
    out = []
    for name in image.config_resources(ConfigResourceType.CLIENT_METRICS):
        sub = parse_subscription(name, image.configs(ConfigResourceType.CLIENT_METRICS, name))
        if sub is not None:
            out.append(sub)
    return tuple(out)


def assign(client: ClientIdentity, subscriptions: tuple[Subscription, ...]) -> Assignment:
    interval, everything = DEFAULT_INTERVAL_MS, False
    metrics: set[str] = set()
    for sub in subscriptions:
        if sub.matches(client):
            everything = everything or ALL_METRICS in sub.metrics
            metrics.update(sub.metrics)
            interval = min(interval, sub.interval_ms)
    chosen = (ALL_METRICS,) if everything else tuple(sorted(metrics))
    return Assignment(subscription_id(chosen, interval, client.client_instance_id), chosen, interval)


def subscription_id(metrics: tuple[str, ...], interval_ms: int, instance_id: uuid.UUID) -> int:
    crc = crc32c.crc32c(("[" + ", ".join(metrics) + "]" + str(interval_ms)).encode())
    bits = instance_id.int
    h = (bits >> 64) ^ (bits & (2**64 - 1))  # Java's Uuid.hashCode
    h = ((h >> 32) ^ h) & 0xFFFFFFFF
    value = crc ^ h
    return value - 2**32 if value >= 2**31 else value
