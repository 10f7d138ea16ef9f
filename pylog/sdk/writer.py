"""`write_topic`: produce an Arrow table (or Polars / pandas frame, or any Arrow stream) to a topic.

Columns play Spark's Kafka-sink roles: ``key``, ``value``, ``headers``, ``partition`` (by those names
unless other columns are named). Without a ``value`` column the remaining columns are serialised to
one JSON object per row. Keys go where the Java client puts them (``toPositive(murmur2(key)) %
partitions``, vectorised); null keys are spread in sticky runs. Rows are grouped per partition,
cut into RecordBatch v2 blobs of about ``batch_size`` bytes (encode_batch) and sent as acks=all
Produce requests, pipelined on one connection per leader so each partition keeps its order.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.protocol.records import encode_batch
from pylog.sdk import aio
from pylog.sdk.client import PRODUCE, KafkaClient, KafkaError
from pylog.sdk.murmur2 import partitions_for_keys
from pylog.sdk.progress import Progress, progress_bar
from pylog.sdk.schema import HEADER_TYPE

COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
_RECORD_OVERHEAD = 24  # varints and attributes per record, for batch sizing


@dataclass
class WriteResult:
    """What a write appended: per partition the first and last offset assigned by the broker."""

    topic: str
    records: int = 0
    offsets: dict[int, tuple[int, int]] = field(default_factory=dict)
    num_partitions: int = 0

    def starting_offsets(self) -> dict[str, dict[str, int]]:
        """Spark offset JSON of the first written record per partition, ``-1`` (latest) for partitions
        this write did not touch: with `ending_offsets`, a read of exactly what was written."""
        return {self.topic: {str(p): self.offsets[p][0] if p in self.offsets else -1
                             for p in range(max(self.num_partitions, max(self.offsets, default=-1) + 1))}}

    def ending_offsets(self) -> dict[str, dict[str, int]]:
        """Spark offset JSON just past the last written record per partition (exclusive end)."""
        return {self.topic: {str(p): self.offsets[p][1] + 1 if p in self.offsets else -1
                             for p in range(max(self.num_partitions, max(self.offsets, default=-1) + 1))}}

    def _add(self, partition: int, base_offset: int, count: int) -> None:
        last = base_offset + count - 1
        lo, hi = self.offsets.get(partition, (base_offset, last))
        self.offsets[partition] = (min(lo, base_offset), max(hi, last))
        self.records += count


def write_topic(
    data: Any,
    topic: str,
    *,
    bootstrap_servers: Any,
    key: str | None = None,
    value: str | Sequence[str] | None = None,
    headers: str | None = None,
    partition: int | str | None = None,
    timestamp: str | None = None,
    compression: str = "none",
    batch_size: int = 1_000_000,
    max_in_flight: int = 8,
    request_timeout_s: float = 30.0,
    value_schema: str | None = None,
    key_schema: str | None = None,
    schema_registry_url: str | None = None,
    progress: bool | None = None,
    security: Any = None,
) -> WriteResult:
    """Produce the rows of `data` to `topic` with acks=all; returns the offsets written per partition.

    `data`: a pyarrow Table / RecordBatch / RecordBatchReader, a Polars or pandas DataFrame, or anything
    with ``__arrow_c_stream__`` (a `TopicScan` copies a topic). `key` / `value` / `headers` name columns
    (default: the columns of those names); a value that is not binary or string (a struct, a list of
    columns, numbers) is written as JSON. `partition`: a fixed partition or a column of partitions;
    by default keys are hashed like the Java client. `timestamp`: a column of timestamps (or epoch ms);
    by default the time of the call. `batch_size`: target bytes per record batch (uncompressed).
    ``value_schema="registry"`` (and ``key_schema``) writes the value (key) in the Schema Registry wire
    format: an Avro schema derived from its Arrow type is registered (or found) under ``<topic>-value``
    at ``schema_registry_url``. `progress`: a progress bar of acknowledged records and bytes (None:
    only when the write is large and slow, True: always, False: never). ``security``: Kafka client security
    settings, as for `read_topic`.
    """
    if not isinstance(topic, str) or not topic:
        raise ValueError(f"topic must be a non-empty string, got {topic!r}")
    for name, spec in (("value_schema", value_schema), ("key_schema", key_schema)):
        if spec not in (None, "registry"):
            raise ValueError(f"{name} must be 'registry' or None, not {spec!r}")
        if spec is not None and not schema_registry_url:
            raise ValueError(f"{name}='registry' needs schema_registry_url= (the registry to register with)")
    total = _row_count(data)
    if value_schema or key_schema:
        data = _registry_framed(data, topic, key=key, value=value, headers=headers, partition=partition,
                                timestamp=timestamp, value_schema=value_schema, key_schema=key_schema,
                                url=str(schema_registry_url), security=security)
        key = "key" if key is not None or key_schema else key
        value = "value"
    with progress_bar(progress, total=total, desc=f"writing {topic}") as bar, \
            Producer(bootstrap_servers, compression=compression, batch_size=batch_size,
                     max_in_flight=max_in_flight, request_timeout_s=request_timeout_s,
                     progress=bar, security=security) as producer:
        for batch in _record_batches(data):
            producer.send(batch, topic, key=key, value=value, headers=headers, partition=partition,
                          timestamp=timestamp)
        results = producer.flush()
    return results.get(topic, WriteResult(topic))


def _registry_framed(data: Any, topic: str, *, key: str | None, value: Any, headers: str | None,
                     partition: Any, timestamp: str | None, value_schema: str | None, key_schema: str | None,
                     url: str, security: Any = None) -> Iterator[pa.RecordBatch]:
    """Batches whose ``value`` (``key``) column holds the wire-format Avro of the frame's value (key),
    registered with the credentials of the Kafka ``security`` settings."""
    from pylog.sdk.registry_write import framed
    from pylog.security.registry_client import RegistryCredentials

    credentials = RegistryCredentials.of(security)  # once: TLS files are read here

    for batch in _record_batches(data):
        names = batch.schema.names
        key_name = key if key is not None else ("key" if "key" in names else None)
        roles = {c for c in (key_name, headers, timestamp, partition if isinstance(partition, str) else None,
                             "headers" if headers is None and "headers" in names else None,
                             "partition" if partition is None and "partition" in names else None) if c}
        if isinstance(value, str) or (value is None and "value" in names):
            v = _column(batch, value if isinstance(value, str) else "value", "value")
        else:
            cols = list(value) if value is not None else [c for c in names if c not in roles | {"topic"}]
            v = pa.StructArray.from_arrays([_column(batch, c, "value") for c in cols], names=cols)
        if value_schema:
            v = framed(v, url=url, subject=f"{topic}-value", name=f"{topic}_value", security=credentials)
        out = {c: batch.column(c) for c in names if c in roles}
        if key_name is not None:
            k = _column(batch, key_name, "key")
            out.pop(key_name, None)
            if key_schema:
                k = framed(k, url=url, subject=f"{topic}-key", name=f"{topic}_key", security=credentials)
            out["key"] = k
        out["value"] = v
        yield pa.RecordBatch.from_arrays(list(out.values()), names=list(out))


def _row_count(data: Any) -> int | None:
    """Rows of `data` without converting it (a table, a pandas / Polars frame, a list); None for a
    stream."""
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return data.num_rows
    shape = getattr(data, "shape", None)
    if isinstance(shape, tuple) and shape and isinstance(shape[0], int):
        return shape[0]
    return len(data) if isinstance(data, list) else None


class Producer:
    """A Kafka producer for Arrow batches: one client, per-topic metadata and sticky state, up to
    `max_in_flight` Produce requests outstanding while the calling thread prepares the next ones."""

    def __init__(self, bootstrap_servers: Any, *, compression: str = "none", batch_size: int = 1_000_000,
                 max_in_flight: int = 8, request_timeout_s: float = 30.0,
                 client_id: str = "pylog-sdk-producer", progress: Progress | None = None,
                 security: Any = None, clock: Clock = SYSTEM_CLOCK) -> None:
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression must be one of {', '.join(COMPRESSIONS)}, not {compression!r}")
        if batch_size <= 0:
            raise ValueError("batch_size must be positive")
        self.compression, self.batch_size, self.max_in_flight = compression, batch_size, max_in_flight
        self.client = KafkaClient(bootstrap_servers, client_id=client_id, request_timeout_s=request_timeout_s,
                                  security=security)
        aio.run(self.client.start())
        self.results: dict[str, WriteResult] = {}
        self._topics: dict[str, tuple[dict[int, int], _Sticky]] = {}
        self._in_flight: list[tuple[Future[None], int, int]] = []  # (ack, records, bytes)
        self._now_ms = clock.wall_ms()  # the default timestamp of records written without one
        self._progress = progress

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _topic(self, topic: str) -> tuple[dict[int, int], _Sticky]:
        known = self._topics.get(topic)
        if known is None:
            tm = aio.run(self.client.topic(topic, allow_auto_topic_creation=True))
            leaders = {p: pm.leader for p, pm in tm.partitions.items()}
            known = self._topics[topic] = (leaders, _Sticky(len(leaders)))
            self.results[topic] = WriteResult(topic, num_partitions=len(leaders))
        return known

    def send(self, batch: pa.RecordBatch, topic: str, *, key: str | None = None,
             value: str | Sequence[str] | None = None, headers: str | None = None,
             partition: int | str | None = None, timestamp: str | None = None) -> None:
        """Queue the rows of `batch` for `topic` (column roles as in `write_topic`)."""
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic must be a non-empty string, got {topic!r}")
        leaders, sticky = self._topic(topic)
        if batch.num_rows == 0:
            return
        rows, parts = _prepare(batch, key=key, value=value, headers=headers, partition=partition,
                               timestamp=timestamp, num_partitions=len(leaders), now_ms=self._now_ms,
                               sticky=sticky, batch_size=self.batch_size)
        version = self.client.version(PRODUCE)
        for request in _requests(rows, parts, leaders, self.compression, self.batch_size):
            ack = asyncio.run_coroutine_threadsafe(
                _produce(self.client, version, topic, request, self.results[topic]), aio.io_loop())
            blobs = request[1]
            self._in_flight.append((ack, sum(n for _p, _b, n in blobs), sum(len(b) for _p, b, _n in blobs)))
            while len(self._in_flight) >= self.max_in_flight:
                self._acknowledged()

    def _acknowledged(self) -> None:
        """Wait for the oldest request's acknowledgement."""
        ack, records, nbytes = self._in_flight.pop(0)
        ack.result()
        if self._progress is not None:
            self._progress.update(records, nbytes)

    def flush(self) -> dict[str, WriteResult]:
        """Wait for every acknowledgement; raises the first produce error."""
        while self._in_flight:
            self._acknowledged()
        return self.results

    def close(self) -> None:
        try:
            for fut, _records, _bytes in self._in_flight:
                fut.cancel()
            self._in_flight.clear()
        finally:
            aio.run(self.client.close())


