"""Notebook SDK: read a topic into Arrow (and Polars, pandas, DuckDB), write a frame to a topic.

    import pylog
    table = pylog.read_topic("clicks", data_dir="./pylog-data")                # the segments, no broker
    table = pylog.read_topic("clicks", bootstrap_servers="localhost:9092")     # any Kafka-compatible broker
    df = pylog.scan_topic("clicks", data_dir="./pylog-data", decode="json").to_polars()
    pylog.write_topic(df, "clicks-copy", bootstrap_servers="localhost:9092", key="user")

Columns follow Spark's Kafka source: key, value, topic, partition, offset, timestamp, timestampType
(+ headers). Submodules load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "read_topic": "pylog.sdk.api",
    "scan_topic": "pylog.sdk.api",
    "write_topic": "pylog.sdk.writer",
    "WriteResult": "pylog.sdk.writer",
    "TopicScan": "pylog.sdk.scan",
    "register_decoder": "pylog.sdk.decoders",
    "JsonDecoder": "pylog.sdk.decoders",
    "UnknownTopicError": "pylog.sdk.offsets",
    "OffsetOutOfRangeError": "pylog.sdk.offsets",
    "PartitionRange": "pylog.sdk.offsets",
    "KafkaError": "pylog.sdk.client",
    "FetchOptions": "pylog.sdk.kafka_source",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pylog.sdk' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
