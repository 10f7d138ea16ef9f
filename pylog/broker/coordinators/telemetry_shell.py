"""Client metrics on a broker: the sans-IO manager (``pylog.telemetry.manager``) with the clock,
new instance ids, and the subscriptions of the current metadata image."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.cluster.image import MetadataImage
from pylog.cluster.records import ConfigResourceType
from pylog.config import BrokerConfig, ConfigError
from pylog.telemetry.manager import ClientMetricsManager
from pylog.telemetry.subscriptions import Subscription, subscriptions_of

CLIENT_METRICS = ConfigResourceType.CLIENT_METRICS


class TelemetryShell:
    def __init__(
        self, config: BrokerConfig, image: Callable[[], MetadataImage], clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.clock = clock
        max_bytes = config.int("telemetry.max.bytes")
        if max_bytes < 1:
            raise ConfigError(f"telemetry.max.bytes must be at least 1, got {max_bytes}")
        self.manager = ClientMetricsManager(max_bytes, uuid.uuid4)
        self._image = image
        self._key: object = None
        self._subscriptions: tuple[Subscription, ...] = ()

    def subscriptions(self) -> tuple[object, tuple[Subscription, ...]]:
        """The CLIENT_METRICS subscriptions, and a value that changes whenever they do."""
        image = self._image()
        key = tuple(
            (name, tuple(sorted(image.configs(CLIENT_METRICS, name).items())))
            for name in image.config_resources(CLIENT_METRICS)
        )
        if key != self._key:
            self._key, self._subscriptions = key, subscriptions_of(image)
        return self._key, self._subscriptions

    def now_ms(self) -> int:
        """Monotonic ms: push intervals and subscription expiry."""
        return self.clock.monotonic_ms()

    def wall_ms(self) -> int:
        """Wall ms: what metric points are stamped with."""
        return self.clock.wall_ms()
