"""Flight SQL on the broker's Flight server: topics as tables, SQL run next to the data by DuckDB.

A query's topics become DuckDB relations over ``pylog.sdk.sql.TopicDataset`` (the relations
``pylog.sql`` builds): DuckDB pushes each topic's filter into its scan, where ``partition``,
``offset`` and lower ``timestamp`` bounds become read bounds. A topic whose partitions are all led
by this broker (in one log directory) is read from the segments, as DoGet reads; any other through
the broker's own Kafka client. Topics are named bare (``select * from orders``) or qualified as the
catalog lists them (``pylog.topics.orders``). Where the schema registry has a subject for a topic's
key or value (``<topic>-key`` / ``<topic>-value``), that column is decoded with it (``pylog.sql``'s
``decode="registry"``; a record not in the registry's framing reads as null).

Each query gets its own in-memory DuckDB with file access, extension loading and configuration
changes switched off once its topics are registered, so SQL reads topics only. Reading a topic
needs READ on it; the catalog lists the topics the caller may DESCRIBE.

Statements: GetFlightInfo(CommandStatementQuery) starts the query and answers one endpoint whose
ticket (TicketStatementQuery) DoGet redeems once, on this server, within `STATEMENT_TTL_S`.
Prepared statements (which ADBC's DB-API cursor creates for every ``execute``) keep the query text;
executing one is the same. Parameters, updates and transactions are not supported.
"""

from __future__ import annotations

import logging
import re
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.flight as flight

from pylog import __version__
from pylog._extras import require
from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.flight import sql_messages as msg
from pylog.schema_registry.records import TOPIC as SCHEMAS_TOPIC
from pylog.sdk.sql import base_tables
from pylog.security.acl_operations import AclOperation

log = logging.getLogger(__name__)

REGISTRY = "registry"  # pylog.sql's decoder of registry-framed keys and values
CATALOG = "pylog"
DB_SCHEMA = "topics"
TABLE_TYPE = "TABLE"
STATEMENT_TTL_S = 300.0  # a statement's results wait this long for their DoGet
MAX_STATEMENTS = 256  # open statements and prepared statements per server; the oldest go first

CATALOGS_SCHEMA = pa.schema([pa.field("catalog_name", pa.utf8(), False)])
DB_SCHEMAS_SCHEMA = pa.schema([pa.field("catalog_name", pa.utf8()),
                               pa.field("db_schema_name", pa.utf8(), False)])
TABLES_SCHEMA = pa.schema([
    pa.field("catalog_name", pa.utf8()), pa.field("db_schema_name", pa.utf8()),
    pa.field("table_name", pa.utf8(), False), pa.field("table_type", pa.utf8(), False)])
TABLES_WITH_SCHEMA_SCHEMA = TABLES_SCHEMA.append(pa.field("table_schema", pa.binary(), False))
TABLE_TYPES_SCHEMA = pa.schema([pa.field("table_type", pa.utf8(), False)])
PRIMARY_KEYS_SCHEMA = pa.schema([
    pa.field("catalog_name", pa.utf8()), pa.field("db_schema_name", pa.utf8()),
    pa.field("table_name", pa.utf8(), False), pa.field("column_name", pa.utf8(), False),
    pa.field("key_name", pa.utf8()), pa.field("key_sequence", pa.int32(), False)])

# CommandGetSqlInfo's dense union: its members in order of their type codes
_INFO_MEMBERS = [
    pa.field("string_value", pa.utf8()), pa.field("bool_value", pa.bool_()),
    pa.field("bigint_value", pa.int64()), pa.field("int32_bitmask", pa.int32()),
    pa.field("string_list", pa.list_(pa.utf8())),
    pa.field("int32_to_int32_list_map", pa.map_(pa.int32(), pa.list_(pa.int32()))),
]
SQL_INFO_SCHEMA = pa.schema([pa.field("info_name", pa.uint32(), False),
                             pa.field("value", pa.dense_union(_INFO_MEMBERS), False)])
_STRING, _BOOL, _INT32 = 0, 1, 3
# SqlInfo ids of FlightSql.proto -> (union member, value)
SQL_INFO: dict[int, tuple[int, Any]] = {
    0: (_STRING, "pylog"),  # FLIGHT_SQL_SERVER_NAME
    1: (_STRING, __version__),  # FLIGHT_SQL_SERVER_VERSION
    2: (_STRING, pa.__version__),  # FLIGHT_SQL_SERVER_ARROW_VERSION
    3: (_BOOL, True),  # FLIGHT_SQL_SERVER_READ_ONLY
    4: (_BOOL, True),  # FLIGHT_SQL_SERVER_SQL
    5: (_BOOL, False),  # FLIGHT_SQL_SERVER_SUBSTRAIT
    8: (_INT32, 0),  # FLIGHT_SQL_SERVER_TRANSACTION: SQL_SUPPORTED_TRANSACTION_NONE
    9: (_BOOL, False),  # FLIGHT_SQL_SERVER_CANCEL
    504: (_STRING, '"'),  # SQL_IDENTIFIER_QUOTE_CHAR
}

