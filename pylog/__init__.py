"""pylog: a Kafka-compatible log stored as Apache Arrow.

Importing ``pylog`` is cheap: submodules load on first attribute access.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# attribute name -> module that defines it (loaded lazily on first access)
_LAZY: dict[str, str] = {
    "read_topic": "pylog.sdk.api",
    "scan_topic": "pylog.sdk.api",
    "write_topic": "pylog.sdk.writer",
    "LocalBroker": "pylog.local",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pylog' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
