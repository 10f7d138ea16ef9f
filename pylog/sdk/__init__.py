"""Notebook SDK: read a topic into Arrow (and Polars, pandas, DuckDB), write a frame to a topic.

    import pylog
    table = pylog.read_topic("clicks", data_dir="./pylog-data")                # the segments, no broker
    table = pylog.read_topic("clicks", bootstrap_servers="localhost:9092")     # any Kafka-compatible broker
    df = pylog.scan_topic("clicks", data_dir="./pylog-data", decode="json").to_polars()
    pylog.write_topic(df, "clicks-copy", bootstrap_servers="localhost:9092", key="user")
    for batch in pylog.follow("clicks", group="dash", bootstrap_servers="localhost:9092"): ...  # live
    pylog.sql("select count(*) from clicks where timestamp > now() - interval 1 hour", data_dir="data")
    table = pylog.read_table("profiles", bootstrap_servers="localhost:9092")  # latest value per key

Columns follow Spark's Kafka source: key, value, topic, partition, offset, timestamp, timestampType
(+ headers). Submodules load on first use.
"""

from __future__ import annotations

from pylog._lazy import lazy_exports

_LAZY = {
    "read_topic": "pylog.sdk.api",
    "scan_topic": "pylog.sdk.api",
    "write_topic": "pylog.sdk.writer",
    "client_metrics": "pylog.sdk.client_metrics",
    "follow": "pylog.sdk.follow",
    "sql": "pylog.sdk.sql",
    "read_table": "pylog.sdk.table",
    "WriteResult": "pylog.sdk.writer",
    "TopicScan": "pylog.sdk.scan",
    "register_decoder": "pylog.sdk.decoders",
    "JsonDecoder": "pylog.sdk.decoders",
    "UnknownTopicError": "pylog.sdk.offsets",
    "OffsetOutOfRangeError": "pylog.sdk.offsets",
    "PartitionRange": "pylog.sdk.offsets",
    "KafkaError": "pylog.sdk.client",
    "FetchOptions": "pylog.sdk.kafka_source",
    "ReadOptions": "pylog.sdk.options",
    "Follower": "pylog.sdk.follow",
    "GroupHasMembersError": "pylog.sdk.group_offsets",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
