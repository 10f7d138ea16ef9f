"""`read_topic` and `scan_topic`: the notebook entry points for reading a topic."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from pylog.sdk.decoders import DecodeSpec
from pylog.sdk.offsets import OffsetSpec, TimestampSpec
from pylog.sdk.options import ReadOptions
from pylog.sdk.scan import TopicScan


def scan_topic(
    topic: str,
    *,
    data_dir: Any = None,
    bootstrap_servers: Any = None,
    partitions: Sequence[int] | None = None,
    starting_offsets: OffsetSpec = "earliest",
    ending_offsets: OffsetSpec = "latest",
    starting_timestamp: TimestampSpec = None,
    ending_timestamp: TimestampSpec = None,
    include_headers: bool = False,
    columns: Sequence[str] | None = None,
    decode: DecodeSpec = None,
    fetch_options: Any = None,
    schema_registry_url: str | None = None,
    on_decode_error: str = "raise",
    progress: bool | None = None,
    security: Any = None,
    remote_storage: Any = None,
    storage_options: Any = None,
    transport: str = "auto",
    flight: str | None = None,
    binary_view: bool = False,
) -> TopicScan:
    """A lazy read of `topic`: call ``.to_arrow()``, ``.to_arrow_batch_reader()``, ``.to_pandas()``,
    ``.to_polars()`` or ``.to_duckdb(name)``, or hand it to anything that takes an Arrow stream.

    Exactly one source: ``data_dir`` (a pylog broker's data directory, read directly, safe while the
    broker writes: only committed data up to the high watermark) or ``bootstrap_servers`` (any
    Kafka-compatible cluster, read_committed). Bounds follow Spark's Kafka source: ``starting_offsets``
    / ``ending_offsets`` are ``"earliest"``, ``"latest"`` or ``{"topic": {"0": 23, "1": -2}}`` (end
    exclusive); timestamps (epoch ms, datetime, or per partition) select the first offset at or after
    them and take precedence. ``columns`` picks output columns (others are never read from disk);
    ``decode`` turns ``value`` (or ``{"key": ..., "value": ...}``) into typed columns: ``"json"``,
    ``"utf8"``, ``"registry"`` (the Schema Registry wire format: Avro, Protobuf or JSON Schema records
    as typed structs, schemas from ``schema_registry_url`` or else the ``_schemas`` topic of the same
    source), a registered name or a callable. A record that cannot be decoded raises an error naming
    its topic, partition and offset, or becomes null with ``on_decode_error="null"``.
    ``progress``: a progress bar for reads through ``bootstrap_servers`` (None: only when the read
    is large and slow, True: always, False: never).
    ``security``: how to reach a secured cluster, as Kafka client settings: ``{"security.protocol":
    "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": "...",
    "ssl.ca.location": "ca.pem"}`` (``ssl.cafile``, ``sasl.jaas.config``, client certificates for
    mutual TLS: see ``pylog.security.client``).
    ``remote_storage``: the object store of the remote tier (``"s3://bucket/prefix"``,
    ``"file:///dir"``; ``storage_options`` such as ``{"endpoint_url": ..., "region": ...}``, credentials
    otherwise from the AWS environment variables). Remote segments are then read straight from the
    store (offset and time bounds prune whole segments; one manifest version per read): beside
    ``data_dir`` (remote history, then the local segments), or alone (the store only, no broker).
    With ``bootstrap_servers`` and no ``remote_storage``, a topic with ``remote.storage.enable`` is
    read from the store the brokers name (``remote.log.storage.uri``) when this client can reach it,
    and its tail through Kafka; ``remote_storage=False`` reads everything through Kafka.
    ``transport``: how a read through ``bootstrap_servers`` travels: ``"kafka"`` (the Kafka
    protocol), ``"flight"`` (Arrow Flight: the partitions' endpoints read in parallel, one stream
    per broker; Arrow batches as stored, no re-encoding) or ``"auto"`` (Flight when the cluster
    serves it, else Kafka). The Flight address is ``flight`` (``"grpc://broker:8815"``) or else the
    brokers' ``pylog.flight.listeners`` (DescribeConfigs); ``security``'s SASL user and password
    authenticate to Flight too. A topic with a remote tier read from its store stays on Kafka.
    ``binary_view=True``: ``key`` and ``value`` as ``binary_view`` and headers as
    ``list<struct<key: string_view, value: binary_view>>`` (pyarrow, Polars and DuckDB 1.4+ read
    them): format 2 segments hold values so, and are then read without copying them (the default
    binary types copy each value once).
    All keywords are checked at once (`pylog.sdk.options.ReadOptions`); a wrong one raises
    ``ValueError``.
    """
    return TopicScan(topic, ReadOptions.from_arguments(locals()))


def read_topic(
    topic: str,
    *,
    data_dir: Any = None,
    bootstrap_servers: Any = None,
    partitions: Sequence[int] | None = None,
    starting_offsets: OffsetSpec = "earliest",
    ending_offsets: OffsetSpec = "latest",
    starting_timestamp: TimestampSpec = None,
    ending_timestamp: TimestampSpec = None,
    include_headers: bool = False,
    columns: Sequence[str] | None = None,
    decode: DecodeSpec = None,
    fetch_options: Any = None,
    schema_registry_url: str | None = None,
    on_decode_error: str = "raise",
    progress: bool | None = None,
    security: Any = None,
    remote_storage: Any = None,
    storage_options: Any = None,
    transport: str = "auto",
    flight: str | None = None,
    binary_view: bool = False,
) -> pa.Table:
    """Read `topic` into a ``pyarrow.Table`` with Spark's Kafka source columns: ``key binary, value
    binary, topic string, partition int32, offset int64, timestamp timestamp[ms, tz=UTC], timestampType
    int32``
    (+ ``headers list<struct<key: string, value: binary>>`` with ``include_headers=True``; with
    ``binary_view=True`` their view types). Arguments as for `scan_topic`."""
    return TopicScan(topic, ReadOptions.from_arguments(locals())).to_arrow()
