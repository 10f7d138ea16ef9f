"""Spark Kafka-source options for the ``pylog`` format, and the planning they drive.

Option names and meanings follow Spark's Kafka integration: ``subscribe`` (comma-separated topics) or
``assign`` (``{"topic": [0, 1]}``), ``kafka.bootstrap.servers`` or pylog's ``dataDir``,
``startingOffsets`` / ``endingOffsets`` (``earliest``, ``latest`` or JSON with -2 / -1),
``startingTimestamp`` / ``endingTimestamp`` (ms, all partitions) and ``startingOffsetsByTimestamp`` /
``endingOffsetsByTimestamp`` (JSON), ``includeHeaders``, ``maxOffsetsPerTrigger``, ``minPartitions``,
``maxRecordsPerPartition``, ``maxBytesPerPartition`` (remote segments packed per task, like Spark's
``spark.sql.files.maxPartitionBytes``); for writes ``topic``. The remote tier, named like the SDK's arguments:
``remoteStorage`` (``s3://bucket/prefix`` or ``file:///dir``; alone it reads the store without any
broker) and ``storageOptions`` (JSON, e.g. ``{"endpoint_url": "http://..."}``; credentials otherwise
from the AWS environment variables of the executors). With ``kafka.bootstrap.servers`` and no
``remoteStorage`` the store the brokers name is used for a topic with ``remote.storage.enable``
(``remoteStorage`` = ``false`` turns that off). The transport, as the SDK's arguments: ``transport``
(``auto``, the default: Arrow Flight when a broker names ``pylog.flight.listeners`` and the topic has
no remote tier, else the Kafka protocol; ``flight``; ``kafka``) and ``flight`` (a ``grpc://`` URL of
any broker); over Flight each task reads its range from the broker its endpoint names.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from pylog.sdk import options as sdk_options
from pylog.sdk.constant import int32_column, string_column
from pylog.sdk.offsets import PartitionRange, TopicSource, resolve_ranges
from pylog.sdk.remote_source import RemoteStorageSpec
from pylog.sdk.scan import SOURCE_COLUMNS, open_read_source

DEFAULT_MAX_RECORDS_PER_PARTITION = 1_000_000
# remote segments smaller than this are packed into one task (Spark's files.maxPartitionBytes default)
DEFAULT_MAX_BYTES_PER_PARTITION = 128 << 20


def _get(options: Mapping[str, str], name: str) -> str | None:
    """Options arrive case-insensitively from Spark, but tests may pass a plain dict."""
    if name in options:
        return options[name]
    lowered = name.lower()
    for k, v in options.items():
        if k.lower() == lowered:
            return v
    return None


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    v = _get(options, name)
    if v is None:
        return default
    if str(v).strip().lower() in ("true", "1", "yes"):
        return True
    if str(v).strip().lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"option {name} must be true or false, not {v!r}")


def _int(options: Mapping[str, str], name: str) -> int | None:
    v = _get(options, name)
    if v is None:
        return None
    try:
        n = int(str(v).strip())
    except ValueError:
        raise ValueError(f"option {name} must be an integer, not {v!r}") from None
    if n <= 0:
        raise ValueError(f"option {name} must be positive, not {n}")
    return n


def kafka_security(options: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The security settings among the ``kafka.``-prefixed options, as Spark's Kafka source takes
    them (``kafka.security.protocol``, ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``,
    ``kafka.ssl.truststore.location``, ...); checked now, kept as plain strings (picklable)."""
    from pylog.security.client import SECURITY_CONFIG_NAMES, ClientSecurity

    prefix = "kafka."
    out = tuple(sorted((k.lower()[len(prefix):], str(v)) for k, v in options.items()
                       if k.lower().startswith(prefix) and k.lower()[len(prefix):] in SECURITY_CONFIG_NAMES))
    try:
        ClientSecurity.from_config(dict(out))
    except ValueError as exc:
        raise ValueError(f"option kafka.{exc}") from None
    return out