_NO_ROWS = "pylog's Flight SQL runs queries (SELECT, WITH ...) that return rows; it is read-only"
# DuckDB settings that leave a query nothing to read but its registered topics
_LOCKDOWN = ("SET enable_external_access = false", "SET autoinstall_known_extensions = false",
             "SET autoload_known_extensions = false", "SET lock_configuration = true")


class SqlNode(Protocol):
    """What Flight SQL reads of its broker (``pylog.flight.server.FlightNode``)."""

    node_id: int

    @property
    def topics(self) -> Callable[[], list[str]]: ...
    @property
    def led(self) -> Callable[[str], dict[int, Path]]: ...
    @property
    def leaders(self) -> Callable[[str], dict[int, int] | None]: ...
    @property
    def produce_to(self) -> Callable[[], tuple[str, Any]]: ...
    @property
    def subjects(self) -> Callable[[], set[str]]: ...


@dataclass
class Caller:
    """Who calls: `may(op, topic)` says what the ACLs allow them; `owner` keys their statements."""

    may: Callable[[int, str], bool]
    owner: str


def invalid(message: str) -> pa.ArrowInvalid:
    """An error the client gets as INVALID_ARGUMENT."""
    return pa.ArrowInvalid(message)


def _unsupported(message: str) -> NotImplementedError:
    """An error the client gets as UNIMPLEMENTED."""
    return NotImplementedError(message)


def like(pattern: str | None) -> re.Pattern[str] | None:
    """A Flight SQL filter pattern (``%``: any run, ``_``: any one character) as a regex."""
    if pattern is None:
        return None
    parts = ["." if c == "_" else ".*" if c == "%" else re.escape(c) for c in pattern]
    return re.compile("".join(parts), re.S)


def _matches(pattern: re.Pattern[str] | None, name: str) -> bool:
    return pattern is None or pattern.fullmatch(name) is not None


def referenced_tables(query: str) -> list[str]:
    """The topic names a query may read: its unqualified table names and those qualified as
    ``[pylog.]topics.<name>``. Raises ArrowInvalid when DuckDB cannot parse the query."""
    duckdb = require("duckdb", "Flight SQL")
    import json

    try:
        tree = json.loads(duckdb.execute("select json_serialize_sql(?)", [query]).fetchone()[0])
    except duckdb.Error as exc:
        raise invalid(f"cannot parse the query: {exc}") from None
    if tree.get("error"):
        message = tree.get("error_message") or "the query does not parse"
        if "Only SELECT" in message:
            message = _NO_ROWS
        raise invalid(message)
    found: set[str] = set()
    for node in base_tables(tree):
        if isinstance(node.get("table_name"), str):
            schema, catalog = node.get("schema_name") or "", node.get("catalog_name") or ""
            if (not schema and not catalog) or (schema == DB_SCHEMA and catalog in ("", CATALOG)):
                found.add(node["table_name"])
    return sorted(found)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _table(schema: pa.Schema, columns: list[list[Any]]) -> pa.Table:
    return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, schema)], schema=schema)


def sql_info_table(ids: list[int]) -> pa.Table:
    """The CommandGetSqlInfo answer for these ids (all pylog knows when empty)."""
    chosen = [i for i in (ids or sorted(SQL_INFO)) if i in SQL_INFO]
    values: list[list[Any]] = [[] for _ in _INFO_MEMBERS]
    codes, offsets = [], []
    for i in chosen:
        member, value = SQL_INFO[i]
        codes.append(member)
        offsets.append(len(values[member]))
        values[member].append(value)
    children = [pa.array(v, f.type) for v, f in zip(values, _INFO_MEMBERS)]
    union = pa.UnionArray.from_dense(pa.array(codes, pa.int8()), pa.array(offsets, pa.int32()), children,
                                     [f.name for f in _INFO_MEMBERS], list(range(len(_INFO_MEMBERS))))
    return pa.Table.from_arrays([pa.array(chosen, pa.uint32()), union], schema=SQL_INFO_SCHEMA)


