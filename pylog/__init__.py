"""pylog: a Kafka-compatible log stored as Apache Arrow.

Importing ``pylog`` is cheap: submodules load on first attribute access.
"""

from __future__ import annotations

from pylog._lazy import lazy_exports

__version__ = "0.1.0"  # the one place the version is written (pyproject.toml reads it)

# attribute name -> module that defines it (loaded lazily on first access)
_LAZY: dict[str, str] = {
    "read_topic": "pylog.sdk.api",
    "scan_topic": "pylog.sdk.api",
    "scan_polars": "pylog.sdk.polars_scan",
    "write_topic": "pylog.sdk.writer",
    "client_metrics": "pylog.sdk.client_metrics",
    "follow": "pylog.sdk.follow",
    "sql": "pylog.sdk.sql",
    "read_table": "pylog.sdk.table",
    "LocalBroker": "pylog.local",
    "LocalCluster": "pylog.local_cluster",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
