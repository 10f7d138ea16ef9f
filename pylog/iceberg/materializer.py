"""The materialiser of one topic: the shell around `MaterializerPlan` that does the reading and writing.

It reads the topic through the Kafka protocol as a read_committed consumer (the SDK's `TailReader`,
against the broker's own listener), buffers Arrow batches, and when the plan says a commit is due
turns them into the table's rows (decoding registry values, sending failures to the dead-letter
table, keeping the latest record per key in upsert mode) and commits through `TopicTables`. It runs
in its own thread until told to stop; any failure is logged and the whole thing starts over from
the table's offsets after `RESTART_BACKOFF_S`, which is always safe (the table says where to resume).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.iceberg import layout as L
from pylog.iceberg.catalog import CatalogSettings
from pylog.iceberg.plan import CommitPlan, MaterializerPlan
from pylog.iceberg.tables import CommitConflict, TopicTables
from pylog.schema_registry.records import TOPIC as SCHEMAS_TOPIC
from pylog.sdk import aio
from pylog.sdk.constant import ConstantPool
from pylog.sdk.kafka_source import FetchOptions, KafkaTopicSource
from pylog.sdk.tail import TailReader

log = logging.getLogger(__name__)

RESTART_BACKOFF_S = 5.0
POLL_MAX_RECORDS = 100_000
MAX_POLL_WAIT_S = 1.0  # a stop request is noticed within this
SOURCE_COLUMNS = ("offset", "timestamp", "key", "value", "headers")


@dataclass(frozen=True)
class TopicSpec:
    """What the topic's configs ask for (``pylog.iceberg.*``)."""

    topic: str
    topic_id: str
    table: str
    interval_ms: int = 60_000
    mode: str = "append"  # or "upsert"
    layout: str = L.AUTO
    partition_by: str = "day"


class Materializer:
    """Keeps the Iceberg table of `spec` up to date from the cluster at `bootstrap_servers`."""

    def __init__(self, spec: TopicSpec, catalog: CatalogSettings, bootstrap_servers: str, *,
                 security: Any = None, clock: Clock = SYSTEM_CLOCK,
                 max_buffer_records: int | None = None) -> None:
        self.spec = spec
        self.catalog_settings = catalog
        self.bootstrap_servers = bootstrap_servers
        self.options = FetchOptions(client_id=f"pylog-iceberg-{spec.topic}", security=security)
        self.clock = clock
        self.now_ms = clock.wall_ms
        self.max_buffer_records = max_buffer_records
        self.stats = {"commits": 0, "records": 0, "dead_letters": 0, "conflicts": 0, "restarts": 0}
        self._plan: MaterializerPlan | None = None  # the plan being worked, for table_offsets
        self._start_positions: dict[int, int] = {}  # where each partition's reading started

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self._run(stop)
            except Exception:
                log.exception("materialising %s into %s failed; starting over from the table's offsets "
                              "in %.0fs",
                              self.spec.topic, self.spec.table, RESTART_BACKOFF_S)
                self.stats["restarts"] += 1
                stop.wait(RESTART_BACKOFF_S)

    # --- the loop ------------------------------------------------------------------------------

    def _log_bounds(self) -> dict[int, tuple[int, int]]:
        with KafkaTopicSource(self.bootstrap_servers, self.options) as source:
            return source.offset_bounds(self.spec.topic, source.partitions(self.spec.topic))

    def _run(self, stop: threading.Event) -> None:
        spec = self.spec
        tables = TopicTables(self.catalog_settings.open(), spec.table, spec.topic, spec.topic_id,
                             layout=spec.layout, partition_by=spec.partition_by, upsert=spec.mode == "upsert")
        plan = MaterializerPlan(spec.interval_ms)
        if self.max_buffer_records is not None:
            plan.max_buffer_records = self.max_buffer_records
        main, dlq = tables.load()
        positions = plan.start(main, dlq, self._log_bounds())
        self._started(plan)
        log.info("materialising %s into Iceberg table %s from offsets {%s}", spec.topic, spec.table,
                 ", ".join(f"{p}: {o}" for p, o in sorted(positions.items())))
        reader = TailReader(self.bootstrap_servers, spec.topic, positions, SOURCE_COLUMNS,
                            options=self.options, follow_new_partitions=True, clock=self.clock)
        decoder = self._value_decoder()
        buffer: list[tuple[int, pa.RecordBatch]] = []
        try:
            while not stop.is_set():
                wait_s = min(MAX_POLL_WAIT_S, max(0.05, plan.wait_ms(self.now_ms()) / 1000))
                room = max(1, min(POLL_MAX_RECORDS, plan.max_buffer_records - plan.buffered_records))
                pieces = aio.run(reader.poll(room, wait_s))
                buffer.extend(pieces)
                n = sum(b.num_rows for _, b in pieces)
                nbytes = sum(b.nbytes for _, b in pieces)
                oldest = min((int(pc.min(b.column("timestamp")).cast(pa.int64()).as_py())
                              for _, b in pieces if b.num_rows), default=None)
                plan.fetched(reader.positions, n, nbytes, oldest, reader.caught_up, self.now_ms())
                if not plan.commit_due(self.now_ms()):
                    continue
                commit = plan.commit_plan()
                try:
                    began = self.clock.monotonic_s()
                    self._commit(tables, decoder, buffer, commit)
                    plan.committed(commit, self.now_ms())
                    self.stats["commits"] += 1
                    log.debug("%s: committed %d records in %.3fs, offsets %s", spec.table, commit.rows,
                              self.clock.monotonic_s() - began, commit.offsets)
                except CommitConflict:
                    self.stats["conflicts"] += 1
                    main, dlq = tables.load()
                    reader.seek(plan.lost_race(main, dlq, self._log_bounds()))
                    self._started(plan)
                buffer.clear()
        finally:
            aio.run(reader.close())

    def table_offsets(self) -> dict[int, int]:
        """The next offset of each partition the table lacks, as its last commit says (a partition
        it holds nothing of: where reading started). Safe from any thread."""
        plan = self._plan
        return {} if plan is None else {**self._start_positions, **plan.main}

    def _started(self, plan: MaterializerPlan) -> None:
        """The plan (re)starts from the table's offsets: at the start and after a lost race."""
        self._start_positions = dict(plan.positions)
        self._plan = plan
        self._notes(plan)

    def _notes(self, plan: MaterializerPlan) -> None:
        for note in plan.notes:
            log.warning("%s -> %s: %s", self.spec.topic, self.spec.table, note)
        plan.notes.clear()

    def _value_decoder(self) -> Any:
        if self.spec.layout == L.KAFKA:
            return None
        from pylog.iceberg.decode import RefreshingSchemas, ValueDecoder
        from pylog.sdk.api import read_topic

        def read() -> pa.Table:
            return read_topic(SCHEMAS_TOPIC, bootstrap_servers=self.bootstrap_servers,
                              fetch_options=self.options, columns=["key", "value"], progress=False)

        return ValueDecoder(self.spec.topic, RefreshingSchemas(read, self.clock))

    # --- one commit ----------------------------------------------------------------------------

    def _commit(self, tables: TopicTables, decoder: Any, buffer: list[tuple[int, pa.RecordBatch]],
                plan: CommitPlan) -> None:
        records = _records(buffer)
        main_keep = _at_or_after(records, plan.main_from)
        layout = tables.layout
        if layout is None:  # first commit: the table is made now
            layout = L.REGISTRY if (self.spec.layout == L.REGISTRY or (
                self.spec.layout == L.AUTO and decoder is not None and decoder.has_schema())) else L.KAFKA
        dead: pa.Table | None = None
        if layout == L.KAFKA:
            rows = records.filter(main_keep)
            main = L.kafka_rows(rows, self.spec.topic)
        else:
            decoded, failed, reasons = decoder.decode(records.column("value"))
            dlq_keep = _at_or_after(records, plan.dlq_from) & failed
            if dlq_keep.any():
                idx = np.flatnonzero(dlq_keep)
                dead = L.dlq_rows(records.take(pa.array(idx)), self.spec.topic,
                                  [reasons[i] for i in idx.tolist()])
                self.stats["dead_letters"] += len(idx)
            good = np.flatnonzero(main_keep & ~failed)
            rows = records.take(pa.array(good))
            values = decoded.take(pa.array(good))
            if pa.types.is_null(values.type):  # no record decoded yet: the subject's latest schema
                latest = decoder.latest_type()
                if latest is None and tables.table is None:
                    if len(good):
                        raise ValueError(f"no Avro schema for {self.spec.topic}-value to make the columns "
                                         "of its table from")
                    # only dead letters: they are committed (the table, made later, starts at the log
                    # start and skips them, since the dead-letter table holds them)
                    tables.commit(None, dead, plan.offsets, plan.dlq_offsets)
                    return
                values = pa.nulls(len(values), latest) if latest is not None else values
            main = L.registry_rows(rows, values, self.spec.topic)
        keys = None
        if tables.upsert:
            main, keys = _upsert(main, rows)
        if tables.table is None:
            tables.ensure_table(layout, main.schema)
        tables.commit(main, dead, plan.offsets, plan.dlq_offsets, upsert_keys=keys)
        self.stats["records"] += main.num_rows


