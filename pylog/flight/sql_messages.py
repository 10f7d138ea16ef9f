"""The Flight SQL messages pylog reads and writes (``arrow.flight.protocol.sql`` of Arrow's
``format/FlightSql.proto``), declared here field by field and built with protobuf's descriptor API
when this module is imported: no generated code, no .proto file to compile.

Flight SQL carries each command as a ``google.protobuf.Any`` in a descriptor's command, a ticket or
an action body; `unpack` names the message by the Any's type URL.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

from pylog.flight.tickets import FLIGHT_SQL_TYPE_URL_PREFIX as TYPE_URL_PREFIX

PACKAGE = "arrow.flight.protocol.sql"
assert f"type.googleapis.com/{PACKAGE}." == TYPE_URL_PREFIX

_F = descriptor_pb2.FieldDescriptorProto
STRING, BYTES, BOOL, UINT32 = _F.TYPE_STRING, _F.TYPE_BYTES, _F.TYPE_BOOL, _F.TYPE_UINT32
REPEATED, OPTIONAL = "repeated", "optional"

# name -> [(field name, number, type, label)]; label None: a plain proto3 field. Field numbers as in
# FlightSql.proto.
MESSAGES: dict[str, list[tuple[str, int, int, str | None]]] = {
    "CommandGetSqlInfo": [("info", 1, UINT32, REPEATED)],
    "CommandGetCatalogs": [],
    "CommandGetDbSchemas": [("catalog", 1, STRING, OPTIONAL),
                            ("db_schema_filter_pattern", 2, STRING, OPTIONAL)],
    "CommandGetTables": [("catalog", 1, STRING, OPTIONAL), ("db_schema_filter_pattern", 2, STRING, OPTIONAL),
                         ("table_name_filter_pattern", 3, STRING, OPTIONAL),
                         ("table_types", 4, STRING, REPEATED),
                         ("include_schema", 5, BOOL, None)],
    "CommandGetTableTypes": [],
    "CommandGetPrimaryKeys": [("catalog", 1, STRING, OPTIONAL), ("db_schema", 2, STRING, OPTIONAL),
                              ("table", 3, STRING, None)],
    "CommandStatementQuery": [("query", 1, STRING, None), ("transaction_id", 2, BYTES, OPTIONAL)],
    "TicketStatementQuery": [("statement_handle", 1, BYTES, None)],
    "CommandPreparedStatementQuery": [("prepared_statement_handle", 1, BYTES, None)],
    "ActionCreatePreparedStatementRequest": [("query", 1, STRING, None),
                                             ("transaction_id", 2, BYTES, OPTIONAL)],
    "ActionCreatePreparedStatementResult": [("prepared_statement_handle", 1, BYTES, None),
                                            ("dataset_schema", 2, BYTES, None),
                                            ("parameter_schema", 3, BYTES, None)],
    "ActionClosePreparedStatementRequest": [("prepared_statement_handle", 1, BYTES, None)],
}


def _file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(name="pylog/flight/FlightSql.proto", package=PACKAGE,
                                               syntax="proto3")
    for name, fields in MESSAGES.items():
        message = proto.message_type.add(name=name)
        for field_name, number, type_, label in fields:
            field = message.field.add(name=field_name, number=number, type=type_,
                                      label=_F.LABEL_REPEATED if label == REPEATED else _F.LABEL_OPTIONAL)
            if label == OPTIONAL:  # proto3 `optional`: presence through a synthetic oneof
                field.proto3_optional = True
                field.oneof_index = len(message.oneof_decl)
                message.oneof_decl.add(name=f"_{field_name}")
    return proto


_POOL = descriptor_pool.DescriptorPool()  # its own pool: never clashes with another copy of these
_FILE = _POOL.Add(_file())
_CLASSES: dict[str, type[Message]] = {
    name: message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.{name}"))
    for name in MESSAGES}


class BadMessage(ValueError):
    """Bytes that are not a Flight SQL message pylog knows."""


def new(name: str, **fields: Any) -> Any:
    """A message of `MESSAGES` by name."""
    return _CLASSES[name](**fields)


def pack(message: Message) -> bytes:
    """The message as a serialized ``google.protobuf.Any``."""
    wrapped = any_pb2.Any()
    wrapped.Pack(message)
    return wrapped.SerializeToString()


def unpack(raw: bytes) -> tuple[str, Any]:
    """(message name, message) of an Any-wrapped Flight SQL message; the message is None when the
    name is not one pylog reads. Raises BadMessage for bytes that are not such an Any."""
    try:
        wrapped = any_pb2.Any.FromString(raw)
    except DecodeError as exc:
        raise BadMessage(f"not a protobuf Any: {exc}") from None
    if not wrapped.type_url.startswith(TYPE_URL_PREFIX):
        raise BadMessage(f"not a Flight SQL command (type {wrapped.type_url!r})")
    name = wrapped.type_url[len(TYPE_URL_PREFIX):]
    cls = _CLASSES.get(name)
    if cls is None:
        return name, None
    try:
        return name, cls.FromString(wrapped.value)
    except DecodeError as exc:
        raise BadMessage(f"malformed {name}: {exc}") from None