def _json(options: Mapping[str, str], name: str) -> Any:
    v = _get(options, name)
    if v is None:
        return None
    try:
        return json.loads(v)
    except json.JSONDecodeError as exc:
        raise ValueError(f"option {name} is not valid JSON ({exc.msg}): {v!r}") from None


@dataclass(frozen=True)
class ReadOptions:
    """Parsed read options; picklable (it travels to the Python workers with the reader)."""

    data_dir: str | None
    bootstrap_servers: str | None
    topics: tuple[str, ...]
    assigned: dict[str, tuple[int, ...]] | None
    starting_offsets: str
    ending_offsets: str
    starting_timestamps: str | None
    ending_timestamps: str | None
    include_headers: bool
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    max_records_per_partition: int
    max_bytes_per_partition: int = 128 << 20
    key_format: str = "binary"
    value_format: str = "binary"
    schema_registry_url: str | None = None
    security: tuple[tuple[str, str], ...] = ()
    remote_storage: str | None = None
    storage_options: tuple[tuple[str, str], ...] = ()
    discover_remote: bool = False  # ask the brokers for their store on the driver (`with_store`)
    transport: str = "auto"  # as the SDK's: "kafka", "flight" or "auto" (resolved on the driver)
    flight: str | None = None  # a broker's Flight URL (else the one the brokers advertise)

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
        data_dir = _get(options, "dataDir")
        servers = _get(options, "kafka.bootstrap.servers")
        remote = _get(options, "remoteStorage")
        no_remote = remote is not None and remote.strip().lower() == "false"
        remote = None if no_remote else remote
        if (data_dir is not None and servers is not None) or (data_dir is servers is remote is None):
            raise ValueError("format('pylog') needs exactly one of the options dataDir (a pylog data "
                             "directory) or kafka.bootstrap.servers, or remoteStorage alone (the "
                             "remote tier's object store)"
                             + ("; both were given" if data_dir is not None else "; neither was given"))
        store_options = _json(options, "storageOptions") or {}
        if not isinstance(store_options, dict):
            raise ValueError('option storageOptions must be JSON like {"endpoint_url": "http://..."}')
        from pylog.sdk.remote_source import remote_spec

        remote_spec(remote, store_options or None)  # a bad URI or stray options fail here
        subscribe, assign = _get(options, "subscribe"), _get(options, "assign")
        if _get(options, "subscribePattern") is not None:
            raise ValueError("format('pylog') supports the options subscribe and assign, "
                             "not subscribePattern")
        if (subscribe is None) == (assign is None):
            raise ValueError("format('pylog') needs exactly one of the options subscribe (topic[,topic]) "
                             'or assign ({"topic": [0, 1]})')
        assigned: dict[str, tuple[int, ...]] | None = None
        if subscribe is not None:
            topics = tuple(t.strip() for t in subscribe.split(",") if t.strip())
            if not topics:
                raise ValueError("option subscribe names no topic")
        else:
            spec = _json(options, "assign")
            if not isinstance(spec, dict) or not all(isinstance(v, list) for v in spec.values()):
                raise ValueError(f'option assign must be JSON like {{"topic": [0, 1]}}, not {assign!r}')
            assigned = {t: tuple(int(p) for p in ps) for t, ps in spec.items()}
            topics = tuple(assigned)
        starting = _get(options, "startingOffsets") or ("latest" if streaming else "earliest")
        ending = _get(options, "endingOffsets") or "latest"
        for name, spec in (("startingOffsets", starting), ("endingOffsets", ending)):
            if spec.strip().lower() not in ("earliest", "latest"):
                parsed = _json(options, name)
                _check_topics(parsed, topics, name)
        transport = (_get(options, "transport") or "auto").strip().lower()
        if transport not in sdk_options.TRANSPORTS:
            raise ValueError(f"option transport must be one of {', '.join(sdk_options.TRANSPORTS)}, "
                             f"not {transport!r}")
        flight = _get(options, "flight")
        if (transport == "flight" or flight is not None) and servers is None:
            raise ValueError("options transport=flight and flight read through brokers: "
                             "set kafka.bootstrap.servers")
        start_ts = _timestamps(options, "startingTimestamp", "startingOffsetsByTimestamp", topics)
        end_ts = _timestamps(options, "endingTimestamp", "endingOffsetsByTimestamp", topics)
        return cls(
            data_dir=data_dir, bootstrap_servers=servers, topics=topics, assigned=assigned,
            starting_offsets=starting, ending_offsets=ending,
            starting_timestamps=start_ts, ending_timestamps=end_ts,
            include_headers=_bool(options, "includeHeaders", False),
            max_offsets_per_trigger=_int(options, "maxOffsetsPerTrigger"),
            min_partitions=_int(options, "minPartitions"),
            max_records_per_partition=(_int(options, "maxRecordsPerPartition")
                                       or DEFAULT_MAX_RECORDS_PER_PARTITION),
            max_bytes_per_partition=(_int(options, "maxBytesPerPartition")
                                     or DEFAULT_MAX_BYTES_PER_PARTITION),
            key_format=_format(options, "keyFormat"), value_format=_format(options, "valueFormat"),
            schema_registry_url=_get(options, "schema.registry.url"),
            security=kafka_security(options),
            remote_storage=remote,
            storage_options=tuple(sorted((str(k), str(v)) for k, v in store_options.items())),
            discover_remote=servers is not None and remote is None and not no_remote,
            transport=transport if servers is not None else "kafka", flight=flight,
        )

    def registry_columns(self) -> tuple[str, ...]:
        """The columns read in the Schema Registry wire format (keyFormat / valueFormat = registry)."""
        formats = (("key", self.key_format), ("value", self.value_format))
        return tuple(c for c, f in formats if f == "registry")

    def sdk(self) -> sdk_options.ReadOptions:
        """The SDK's read options for what these options name (the source, the registry, headers);
        built when asked, so these options stay picklable."""
        return sdk_options.ReadOptions(
            data_dir=self.data_dir, bootstrap_servers=self.bootstrap_servers,
            include_headers=self.include_headers, schema_registry_url=self.schema_registry_url,
            security=dict(self.security) or None, remote_storage=self.remote_storage,
            storage_options=dict(self.storage_options) or None, transport=self.transport,
            flight=self.flight)

    def remote(self) -> RemoteStorageSpec | None:
        return self.sdk().remote

    def with_store(self) -> ReadOptions:
        """These options with the store the brokers name for a tiered topic and the transport
        resolved (asked once, on the driver, so executors read without asking)."""
        return self._store()._transport()

    def _transport(self) -> ReadOptions:
        """``auto`` settled: ``flight`` with the Flight URL to plan from when the cluster serves
        Flight and the read has no remote tier, else ``kafka``."""
        if self.transport == "kafka" or (self.transport == "flight" and self.flight is not None):
            return self
        from pylog.sdk.flight_source import flight_source

        source = flight_source(self.sdk(), tiered=self.remote_storage is not None)
        if source is None:
            return replace(self, transport="kafka")
        source.close()
        return replace(self, transport="flight", flight=source.url)

    def _store(self) -> ReadOptions:
        if not self.discover_remote:
            return self
        from pylog.sdk.scan import _discovered_store

        found = None
        for topic in self.topics:
            found = _discovered_store(self.bootstrap_servers, topic, dict(self.security) or None)
            if found is not None:
                break
        return replace(self, discover_remote=False, remote_storage=found.uri if found else None,
                       storage_options=tuple(sorted(found.options.items())) if found else ())

    def open(self, pins: Mapping[tuple[str, int], tuple[Any, int]] | None = None) -> TopicSource:
        """The source these options name; ``pins``: (topic, partition) -> (topic id, manifest version)
        the driver planned with, so an executor reads that version's segments."""
        return open_read_source(self.sdk(), pins=pins)

    def partitions_of(self, topic: str) -> list[int] | None:
        return None if self.assigned is None else list(self.assigned[topic])

    def ranges(self, source: TopicSource, *, starting: str | None = None, ending: str | None = None,
               with_timestamps: bool = True) -> list[PartitionRange]:
        """[start, end) per topic partition for these options (starting/ending override the options)."""
        out: list[PartitionRange] = []
        for topic in self.topics:
            out += resolve_ranges(
                source, topic, partitions=self.partitions_of(topic),
                starting_offsets=_for_topic(starting or self.starting_offsets, topic),
                ending_offsets=_for_topic(ending or self.ending_offsets, topic),
                starting_timestamp=_for_topic(self.starting_timestamps, topic) if with_timestamps else None,
                ending_timestamp=_for_topic(self.ending_timestamps, topic) if with_timestamps else None,
            )
        return out


