"""`read_table`: a topic as a table of the latest value per key (Kafka Streams' KTable, vectorised).

Within a partition the record with the highest offset wins (the order the log gives, whatever the
timestamps say, as compaction decides). A key found in several partitions (a producer that did
not partition by key) keeps the record with the latest timestamp, then the highest partition.
A key whose latest record is a tombstone (null value) is absent; records without a key are not
rows of a table and are dropped.

What is read is what a read_committed consumer sees, so aborted and open transactions never show.
Compaction running meanwhile changes nothing: it keeps each key's latest record, which is the one
chosen here. ``as_of`` travels back: a timestamp keeps only records stamped at or before it (history
compaction already removed cannot come back), offsets (``{"0": 120, "1": 98}``, end exclusive, as
``ending_offsets``) the records before them.

The work is columnar: a group-by on (key, partition) for the last row index, a second one by key
only when keys span partitions, one ``take``; decoding runs on the surviving rows only.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pylog.sdk.decoders import DecodeSpec, apply_decoders, resolve_decoders
from pylog.sdk.frames import check_frame_type, to_frame
from pylog.sdk.offsets import parse_timestamps
from pylog.sdk.options import ReadOptions
from pylog.sdk.scan import TopicScan, decode_context

_ROW = "__pylog_row"


def latest_per_key(table: pa.Table) -> pa.Table:
    """The rows of `table` (columns key, value, partition, offset, timestamp, ...) that are the latest of
    their key, tombstones and null keys removed, in (partition, offset) order."""
    table = table.filter(pc.is_valid(table.column("key")))
    if table.num_rows == 0:
        return table.filter(pc.is_valid(table.column("value")))
    table = table.take(pc.sort_indices(table, [("partition", "ascending"), ("offset", "ascending")]))
    keyed = pa.table({"key": table.column("key"), "partition": table.column("partition"),
                      _ROW: pa.array(np.arange(table.num_rows, dtype=np.int64))})
    last = keyed.group_by(["key", "partition"], use_threads=False).aggregate([(_ROW, "max")])
    rows = last.column(f"{_ROW}_max").to_numpy()
    if pc.count_distinct(last.column("key")).as_py() < last.num_rows:  # a key in several partitions
        candidates = table.take(pa.array(rows))
        by_time = np.asarray(pc.sort_indices(
            pa.table({"ts": candidates.column("timestamp").cast(pa.int64()),
                      "p": candidates.column("partition")}), [("ts", "ascending"), ("p", "ascending")]))
        rank = np.empty(len(rows), np.int64)
        rank[by_time] = np.arange(len(rows))
        best = pa.table({"key": candidates.column("key"), "rank": rank}).group_by(
            "key", use_threads=False).aggregate([("rank", "max")])
        rows = rows[by_time[best.column("rank_max").to_numpy()]]
    chosen = table.take(pa.array(np.sort(rows)))
    return chosen.filter(pc.is_valid(chosen.column("value")))


def read_retrying(scan: TopicScan, attempts: int = 5) -> pa.Table:
    """``scan.to_arrow()``, read again when a data directory's segment was replaced under the read (the
    broker sealed or compacted it between listing and mapping its file)."""
    for attempt in range(attempts):
        try:
            return scan.to_arrow()
        except FileNotFoundError:
            if scan.options.data_dir is None or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def read_table(
    topic: str,
    *,
    data_dir: Any = None,
    bootstrap_servers: Any = None,
    as_of: Any = None,
    partitions: Sequence[int] | None = None,
    include_headers: bool = False,
    decode: DecodeSpec = None,
    schema_registry_url: str | None = None,
    on_decode_error: str = "raise",
    as_: str = "arrow",
    fetch_options: Any = None,
    progress: bool | None = None,
    security: Any = None,
) -> Any:
    """The latest value of every key of `topic` (tombstones removed), as a ``pyarrow.Table`` with the
    columns of `read_topic` (or ``as_="polars"`` / ``"pandas"``). ``as_of``: a timestamp (epoch ms,
    datetime, ISO text) or offsets (``{"0": 120}`` / ``{topic: {...}}``, end exclusive) to see the
    table as it was. Source, ``decode``, ``security`` and the rest as for `read_topic`."""
    options = ReadOptions.from_arguments(locals())
    check_frame_type(as_)
    ending: Any = "latest"
    until_ms: int | None = None
    if isinstance(as_of, Mapping):
        ending = dict(as_of)
    elif as_of is not None:
        parsed = parse_timestamps(as_of if not isinstance(as_of, dt.date) or isinstance(as_of, dt.datetime)
                                  else dt.datetime.combine(as_of, dt.time()), topic, name="as_of")
        if not isinstance(parsed, int):
            raise ValueError(f"as_of: expected a timestamp or per-partition offsets, got {as_of!r}")
        until_ms = parsed
    scan = TopicScan(topic, options, ending_offsets=ending, decode=None)  # decoded once reduced
    table = read_retrying(scan)
    if until_ms is not None:
        ts = table.column("timestamp").cast(pa.int64())
        table = table.filter(pc.less_equal(ts, until_ms))
    table = latest_per_key(table)
    decoders = resolve_decoders(decode, decode_context(options, topic))
    if decoders:
        table = apply_decoders(table.combine_chunks(), decoders)
    return to_frame(table, as_)