async def _produce(client: KafkaClient, version: int, topic: str,
                   request: tuple[int, list[tuple[int, bytes, int]]], result: WriteResult) -> None:
    leader, blobs = request
    conn = await client.connection(leader)
    body = {"transactional_id": None, "acks": -1, "timeout_ms": int(client.timeout_s * 1000),
            "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": blob}
                                                              for p, blob, _n in blobs]}]}
    resp = await conn.request(PRODUCE, version, body)
    counts = {p: n for p, _blob, n in blobs}
    for tr in resp.responses:
        for pr in tr.partition_responses:
            if pr.error_code:
                msg = getattr(pr, "error_message", None)
                raise KafkaError(pr.error_code, f"Produce to {topic}-{pr.index}", msg)
            result._add(pr.index, pr.base_offset, counts[pr.index])


def _record_batches(data: Any) -> Iterator[pa.RecordBatch]:
    if isinstance(data, pa.RecordBatch):
        return iter([data])
    if isinstance(data, pa.Table):
        return iter(data.to_batches())
    if isinstance(data, pa.RecordBatchReader):
        return iter(data)
    module = type(data).__module__.split(".")[0]
    if module == "pandas":
        return iter(pa.Table.from_pandas(data, preserve_index=False).to_batches())
    if module == "polars" and hasattr(data, "to_arrow"):
        return iter(data.to_arrow().to_batches())
    if hasattr(data, "__arrow_c_stream__"):
        return iter(pa.RecordBatchReader.from_stream(data))
    if isinstance(data, dict):
        return iter(pa.table(data).to_batches())
    if isinstance(data, list) and all(isinstance(b, pa.RecordBatch) for b in data):
        return iter(data)
    if isinstance(data, list):
        return iter(pa.Table.from_pylist(data).to_batches())
    if isinstance(data, Iterator):
        return data
    raise TypeError(f"write_topic takes an Arrow table / batch / reader, a Polars or pandas DataFrame, "
                    f"or an Arrow stream, not {type(data).__name__}")


