"""What a handler gets besides the request body."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pylog.broker.broker import Broker


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str

    @staticmethod
    def now_ms() -> int:
        return time.time_ns() // 1_000_000