FORMATS = ("binary", "registry")


def _format(options: Mapping[str, str], name: str) -> str:
    v = (_get(options, name) or "binary").strip().lower()
    if v not in FORMATS:
        raise ValueError(f"option {name} must be one of {', '.join(FORMATS)}, not {v!r}")
    return v


def _check_topics(parsed: Any, topics: tuple[str, ...], name: str) -> None:
    if not isinstance(parsed, dict):
        raise ValueError(f'option {name} must be earliest, latest or JSON like {{"topic": {{"0": 23}}}}')
    extra = [t for t in parsed if t not in topics]
    if extra:
        raise ValueError(f"option {name} names topic(s) {extra} that are not read (topics: {list(topics)})")


def _timestamps(options: Mapping[str, str], single: str, by_partition: str, topics: tuple[str, ...]
                ) -> str | None:
    one, many = _get(options, single), _get(options, by_partition)
    if one is not None and many is not None:
        raise ValueError(f"options {single} and {by_partition} cannot both be set")
    if many is not None:
        _check_topics(_json(options, by_partition), topics, by_partition)
        return many
    if one is not None:
        try:
            return str(int(one.strip()))
        except ValueError:
            raise ValueError(f"option {single} must be epoch milliseconds, not {one!r}") from None
    return None


def _for_topic(spec: str | None, topic: str) -> Any:
    """A whole-query spec (``earliest`` / ``latest`` / ms / multi-topic JSON) -> the part for `topic`."""
    if spec is None:
        return None
    text = spec.strip()
    if text.lower() in ("earliest", "latest") or text.lstrip("-").isdigit():
        return text
    parsed = json.loads(text)
    return {topic: parsed.get(topic, {})}


