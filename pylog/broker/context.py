"""What a handler gets besides the request body and its bound services: who asked, and how."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    listener: str = "PLAINTEXT"

    @staticmethod
    def now_ms() -> int:
        return time.time_ns() // 1_000_000