def _records(buffer: list[tuple[int, pa.RecordBatch]]) -> pa.Table:
    """The buffered batches as one table with a ``partition`` column."""
    pool = ConstantPool()
    batches = []
    for p, b in buffer:
        batches.append(b.append_column("partition", pool.take(p, b.num_rows)))
    if not batches:
        from pylog.sdk.schema import output_schema

        return output_schema([*SOURCE_COLUMNS, "partition"]).empty_table()
    return pa.Table.from_batches(batches).combine_chunks()


def _at_or_after(records: pa.Table, starts: dict[int, int]) -> np.ndarray:
    """Per row: whether its offset is at or past `starts` of its partition (unknown partitions: yes)."""
    if records.num_rows == 0:
        return np.zeros(0, bool)
    parts = records.column("partition").to_numpy()
    offsets = records.column("offset").to_numpy()
    top = int(parts.max()) + 1
    table = np.full(top, -1, np.int64)
    for p, o in starts.items():
        if p < top:
            table[p] = o
    return offsets >= table[parts]


def _upsert(main: pa.Table, rows: pa.Table) -> tuple[pa.Table, pa.Array]:
    """Upsert mode: the rows of `main` that are the latest of their key (tombstones and records
    without a key dropped; `rows` are the fetched records behind `main`, row for row), and every key
    the batch touched (whose older rows the commit deletes)."""
    from pylog.sdk.table import latest_per_key

    view = pa.table({"key": rows.column("key"), "partition": rows.column("partition"),
                     "offset": rows.column("offset"), "timestamp": rows.column("timestamp"),
                     "value": rows.column("value"),
                     "__row": pa.array(np.arange(rows.num_rows, dtype=np.int64))})
    touched = pc.unique(pc.drop_null(view.column("key")))
    latest = latest_per_key(view)
    return main.take(latest.column("__row")), touched
