"""A topic's Iceberg table and dead-letter table through pyiceberg: offsets read, commits made.

Each commit is one catalog swap carrying, in its snapshot summary, ``pylog.topic``,
``pylog.topic.id`` and ``pylog.offsets`` (JSON ``{"partition": next offset}``). The tables are
created with pyiceberg's commit retries off (``commit.retry.num-retries=0``): pyiceberg would
otherwise re-apply an append on top of a concurrent one, which for a materialiser means records
twice. A concurrent commit therefore fails (`CommitConflict`) and the caller re-reads the offsets.
Upsert mode deletes the batch's keys and appends their latest values in one transaction
(copy-on-write deletes, as pyiceberg writes them).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import warnings
from typing import Any

import pyarrow as pa

from pylog.iceberg import layout as L

log = logging.getLogger(__name__)

OFFSETS = "pylog.offsets"
TOPIC = "pylog.topic"
TOPIC_ID = "pylog.topic.id"
LAYOUT = "pylog.layout"
PARTITIONING = ("hour", "day", "month", "year", "none")
TABLE_PROPERTIES = {
    "format-version": "2",
    "commit.retry.num-retries": "0",  # a retried append would repeat records: see the module doc
    "commit.manifest-merge.enabled": "true",
}
EXPIRE_EVERY_COMMITS = 100
DEFAULT_MAX_SNAPSHOT_AGE_MS = 5 * 24 * 3600 * 1000  # Iceberg's history.expire.max-snapshot-age-ms


class CommitConflict(Exception):
    """Another writer committed to the table since its offsets were read."""


def _exceptions() -> Any:
    from pyiceberg import exceptions

    return exceptions


def snapshot_offsets(table: Any, topic_id: str) -> dict[int, int] | None:
    """The offsets in the newest pylog snapshot of `table` (walking back past snapshots other writers
    made); None when there is none, {} when it was made for another topic of the same name."""
    snap = table.current_snapshot()
    seen = 0
    while snap is not None and seen < 10_000:
        props = snap.summary.additional_properties if snap.summary is not None else {}
        if OFFSETS in props:
            if props.get(TOPIC_ID) not in (None, topic_id):
                log.warning("table %s was materialised from an earlier topic of the same name (id %s); "
                            "the topic %s is read from its start", table.name(), props.get(TOPIC_ID),
                            topic_id)
                return {}
            return {int(p): int(o) for p, o in json.loads(props[OFFSETS]).items()}
        if snap.parent_snapshot_id is None:
            break
        snap = table.snapshot_by_id(snap.parent_snapshot_id)
        seen += 1
    return None


class TopicTables:
    """The table `identifier` of `topic` and its dead-letter table ``<identifier>~dlq``."""

    def __init__(self, catalog: Any, identifier: str, topic: str, topic_id: str, *, layout: str = L.AUTO,
                 partition_by: str = "day", upsert: bool = False) -> None:
        if layout not in L.LAYOUTS:
            raise ValueError(f"layout must be one of {L.LAYOUTS}, not {layout!r}")
        if partition_by not in PARTITIONING:
            raise ValueError(f"partitioning must be one of {PARTITIONING}, not {partition_by!r}")
        self.catalog = catalog
        self.identifier = identifier
        self.dlq_identifier = identifier + L.DLQ_SUFFIX
        self.topic, self.topic_id = topic, topic_id
        self.wanted_layout = layout
        self.partition_by = partition_by
        self.upsert = upsert
        self.table: Any = None
        self.dlq: Any = None
        self.commits = 0

    @property
    def layout(self) -> str | None:
        """The existing table's layout (None before it exists)."""
        if self.table is None:
            return None
        return self.table.properties.get(LAYOUT, L.KAFKA)

    def load(self) -> tuple[dict[int, int], dict[int, int]]:
        """(table offsets, dead-letter offsets), loading the tables that exist."""
        ex = _exceptions()
        namespace = self.identifier.rsplit(".", 1)[0]
        try:
            self.catalog.create_namespace_if_not_exists(namespace)
        except ex.NamespaceAlreadyExistsError:
            pass
        self.table = self._load(self.identifier)
        self.dlq = self._load(self.dlq_identifier)
        main = snapshot_offsets(self.table, self.topic_id) if self.table is not None else None
        dlq = snapshot_offsets(self.dlq, self.topic_id) if self.dlq is not None else None
        if self.table is not None and self.table.properties.get("commit.retry.num-retries") != "0":
            with self.table.transaction() as tx:  # see the module doc: retries would repeat records
                tx.set_properties({"commit.retry.num-retries": "0"})
            log.warning("%s: set commit.retry.num-retries=0 (a retried append would repeat records)",
                        self.identifier)
        return main or {}, dlq or {}

    def _load(self, identifier: str) -> Any:
        try:
            return self.catalog.load_table(identifier)
        except _exceptions().NoSuchTableError:
            return None

    def _create(self, identifier: str, schema: pa.Schema, layout: str, timestamp_column: str) -> Any:
        ex = _exceptions()
        properties = {**TABLE_PROPERTIES, LAYOUT: layout, TOPIC: self.topic}
        try:
            create = self.catalog.create_table_transaction
            with create(identifier, schema=schema, properties=properties) as tx:
                if self.partition_by != "none":
                    from pyiceberg import transforms

                    transform = {"hour": transforms.HourTransform, "day": transforms.DayTransform,
                                 "month": transforms.MonthTransform, "year": transforms.YearTransform
                                 }[self.partition_by]()
                    with tx.update_spec() as spec:
                        spec.add_field(timestamp_column, transform, f"{timestamp_column}_{self.partition_by}")
            log.info("created Iceberg table %s (%s layout, partitioned by %s)", identifier, layout,
                     self.partition_by)
        except ex.TableAlreadyExistsError:
            pass
        return self.catalog.load_table(identifier)

    def ensure_table(self, layout: str, schema: pa.Schema) -> Any:
        if self.table is None:
            self.table = self._create(self.identifier, schema, layout, L.column(layout, "timestamp"))
        return self.table

    def _evolved(self, table: Any, data: pa.Table) -> Any:
        """`table` with the columns of `data` it lacks added (nullable), as registry versions add fields."""
        current = set(table.schema().as_arrow().names)
        if not set(data.column_names) <= current or _nested_additions(table.schema().as_arrow(), data.schema):
            with table.update_schema() as update:
                update.union_by_name(data.schema)
            log.info("%s: schema now %s", table.name(), table.schema())
        return table

    def _properties(self, offsets: dict[int, int]) -> dict[str, str]:
        return {TOPIC: self.topic, TOPIC_ID: self.topic_id,
                OFFSETS: json.dumps({str(p): o for p, o in sorted(offsets.items())})}

    def commit(self, main: pa.Table | None, dead: pa.Table | None, offsets: dict[int, int],
               dlq_offsets: dict[int, int] | None = None, *, upsert_keys: pa.Array | None = None) -> None:
        """Commit `dead` to the dead-letter table with `dlq_offsets`, then `main` (or nothing) to the
        table with `offsets`. Raises CommitConflict on a lost race."""
        ex = _exceptions()
        props = self._properties(offsets)
        try:
            if dead is not None and dead.num_rows:
                if self.dlq is None:
                    self.dlq = self._create(self.dlq_identifier, L.DLQ_SCHEMA, L.KAFKA, "timestamp")
                self.dlq.append(L.conform(dead, self.dlq.schema().as_arrow()),
                                snapshot_properties=self._properties(dlq_offsets or offsets))
            table = self.table
            if table is None:  # dead letters before the table has columns
                assert main is None, "the table is created before rows are committed to it"
                return
            data = main if main is not None else table.schema().as_arrow().empty_table()
            if main is not None and self.layout == L.REGISTRY:
                table = self._evolved(table, main)
            data = L.conform(data, table.schema().as_arrow())
            if upsert_keys is not None and len(upsert_keys):
                from pyiceberg.expressions import In

                keys = [k for k in upsert_keys.to_pylist() if k is not None]
                with table.transaction() as tx, warnings.catch_warnings():
                    warnings.filterwarnings("ignore", "Delete operation did not match any records")
                    # pyiceberg's In(term, literals): mypy reads its pydantic fields as the signature
                    key_column = L.column(self.layout or L.KAFKA, "key")
                    key_in = In(key_column, keys)  # type: ignore[call-arg, arg-type]
                    tx.delete(key_in, snapshot_properties=props)
                    tx.append(data, snapshot_properties=props)
            else:
                table.append(data, snapshot_properties=props)
        except ex.CommitFailedException as exc:
            self.table = self._load(self.identifier)
            self.dlq = self._load(self.dlq_identifier)
            raise CommitConflict(str(exc)) from None
        self.commits += 1
        if self.commits % EXPIRE_EVERY_COMMITS == 0:
            self.expire_snapshots()

    def expire_snapshots(self) -> None:
        """Expire snapshots older than the table's ``history.expire.max-snapshot-age-ms`` (Iceberg's
        name; 5 days by default), so table metadata stays small as commits go on."""
        for table in (self.table, self.dlq):
            if table is None:
                continue
            age = int(table.properties.get("history.expire.max-snapshot-age-ms", DEFAULT_MAX_SNAPSHOT_AGE_MS))
            cutoff = dt.datetime.now(dt.timezone.utc) - dt.timedelta(milliseconds=age)
            try:
                table.maintenance.expire_snapshots().older_than(cutoff).commit()
            except Exception:  # upkeep only: the next round tries again
                log.warning("expiring snapshots of %s failed", table.name(), exc_info=True)


def _nested_additions(table: pa.Schema, data: pa.Schema) -> bool:
    """Whether a struct column of `data` has fields its table column lacks."""
    for f in data:
        if (f.name in table.names and pa.types.is_struct(f.type)
                and pa.types.is_struct(table.field(f.name).type)):
            have = {c.name for c in table.field(f.name).type}
            if any(c.name not in have for c in f.type):
                return True
    return False