class _Sticky:
    """Null-key placement: runs of about one batch go to one partition, then the next (Kafka's sticky
    partitioner, in spirit), starting at a random partition."""

    def __init__(self, num_partitions: int) -> None:
        self.num_partitions = num_partitions
        self.next = random.randrange(num_partitions)

    def assign(self, count: int, run: int) -> np.ndarray:
        runs = (np.arange(count) // max(1, run)) + self.next
        self.next = int(runs[-1] + 1) % self.num_partitions if count else self.next
        return (runs % self.num_partitions).astype(np.int32)


def _column(batch: pa.RecordBatch, name: str, role: str) -> pa.Array:
    idx = batch.schema.get_field_index(name)
    if idx < 0:
        raise ValueError(f"{role}={name!r}: no such column (columns: {batch.schema.names})")
    return batch.column(idx)


def _prepare(batch: pa.RecordBatch, *, key: str | None, value: str | Sequence[str] | None,
             headers: str | None, partition: int | str | None, timestamp: str | None,
             num_partitions: int, now_ms: int, sticky: _Sticky, batch_size: int
             ) -> tuple[pa.RecordBatch, np.ndarray]:
    """Input rows -> (RECORD_SCHEMA-like batch of timestamp/key/value/headers, partition per row)."""
    names = batch.schema.names
    n = batch.num_rows
    key_name = key if key is not None else ("key" if "key" in names else None)
    headers_name = headers if headers is not None else ("headers" if "headers" in names else None)
    part_name = partition if isinstance(partition, str) else (
        "partition" if partition is None and "partition" in names else None)
    used = {c for c in (key_name, headers_name, part_name, timestamp) if c is not None}
    keys = (_to_bytes(_column(batch, key_name, "key"), "key") if key_name is not None
            else pa.nulls(n, pa.binary()))
    if value is None and "value" in names:
        value = "value"
    if isinstance(value, str):
        values = _to_bytes(_column(batch, value, "value"), "value")
    else:
        cols = list(value) if value is not None else [c for c in names if c not in used | {"topic"}]
        if not cols:
            raise ValueError("nothing to write as value: name a value column or pass data with columns")
        struct = pa.StructArray.from_arrays([_column(batch, c, "value") for c in cols], names=cols)
        values = _json(struct)
    hdrs = _headers(_column(batch, headers_name, "headers")) if headers_name is not None else None
    if timestamp is not None:
        ts = _column(batch, timestamp, "timestamp")
        if pa.types.is_timestamp(ts.type) or pa.types.is_date(ts.type):
            ts = ts.cast(pa.timestamp("ms"))
        else:
            ts = ts.cast(pa.int64()).cast(pa.timestamp("ms"))
        ts = pc.fill_null(ts, pa.scalar(now_ms, pa.timestamp("ms")))
    else:
        ts = pa.array(np.full(n, now_ms, "datetime64[ms]"), pa.timestamp("ms"))
    arrays = [ts, keys, values]
    fields = ["timestamp", "key", "value"]
    if hdrs is not None:
        arrays.append(hdrs)
        fields.append("headers")
    rows = pa.RecordBatch.from_arrays(arrays, names=fields)
    if isinstance(partition, int) and not isinstance(partition, bool):
        if not 0 <= partition < num_partitions:
            raise ValueError(f"partition {partition} does not exist: the topic has {num_partitions}")
        parts = np.full(n, partition, np.int32)
    elif part_name is not None:
        col = _column(batch, part_name, "partition")
        if col.null_count:
            parts = _partition_by_key(keys, num_partitions, sticky, rows, batch_size)
            given = pc.fill_null(col.cast(pa.int32()), -1).to_numpy()
            parts = np.where(given >= 0, given, parts).astype(np.int32)
        else:
            parts = col.cast(pa.int32()).to_numpy().astype(np.int32)
        bad = parts[(parts < 0) | (parts >= num_partitions)]
        if bad.size:
            raise ValueError(f"partition {int(bad[0])} does not exist: the topic has {num_partitions}")
    else:
        parts = _partition_by_key(keys, num_partitions, sticky, rows, batch_size)
    return rows, parts


def _partition_by_key(keys: pa.Array, num_partitions: int, sticky: _Sticky, rows: pa.RecordBatch,
                      batch_size: int) -> np.ndarray:
    parts = partitions_for_keys(keys, num_partitions)
    null_rows = np.flatnonzero(parts < 0)
    if null_rows.size:
        avg = max(1, rows.nbytes // max(1, rows.num_rows))
        parts[null_rows] = sticky.assign(null_rows.size, batch_size // avg)
    return parts


def _to_bytes(arr: pa.Array, role: str) -> pa.Array:
    t = arr.type
    if pa.types.is_binary(t):
        return arr
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t) or pa.types.is_fixed_size_binary(t):
        return arr.cast(pa.binary())
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return arr.cast(pa.string()).view(pa.binary())
    if pa.types.is_dictionary(t):
        return _to_bytes(arr.dictionary_decode(), role)
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.binary())
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t):
        return arr.cast(pa.string()).view(pa.binary())
    return _json(arr)