@dataclass
class _Statement:
    owner: str
    expires: float
    query: str = ""  # a prepared statement's
    connection: Any = None  # a started statement's DuckDB connection and result reader
    reader: pa.RecordBatchReader | None = None

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


class FlightSql:
    """The Flight SQL commands of one Flight server (see the module doc)."""

    def __init__(self, node: SqlNode, clock: Clock = SYSTEM_CLOCK) -> None:
        self.node = node
        self.now = clock.monotonic_s
        self._lock = threading.Lock()
        self._statements: dict[bytes, _Statement] = {}  # started statements and prepared ones

    # --- statements held between calls -------------------------------------------------------

    def _keep(self, statement: _Statement) -> bytes:
        handle = secrets.token_bytes(16)
        with self._lock:
            now = self.now()
            for key in [k for k, s in self._statements.items() if s.expires < now]:
                self._statements.pop(key).close()
            while len(self._statements) >= MAX_STATEMENTS:
                self._statements.pop(next(iter(self._statements))).close()
            self._statements[handle] = statement
        return handle

    def _take(self, handle: bytes, caller: Caller, *, started: bool, keep: bool = False) -> _Statement:
        """The caller's statement (`started`) or prepared statement of `handle`; kept for another
        `STATEMENT_TTL_S` or forgotten."""
        with self._lock:
            statement = self._statements.get(handle)
            if statement is None or statement.expires < self.now() or statement.owner != caller.owner \
                    or (statement.reader is not None) != started:
                raise invalid("unknown or expired statement handle (statements are redeemed once, on "
                              "the server that planned them, within "
                              f"{STATEMENT_TTL_S:.0f} s)")
            if keep:
                statement.expires = self.now() + STATEMENT_TTL_S
            else:
                del self._statements[handle]
        return statement

    def close(self) -> None:
        with self._lock:
            statements, self._statements = list(self._statements.values()), {}
        for s in statements:
            s.close()

    # --- RPCs ---------------------------------------------------------------------------------

    def flight_info(self, descriptor: flight.FlightDescriptor, caller: Caller) -> flight.FlightInfo:
        name, command = self._unpack(descriptor.command)
        if name == "CommandStatementQuery":
            if command.HasField("transaction_id"):
                raise _unsupported("pylog's Flight SQL has no transactions")
            return self._start(command.query, descriptor, caller)
        if name == "CommandPreparedStatementQuery":
            prepared = self._take(command.prepared_statement_handle, caller, started=False, keep=True)
            return self._start(prepared.query, descriptor, caller)
        table = self._metadata(name, command, caller)
        endpoint = flight.FlightEndpoint(descriptor.command, [])  # redeemed here, as the same command
        return flight.FlightInfo(table.schema, descriptor, [endpoint], table.num_rows, -1)

    def schema(self, descriptor: flight.FlightDescriptor, caller: Caller) -> pa.Schema:
        name, command = self._unpack(descriptor.command)
        if name in ("CommandStatementQuery", "CommandPreparedStatementQuery"):
            query = command.query if name == "CommandStatementQuery" else \
                self._take(command.prepared_statement_handle, caller, started=False, keep=True).query
            return self._result_schema(query, caller)
        return self._metadata(name, command, caller).schema

    def do_get(self, ticket: bytes, caller: Caller) -> flight.FlightDataStream:
        name, command = self._unpack(ticket)
        if name == "TicketStatementQuery":
            statement = self._take(command.statement_handle, caller, started=True)
            assert statement.reader is not None  # started
            return flight.GeneratorStream(statement.reader.schema, self._stream(statement))
        return flight.RecordBatchStream(self._metadata(name, command, caller))

    def do_action(self, action: flight.Action, caller: Caller) -> Iterator[flight.Result]:
        if action.type not in ("CreatePreparedStatement", "ClosePreparedStatement"):
            raise _unsupported(f"pylog's Flight server does not implement the action {action.type!r}")
        name, command = self._unpack(action.body.to_pybytes())
        if action.type == "CreatePreparedStatement" and name == "ActionCreatePreparedStatementRequest":
            if command.HasField("transaction_id"):
                raise _unsupported("pylog's Flight SQL has no transactions")
            schema = self._result_schema(command.query, caller)  # a query that does not parse is refused now
            handle = self._keep(_Statement(caller.owner, self.now() + STATEMENT_TTL_S, query=command.query))
            result = msg.new("ActionCreatePreparedStatementResult", prepared_statement_handle=handle,
                             dataset_schema=schema.serialize().to_pybytes())
            return iter([flight.Result(msg.pack(result))])
        if action.type == "ClosePreparedStatement" and name == "ActionClosePreparedStatementRequest":
            try:
                self._take(command.prepared_statement_handle, caller, started=False).close()
            except pa.ArrowInvalid:
                pass  # closing twice, or after it expired: nothing left to close
            return iter(())
        raise invalid(f"the {action.type} action takes an Action{action.type}Request, not {name}")

    # --- metadata -----------------------------------------------------------------------------

    @staticmethod
    def _unpack(raw: bytes) -> tuple[str, Any]:
        try:
            name, command = msg.unpack(raw)
        except msg.BadMessage as exc:
            raise invalid(str(exc)) from None
        if command is None:
            raise _unsupported(f"pylog's Flight SQL does not implement {name}")
        return name, command

    def _visible(self, caller: Caller) -> list[str]:
        """The topics the caller may see, internal ones left out."""
        return sorted(t for t in self.node.topics() if not t.startswith("__")
                      and caller.may(AclOperation.DESCRIBE, t))

    def _metadata(self, name: str, command: Any, caller: Caller) -> pa.Table:
        if name == "CommandGetSqlInfo":
            return sql_info_table(list(command.info))
        if name == "CommandGetCatalogs":
            return _table(CATALOGS_SCHEMA, [[CATALOG]])
        if name == "CommandGetTableTypes":
            return _table(TABLE_TYPES_SCHEMA, [[TABLE_TYPE]])
        if name == "CommandGetPrimaryKeys":  # topics have none
            return PRIMARY_KEYS_SCHEMA.empty_table()
        if name not in ("CommandGetDbSchemas", "CommandGetTables"):
            raise invalid(f"{name} is not a Flight SQL command for GetFlightInfo or a ticket for DoGet")
        catalog_ok = not command.HasField("catalog") or command.catalog == CATALOG
        schema_pattern = like(command.db_schema_filter_pattern
                              if command.HasField("db_schema_filter_pattern") else None)
        here = catalog_ok and _matches(schema_pattern, DB_SCHEMA)
        if name == "CommandGetDbSchemas":
            return _table(DB_SCHEMAS_SCHEMA, [[CATALOG] if here else [], [DB_SCHEMA] if here else []])
        if name == "CommandGetTables":
            table_pattern = like(command.table_name_filter_pattern
                                 if command.HasField("table_name_filter_pattern") else None)
            types_ok = not command.table_types or TABLE_TYPE in command.table_types
            names = [t for t in self._visible(caller) if _matches(table_pattern, t)] \
                if here and types_ok else []
            if not command.include_schema:
                return _table(TABLES_SCHEMA, self._tables_columns(names))
            schemas = self._columns(names)
            names = [t for t in names if t in schemas]
            columns = [*self._tables_columns(names), [schemas[t] for t in names]]
            return _table(TABLES_WITH_SCHEMA_SCHEMA, columns)
        raise AssertionError(name)

    @staticmethod
    def _tables_columns(names: list[str]) -> list[list[Any]]:
        return [[CATALOG] * len(names), [DB_SCHEMA] * len(names), names, [TABLE_TYPE] * len(names)]

    def _columns(self, names: list[str]) -> dict[str, bytes]:
        """{topic: its columns as a serialized Arrow schema}: a registry-decoded topic's own, the
        others' all the same (bytes keys and values), read once. Topics that cannot be opened (deleted
        or moved meanwhile) are left out."""
        duckdb = require("duckdb", "Flight SQL")
        subjects = self.node.subjects()
        plain: bytes | None = None
        out: dict[str, bytes] = {}
        for topic in names:
            decoded = bool(self._decode(topic, subjects))
            if not decoded and plain is not None:
                out[topic] = plain
                continue
            try:
                schema = self._schema(topic).serialize().to_pybytes()
            except (ValueError, LookupError, OSError, duckdb.Error) as exc:
                log.info("Flight SQL: no columns for topic %r: %s", topic, exc)
                continue
            out[topic] = schema
            if not decoded:
                plain = schema
        return out

    # --- queries ------------------------------------------------------------------------------

    def _decode(self, topic: str, subjects: set[str]) -> dict[str, str]:
        """The columns of `topic` the schema registry has a subject for (TopicNameStrategy:
        ``<topic>-key`` / ``<topic>-value``), decoded with it."""
        return {column: REGISTRY for column in ("key", "value") if f"{topic}-{column}" in subjects}

    def _source(self, topic: str, decoded: bool) -> dict[str, Any]:
        """Where `topic` is read (``pylog.sql``'s source arguments): this broker's segments when it
        leads every partition in one log directory (and, to decode, the registry's ``_schemas``
        there too), else the cluster through its own client."""
        dirs: set[Path] = set()
        here = True
        for name in (topic, SCHEMAS_TOPIC) if decoded else (topic,):
            led, leaders = self.node.led(name), self.node.leaders(name) or {}
            here = here and bool(leaders) and set(led) == set(leaders)
            dirs |= set(led.values())
        if here and len(dirs) == 1:
            return {"data_dir": dirs.pop()}
        bootstrap, security = self.node.produce_to()
        return {"bootstrap_servers": bootstrap, "security": security}

    def _connection(self, topics: list[str]) -> Any:
        """A DuckDB connection where each topic is a relation (``pylog.sql``'s, under its bare and
        its qualified name; registry-decoded where a subject has a schema) and nothing else can be
        read."""
        duckdb = require("duckdb", "Flight SQL")
        from pylog.sdk.sql import sql as topic_sql

        subjects = self.node.subjects() if topics else set()
        con = duckdb.connect()
        try:
            con.execute("SET TimeZone = 'UTC'")
            con.execute(f"ATTACH ':memory:' AS {CATALOG}")
            con.execute(f"CREATE SCHEMA {CATALOG}.{DB_SCHEMA}")
            for topic in topics:  # pylog.sql registers the topic a query names; this one runs no scan
                decode = self._decode(topic, subjects)
                topic_sql(f"select * from {_quote(topic)} limit 0", connection=con,
                          decode={topic: decode} if decode else None, on_decode_error="null",
                          **self._source(topic, bool(decode)))
                con.execute(f"CREATE VIEW {CATALOG}.{DB_SCHEMA}.{_quote(topic)} AS "
                            f"SELECT * FROM temp.main.{_quote(topic)}")
            for setting in _LOCKDOWN:
                con.execute(setting)
        except BaseException:
            con.close()
            raise
        return con

    def _schema(self, topic: str) -> pa.Schema:
        """The columns a query sees in `topic`."""
        con = self._connection([topic])
        try:
            return con.sql(f"select * from {_quote(topic)} limit 0").to_arrow_reader().schema
        finally:
            con.close()

    def _authorize(self, query: str, caller: Caller) -> list[str]:
        """The topics `query` reads, each one the caller may READ (else FlightUnauthorizedError)."""
        if not isinstance(query, str) or not query.strip():
            raise invalid("the query is empty")
        topics = [t for t in referenced_tables(query) if self.node.leaders(t) is not None]
        for t in topics:
            if not caller.may(AclOperation.READ, t):
                raise flight.FlightUnauthorizedError(f"not authorized to READ topic {t!r}")
        return topics

    def _result_schema(self, query: str, caller: Caller) -> pa.Schema:
        """The columns `query` answers, bound but not run (its relation with ``limit 0`` reads no
        topic); a query DuckDB cannot bind is INVALID_ARGUMENT."""
        duckdb = require("duckdb", "Flight SQL")
        topics = self._authorize(query, caller)
        try:
            con = self._connection(topics)
        except (ValueError, LookupError) as exc:
            raise invalid(str(exc)) from None
        try:
            relation = con.sql(query)
            if relation is None:
                raise invalid(_NO_ROWS)
            return relation.limit(0).to_arrow_reader().schema
        except duckdb.Error as exc:
            raise invalid(str(exc)) from None
        finally:
            con.close()

    def _start(self, query: str, descriptor: flight.FlightDescriptor, caller: Caller) -> flight.FlightInfo:
        duckdb = require("duckdb", "Flight SQL")
        topics = self._authorize(query, caller)
        try:
            con = self._connection(topics)
        except (ValueError, LookupError) as exc:  # e.g. a topic deleted since
            raise invalid(str(exc)) from None
        try:
            relation = con.sql(query)
            if relation is None:
                raise invalid(_NO_ROWS)
            reader = relation.to_arrow_reader()
        except duckdb.Error as exc:
            con.close()
            raise invalid(str(exc)) from None
        except BaseException:
            con.close()
            raise
        statement = _Statement(caller.owner, self.now() + STATEMENT_TTL_S, query, con, reader)
        handle = self._keep(statement)
        ticket = msg.pack(msg.new("TicketStatementQuery", statement_handle=handle))
        return flight.FlightInfo(reader.schema, descriptor, [flight.FlightEndpoint(ticket, [])], -1, -1)

    def _stream(self, statement: _Statement) -> Iterator[pa.RecordBatch]:
        duckdb = require("duckdb", "Flight SQL")
        try:
            assert statement.reader is not None
            yield from statement.reader
        except duckdb.Error as exc:
            raise invalid(str(exc)) from None
        finally:
            statement.close()