def split_ranges(ranges: list[PartitionRange], *, max_records: int, min_partitions: int | None
                 ) -> list[PartitionRange]:
    """Spark input partitions: each range cut to at most `max_records` offsets, and big ranges cut
    further (in proportion to their size, like Spark's KafkaOffsetRangeCalculator) until there are
    at least `min_partitions`."""
    ranges = [r for r in ranges if r.count > 0]
    total = sum(r.count for r in ranges)
    out: list[PartitionRange] = []
    for r in ranges:
        parts = math.ceil(r.count / max_records)
        if min_partitions and min_partitions > len(ranges) and total:
            parts = max(parts, round(r.count / total * min_partitions), 1)
        step = math.ceil(r.count / parts)
        for lo in range(r.start, r.end, step):
            out.append(PartitionRange(r.topic, r.partition, lo, min(r.end, lo + step)))
    return out


def to_spark_batch(r: PartitionRange, batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """Source columns of one range -> the Arrow schema Spark expects for the output schema."""
    n = batch.num_rows
    arrays = []
    for f in target:
        if f.name == "topic":
            arr = string_column(r.topic, n)
        elif f.name == "partition":
            arr = int32_column(r.partition, n)
        elif f.name in SOURCE_COLUMNS:
            arr = batch.column(f.name)
        else:
            raise ValueError(f"format('pylog') has no column {f.name!r}")
        if arr.type != f.type:
            arr = arr.cast(f.type)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def source_columns(target: pa.Schema) -> list[str]:
    return [c for c in SOURCE_COLUMNS if c in target.names]