def _json(arr: pa.Array) -> pa.Array:
    """One JSON text per element (nulls stay null: a tombstone), vectorised by Polars when it can."""
    wrap = not pa.types.is_struct(arr.type)
    struct = pa.StructArray.from_arrays([arr], names=["v"]) if wrap else arr
    try:
        import polars as pl

        if _has_binary(struct.type):
            raise TypeError("binary fields")
        text = pl.Series(struct).struct.json_encode().to_arrow().cast(pa.large_string())
        if wrap:  # '{"v":...}' -> '...'
            text = pc.utf8_slice_codeunits(text, 5, -1)
        out = text.cast(pa.string()).view(pa.binary())
    except (ImportError, TypeError):
        out = pa.array([None if v is None else json.dumps(v, default=_json_default, separators=(",", ":"))
                        .encode() for v in arr.to_pylist()], pa.binary())
    return pc.if_else(pc.is_valid(arr), out, pa.scalar(None, pa.binary()))


def _has_binary(t: pa.DataType) -> bool:
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t) or \
            pa.types.is_fixed_size_binary(t):
        return True
    return any(_has_binary(t.field(i).type) for i in range(t.num_fields))


def _json_default(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("utf-8", "backslashreplace")
    return str(v)


def _headers(arr: pa.Array) -> pa.Array:
    """Spark's headers column (list of {key, value}) or a map of key -> value, as RECORD_SCHEMA headers."""
    t = arr.type
    if pa.types.is_map(t):
        keys = arr.keys.cast(pa.string())
        vals = _to_bytes(arr.items, "headers")
        struct = pa.StructArray.from_arrays([keys, vals], fields=list(HEADER_TYPE.value_type))
        return pa.ListArray.from_arrays(arr.offsets, struct, mask=arr.is_null()).cast(HEADER_TYPE)
    try:
        return arr.cast(HEADER_TYPE)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValueError(f"headers must be a list<struct<key: string, value: binary>> or a map column, "
                         f"not {t}") from exc


def _requests(rows: pa.RecordBatch, parts: np.ndarray, leaders: dict[int, int], compression: str,
              batch_size: int) -> Iterator[tuple[int, list[tuple[int, bytes, int]]]]:
    """Produce requests: (leader, [(partition, record batch bytes, record count)]), at most one batch
    per partition per request (Kafka's rule for Produce v3+), in order within each partition."""
    order = np.argsort(parts, kind="stable")
    sorted_parts = parts[order]
    present, starts = np.unique(sorted_parts, return_index=True)
    ends = np.append(starts[1:], len(order))
    sizes = _row_sizes(rows)
    chunks: dict[int, list[pa.RecordBatch]] = {}
    for p, lo, hi in zip(present.tolist(), starts.tolist(), ends.tolist()):
        idx = order[lo:hi]
        part_rows = rows.take(pa.array(idx))
        cum = np.cumsum(sizes[idx])
        cuts = np.searchsorted(cum, np.arange(batch_size, int(cum[-1]), batch_size), "right")
        bounds = [0, *sorted(set(int(c) for c in cuts if 0 < c < len(idx))), len(idx)]
        chunks[p] = [part_rows.slice(a, b - a) for a, b in itertools.pairwise(bounds)]
    rounds = max(len(c) for c in chunks.values())
    for r in range(rounds):
        by_leader: dict[int, list[tuple[int, bytes, int]]] = {}
        for p, cs in chunks.items():
            if r < len(cs):
                blob = encode_batch(cs[r], base_offset=0, compression=compression)
                by_leader.setdefault(leaders[p], []).append((p, blob, cs[r].num_rows))
        yield from by_leader.items()


def _row_sizes(rows: pa.RecordBatch) -> np.ndarray:
    sizes = np.full(rows.num_rows, _RECORD_OVERHEAD, np.int64)
    for name in ("key", "value"):
        col = rows.column(name)
        sizes += pc.fill_null(pc.binary_length(col), 0).to_numpy()
    return sizes
