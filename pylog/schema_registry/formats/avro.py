"""Avro schemas: parsed and validated by fastavro; compatibility by Avro's schema resolution rules.

`incompatibilities(reader, writer)` walks both schemas the way a decoder resolves them (the Avro
specification's "Schema Resolution"): promotions int -> long -> float -> double and string <->
bytes, record fields matched by name or alias (a reader field the writer lacks needs a default),
enum symbols, unions branch by branch. Recursive types are followed once per (reader, writer) pair.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

from pylog.schema_registry.errors import SchemaParseError
from pylog.schema_registry.formats.parsed import AVRO, ParsedSchema

PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
PROMOTIONS = {
    "int": {"int", "long", "float", "double"},
    "long": {"long", "float", "double"},
    "float": {"float", "double"},
    "double": {"double"},
    "string": {"string", "bytes"},
    "bytes": {"bytes", "string"},
}


class AvroSchema:
    """A parsed schema with the named types it can refer to (its own and its references')."""

    def __init__(self, schema: Any, named: dict[str, Any]) -> None:
        self.schema = schema
        self.named = named


def parse(text: str, references: Sequence[tuple[str, str]] = ()) -> ParsedSchema:
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise SchemaParseError(f"Invalid schema: not JSON ({exc})") from None
    _require(obj)
    named: dict[str, Any] = {}
    try:
        for name, ref_text in references:
            fastavro.parse_schema(json.loads(ref_text), named_schemas=named)
            if name not in named:
                raise SchemaParseError(f"reference {name!r} does not define the type {name}")
        parsed = fastavro.parse_schema(obj, named_schemas=named)
    except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise SchemaParseError(f"Invalid Avro schema: {exc}") from None
    return ParsedSchema(AVRO, json.dumps(obj, separators=(",", ":")), AvroSchema(parsed, named))


# keyed by a schema object's "type", which may be any JSON value
_REQUIRED: dict[object, tuple[str, ...]] = {
    "record": ("name", "fields"),
    "error": ("name", "fields"),
    "enum": ("name", "symbols"),
    "fixed": ("name", "size"),
    "array": ("items",),
    "map": ("values",),
}


def _require(s: Any) -> None:
    """The attributes the specification requires (fastavro is lenient about some)."""
    if isinstance(s, list):
        for branch in s:
            _require(branch)
    elif isinstance(s, dict):
        kind = s.get("type")
        if isinstance(kind, (dict, list)):
            _require(kind)
            return
        for attr in _REQUIRED.get(kind, ()):
            if attr not in s:
                raise SchemaParseError(f"Invalid Avro schema: a {kind} needs {attr!r}: {json.dumps(s)[:200]}")
        if kind in ("record", "error"):
            if not isinstance(s["fields"], list):
                raise SchemaParseError(f"Invalid Avro schema: fields of {s['name']} must be a list")
            for f in s["fields"]:
                if not isinstance(f, dict) or "name" not in f or "type" not in f:
                    raise SchemaParseError(f"Invalid Avro schema: a field of {s['name']} needs name and type")
                _require(f["type"])
        elif kind == "array":
            _require(s["items"])
        elif kind == "map":
            _require(s["values"])


def incompatibilities(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    out: list[str] = []
    r, w = reader.parsed, writer.parsed
    _Resolver(r.named, w.named, out).check(r.schema, w.schema, "/")
    return out


def _type_of(s: Any) -> str:
    if isinstance(s, list):
        return "union"
    if isinstance(s, dict):
        t = s["type"]
        return (
            t
            if isinstance(t, str) and t in ("record", "error", "enum", "array", "map", "fixed")
            else _type_of(t)
        )
    return s


class _Resolver:
    def __init__(self, reader_named: dict[str, Any], writer_named: dict[str, Any], out: list[str]) -> None:
        self.rn, self.wn, self.out = reader_named, writer_named, out
        self.seen: set[tuple[int, int]] = set()

    def _deref(self, s: Any, named: dict[str, Any]) -> Any:
        while isinstance(s, str) and s not in PRIMITIVES:
            s = named[s]
        if isinstance(s, dict) and not isinstance(s["type"], str):
            return self._deref(s["type"], named)
        if isinstance(s, dict) and s["type"] in PRIMITIVES:
            return s["type"]
        return s

    def readable(self, r: Any, w: Any) -> bool:
        mark = len(self.out)
        self.check(r, w, "/")
        ok = len(self.out) == mark
        del self.out[mark:]
        return ok

    def check(self, r: Any, w: Any, path: str) -> None:
        r, w = self._deref(r, self.rn), self._deref(w, self.wn)
        key = (id(r), id(w))
        if key in self.seen:
            return
        if isinstance(r, dict) or isinstance(w, dict):
            self.seen.add(key)
        rt, wt = _type_of(r), _type_of(w)
        if wt == "union":
            for i, branch in enumerate(w):
                if rt == "union":
                    if not any(self.readable(rb, branch) for rb in r):
                        self.out.append(
                            f"{path}: the reader's union has no branch for the writer's "
                            f"{_describe(branch)} (writer union branch {i})"
                        )
                else:
                    self.check(r, branch, path)
            return
        if rt == "union":
            if not any(self.readable(rb, w) for rb in r):
                self.out.append(f"{path}: the reader's union has no branch for the writer's {_describe(w)}")
            return
        if wt in PROMOTIONS or wt in ("null", "boolean"):
            if rt != wt and rt not in PROMOTIONS.get(wt, ()):
                self.out.append(f"{path}: the writer's {wt} cannot be read as {rt}")
            return
        if rt != wt:
            self.out.append(f"{path}: the writer's {wt} cannot be read as {rt}")
            return
        if rt in ("record", "error", "enum", "fixed") and not _names_match(r, w):
            self.out.append(f"{path}: the writer's type {w['name']} cannot be read as {r['name']}")
            return
        if rt in ("record", "error"):
            self._record(r, w, path)
        elif rt == "enum":
            missing = [s for s in w["symbols"] if s not in r["symbols"]]
            if missing and "default" not in r:
                self.out.append(
                    f"{path}: the reader's enum {r['name']} lacks the symbols {missing} and has no default"
                )
        elif rt == "fixed":
            if r["size"] != w["size"]:
                self.out.append(
                    f"{path}: fixed {r['name']} has size {w['size']} in the writer, {r['size']} in the reader"
                )
        elif rt == "array":
            self.check(r["items"], w["items"], f"{path}items/")
        elif rt == "map":
            self.check(r["values"], w["values"], f"{path}values/")

    def _record(self, r: dict, w: dict, path: str) -> None:
        written = {}
        for f in w["fields"]:
            written[f["name"]] = f
        for f in r["fields"]:
            names = [f["name"], *f.get("aliases", [])]
            wf = next((written[n] for n in names if n in written), None)
            if wf is None:
                if "default" not in f:
                    self.out.append(
                        f"{path}{f['name']}: the reader's field {f['name']!r} is missing "
                        "from the writer's schema and has no default"
                    )
                continue
            self.check(f["type"], wf["type"], f"{path}{f['name']}/")


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _names_match(r: dict, w: dict) -> bool:
    if r["name"] == w["name"] or _short(r["name"]) == _short(w["name"]):
        return True
    return any(a == w["name"] or _short(a) == _short(w["name"]) for a in r.get("aliases", []))


def _describe(s: Any) -> str:
    t = _type_of(s)
    return f"{t} {s['name']}" if isinstance(s, dict) and "name" in s else t
