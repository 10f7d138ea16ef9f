"""JSON Schema: validated by `jsonschema` (the draft the schema names, 2020-12 by default);
references resolved through a `referencing` registry keyed by the reference name.

Compatibility is structural: a reader accepts what a writer produces when every type, enum value
and property the writer allows is allowed by the reader, the reader requires nothing the writer
does not, and a closed reader (``additionalProperties: false``) names every property the writer
has. Constraints the check does not model (patterns, numeric bounds) are not compared.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import jsonschema
import referencing
import referencing.jsonschema

from pylog.schema_registry.errors import SchemaParseError
from pylog.schema_registry.formats.parsed import JSON, ParsedSchema


class JsonSchemaDoc:
    def __init__(self, schema: Any, registry: referencing.Registry) -> None:
        self.schema = schema
        self.registry = registry

    def validator(self) -> Any:
        cls = jsonschema.validators.validator_for(self.schema, default=jsonschema.Draft202012Validator)
        return cls(self.schema, registry=self.registry)


def parse(text: str, references: Sequence[tuple[str, str]] = ()) -> ParsedSchema:
    try:
        obj = json.loads(text)
        refs = [(name, json.loads(t)) for name, t in references]
    except ValueError as exc:
        raise SchemaParseError(f"Invalid JSON schema: not JSON ({exc})") from None
    if not isinstance(obj, (dict, bool)):
        raise SchemaParseError("Invalid JSON schema: a schema is an object or a boolean")
    try:
        cls = jsonschema.validators.validator_for(obj, default=jsonschema.Draft202012Validator)
        cls.check_schema(obj)
        spec = referencing.jsonschema.specification_with(
            cls.META_SCHEMA.get("$schema", "https://json-schema.org/draft/2020-12/schema")
        )
        registry = referencing.Registry().with_resources(
            (name, spec.create_resource(s)) for name, s in refs
        )
    except jsonschema.SchemaError as exc:
        raise SchemaParseError(f"Invalid JSON schema: {exc.message}") from None
    except Exception as exc:
        raise SchemaParseError(f"Invalid JSON schema: {exc}") from None
    return ParsedSchema(JSON, json.dumps(obj, separators=(",", ":")), JsonSchemaDoc(obj, registry))


def _types(s: Any) -> set[str] | None:
    t = s.get("type") if isinstance(s, dict) else None
    if t is None:
        return None
    types = {t} if isinstance(t, str) else set(t)
    if "number" in types:
        types.add("integer")
    return types


def incompatibilities(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    out: list[str] = []
    _check(reader.parsed.schema, writer.parsed.schema, "#", out)
    return out


def _check(r: Any, w: Any, path: str, out: list[str]) -> None:
    if r is True or r == {}:
        return
    if r is False:
        if w is not False:
            out.append(f"{path}: the reader accepts nothing")
        return
    if w is True or w is False or not isinstance(w, dict) or not isinstance(r, dict):
        if w is True:
            out.append(f"{path}: the writer accepts anything, the reader does not")
        return
    rt, wt = _types(r), _types(w)
    if rt is not None:
        if wt is None:
            out.append(f"{path}: the writer allows any type, the reader only {sorted(rt)}")
        elif not wt <= rt:
            out.append(f"{path}: type narrowed from {sorted(wt)} to {sorted(rt)}")
    if "enum" in r:
        missing = [v for v in w.get("enum", [None]) if v not in r["enum"]] if "enum" in w else ["(any)"]
        if missing:
            out.append(f"{path}: enum values {missing} removed")
    r_props, w_props = r.get("properties", {}), w.get("properties", {})
    for name in sorted(set(r.get("required", [])) - set(w.get("required", []))):
        out.append(f"{path}/properties/{name}: required by the reader, optional or absent in the writer")
    closed = r.get("additionalProperties") is False
    for name, ws in w_props.items():
        if name in r_props:
            _check(r_props[name], ws, f"{path}/properties/{name}", out)
        elif closed:
            out.append(f"{path}/properties/{name}: removed from a closed content model")
        elif isinstance(r.get("additionalProperties"), dict):
            _check(r["additionalProperties"], ws, f"{path}/properties/{name}", out)
    if closed and w.get("additionalProperties") is not False:
        out.append(f"{path}: additionalProperties closed by the reader")
    if isinstance(r.get("items"), dict) and isinstance(w.get("items"), dict):
        _check(r["items"], w["items"], f"{path}/items", out)
    for bound, narrower in (("maxLength", min), ("maxItems", min)):
        if bound in r and (bound not in w or narrower(r[bound], w[bound]) != w[bound]):
            out.append(f"{path}: {bound} reduced")
