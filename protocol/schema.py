"""Apache Kafka's JSON message definitions, loaded as data.

The definitions ship inside the kafka-python wheel (`kafka/protocol/schemas/resources/*.json`,
with `//` comments). They are parsed once at import into `MessageSpec` / `StructSpec` /
`FieldSpec`, and each struct gets a small generated class (`__slots__`, keyword or positional
construction, repr, equality) holding the union of its fields over all versions, so handlers see
the same object shape whatever version the client spoke. `codec.py` compiles the wire code.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_PACKAGE = "kafka.protocol.schemas.resources"
KAFKA_PYTHON_PIN = ">=3.0.12,<3.1"

FIXED_FORMATS = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint16": "H",
    "float64": "d",
    "bool": "?",
    "uuid": "16s",
}
"""struct format of each fixed-width primitive (uuid decodes further to uuid.UUID)."""

PRIMITIVES = frozenset(FIXED_FORMATS) | {"string", "bytes", "records"}

ZERO_UUID = uuid.UUID(int=0)
MAX_VERSION = 0x7FFF

_COMMENT = re.compile(r"^\s*//.*$", re.MULTILINE)
_SNAKE = re.compile(r"(?<!^)(?=[A-Z])")


def snake_case(name: str) -> str:
    """`TopicData` -> `topic_data`, `ResultsByTopicV3AndBelow` -> `results_by_topic_v3_and_below`."""
    return _SNAKE.sub("_", name).lower()


def parse_versions(text: str | None) -> tuple[int, int] | None:
    """Kafka's version range syntax: "3", "1-5", "4+", "none" (None means empty)."""
    if text is None:
        return None
    text = text.strip()
    if not text or text == "none":
        return None
    if text.endswith("+"):
        return int(text[:-1]), MAX_VERSION
    if "-" in text:
        lo, hi = text.split("-", 1)
        return int(lo), int(hi)
    return int(text), int(text)


def in_range(version: int, rng: tuple[int, int] | None) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


class Message:
    """Base of the generated message / struct classes."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _spec: StructSpec

    def __repr__(self) -> str:
        parts = []
        for name in self._fields:
            value = getattr(self, name)
            if isinstance(value, memoryview):
                text = f"<{value.nbytes} bytes>"
            elif isinstance(value, (bytes, bytearray)) and len(value) > 64:
                text = f"<{len(value)} bytes>"
            else:
                text = repr(value)
            parts.append(f"{name}={text}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        for n in self._fields:
            a, b = getattr(self, n), getattr(other, n)
            if a is not b and not _same(a, b):
                return False
        return True

    __hash__ = None  # type: ignore[assignment]

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dicts and lists (records / bytes stay bytes-like)."""
        return {n: _plain(getattr(self, n)) for n in self._fields}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, memoryview) or isinstance(b, memoryview):
        if a is None or b is None:
            return a is b
        return bytes(a) == bytes(b)
    return a == b


def _plain(value: Any) -> Any:
    if isinstance(value, Message):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@dataclass(eq=False)
class FieldSpec:
    """One field of a struct, as described by the JSON."""

    name: str  # snake_case
    json_name: str
    type: str  # a primitive name, "struct" or "array"
    versions: tuple[int, int] | None
    nullable: tuple[int, int] | None = None
    tagged: tuple[int, int] | None = None
    tag: int | None = None
    flexible_override: tuple[int, int] | None = None  # field-level "flexibleVersions"
    flexible_override_set: bool = False
    element: str | None = None  # array element: a primitive name or "struct"
    struct: StructSpec | None = None  # struct type of a struct field or of array elements
    default: Any = None  # immutable default value, or a marker for mutable ones
    default_kind: str = "value"  # "value", "list", "struct"

    def present(self, version: int) -> bool:
        return in_range(version, self.versions)

    def is_nullable(self, version: int) -> bool:
        return in_range(version, self.nullable)

    def is_tagged(self, version: int) -> bool:
        return in_range(version, self.tagged)

    def compact(self, version: int, flexible: bool) -> bool:
        if self.flexible_override_set:
            return in_range(version, self.flexible_override)
        return flexible

    def make_default(self) -> Any:
        if self.default_kind == "list":
            return []
        if self.default_kind == "struct":
            assert self.struct is not None
            return self.struct.cls()
        return self.default


@dataclass(eq=False)
class StructSpec:
    name: str
    fields: list[FieldSpec] = field(default_factory=list)
    cls: type[Message] = Message


@dataclass(eq=False)
class MessageSpec:
    """A request, response, header or data message."""

    name: str
    kind: str  # "request", "response", "header", "data"
    api_key: int | None
    valid_versions: tuple[int, int] | None
    flexible_versions: tuple[int, int] | None
    root: StructSpec
    structs: dict[str, StructSpec]

    def is_flexible(self, version: int) -> bool:
        return in_range(version, self.flexible_versions)

    @property
    def first_flexible(self) -> int | None:
        return self.flexible_versions[0] if self.flexible_versions else None


def _default_for(fd: dict[str, Any], spec: FieldSpec) -> None:
    raw = fd.get("default")
    if isinstance(raw, (bool, int, float)):
        raw = str(raw).lower()
    t = spec.type
    if raw == "null":
        spec.default, spec.default_kind = None, "value"
        return
    if t == "array":
        spec.default_kind = "list"
    elif t == "struct":
        spec.default_kind = "struct"
    elif t in ("int8", "int16", "int32", "int64", "uint16"):
        spec.default = int(raw, 0) if raw not in (None, "") else 0
    elif t == "float64":
        spec.default = float(raw) if raw not in (None, "") else 0.0
    elif t == "bool":
        spec.default = str(raw).lower() == "true" if raw is not None else False
    elif t == "string":
        spec.default = raw if raw is not None else ""
    elif t == "bytes":
        spec.default = b""
    elif t == "records":
        spec.default = None
    elif t == "uuid":
        spec.default = ZERO_UUID


FILLED_BY_BROKERS: dict[str, frozenset[str]] = {
    # KRaftMetadataCache sets both from the partition's ELR (empty lists when it has none); Kafka's
    # Admin client reads them without a null check (partitionToTopicPartitionInfo)
    "DescribeTopicPartitionsResponse": frozenset({"EligibleLeaderReplicas", "LastKnownElr"}),
}
"""Fields whose JSON default is null but which Kafka's brokers always fill, by message: their
generated default here is the empty value instead, so an answer that leaves them unset is sent
as Kafka's brokers send it. Every other field defaults as Kafka's generated classes default it
(``_default_for``)."""


def kafka_sends_null_by_default(spec: FieldSpec) -> bool:
    """An unset nullable array or struct field goes out null (its default is null)."""
    return spec.type in ("array", "struct") and spec.default_kind == "value" and spec.default is None


def _collect_struct_defs(fields: list[dict[str, Any]], out: dict[str, list[dict[str, Any]]]) -> None:
    for fd in fields:
        if "fields" in fd:
            out.setdefault(fd["type"].removeprefix("[]"), fd["fields"])
            _collect_struct_defs(fd["fields"], out)


def _build_struct(
    name: str,
    fields: list[dict[str, Any]],
    defs: dict[str, list[dict[str, Any]]],
    structs: dict[str, StructSpec],
    filled: frozenset[str] = frozenset(),
) -> StructSpec:
    if name in structs:
        return structs[name]
    spec = StructSpec(name)
    structs[name] = spec
    seen: set[str] = set()
    for fd in fields:
        t = fd["type"]
        fs = FieldSpec(
            name=snake_case(fd["name"]),
            json_name=fd["name"],
            type="",
            versions=parse_versions(fd.get("versions")),
            nullable=parse_versions(fd.get("nullableVersions")),
            tagged=parse_versions(fd.get("taggedVersions")),
            tag=fd.get("tag"),
        )
        if "flexibleVersions" in fd:
            fs.flexible_override_set = True
            fs.flexible_override = parse_versions(fd["flexibleVersions"])
        if fs.name in seen:
            raise ValueError(f"duplicate field {fs.name} in {name}")
        seen.add(fs.name)
        if t.startswith("[]"):
            fs.type = "array"
            inner = t[2:]
            if inner in PRIMITIVES:
                fs.element = inner
            else:
                fs.element = "struct"
                fs.struct = _build_struct(inner, fd.get("fields") or defs[inner], defs, structs, filled)
        elif t in PRIMITIVES:
            fs.type = t
        else:
            fs.type = "struct"
            fs.struct = _build_struct(t, fd.get("fields") or defs[t], defs, structs, filled)
        _default_for(fd if fd["name"] not in filled else {**fd, "default": ""}, fs)
        spec.fields.append(fs)
    return spec


def _make_class(spec: StructSpec, qualname: str) -> type[Message]:
    """A slotted class with a generated positional-or-keyword __init__ (defaults from the schema)."""
    names = [f.name for f in spec.fields]
    ns: dict[str, Any] = {"_MISSING": _MISSING}
    params, body = [], []
    for i, f in enumerate(spec.fields):
        if f.default_kind == "value":
            ns[f"_d{i}"] = f.default
            params.append(f"{f.name}=_d{i}")
            body.append(f"    self.{f.name} = {f.name}")
        else:
            ns[f"_f{i}"] = f
            params.append(f"{f.name}=_MISSING")
            body.append(f"    self.{f.name} = _f{i}.make_default() if {f.name} is _MISSING else {f.name}")
    src = f"def __init__(self, {', '.join(params)}):\n"
    src += "\n".join(body) if body else "    pass"
    exec(compile(src, f"<pylog.protocol {qualname}.__init__>", "exec"), ns)
    cls = type(
        spec.name,
        (Message,),
        {"__slots__": tuple(names), "_fields": tuple(names), "_spec": spec, "__init__": ns["__init__"]},
    )
    cls.__qualname__ = qualname
    cls.__module__ = "pylog.protocol.messages"
    return cls


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def _strip_comments(text: str) -> str:
    return _COMMENT.sub("", text)


def schema_dir() -> Path:
    """Where the installed kafka-python keeps Kafka's JSON definitions.

    Located through the import system without importing kafka-python itself (that would pull
    in its whole client, ~150 modules, for a directory of data files).
    """
    spec = importlib.util.find_spec("kafka")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"pylog.protocol needs kafka-python{KAFKA_PYTHON_PIN} for Kafka's message definitions"
        )
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*SCHEMA_PACKAGE.split(".")[1:])
    if not path.is_dir():
        raise ImportError(f"no Kafka message definitions in {path}; install kafka-python{KAFKA_PYTHON_PIN}")
    try:
        version = importlib.metadata.version("kafka-python")
    except importlib.metadata.PackageNotFoundError:
        version = None
    if version is not None and not version.startswith("3.0."):
        warnings.warn(f"kafka-python {version} is outside the pinned range {KAFKA_PYTHON_PIN}", stacklevel=2)
    return path


def parse_message(data: dict[str, Any]) -> MessageSpec:
    defs: dict[str, list[dict[str, Any]]] = {}
    for cs in data.get("commonStructs", []):
        defs[cs["name"]] = cs["fields"]
    _collect_struct_defs(data.get("fields", []), defs)
    structs: dict[str, StructSpec] = {}
    name = data["name"]
    filled = FILLED_BY_BROKERS.get(name, frozenset())
    root = _build_struct(name, data.get("fields", []), defs, structs, filled)
    msg = MessageSpec(
        name=name,
        kind=data["type"],
        api_key=data.get("apiKey"),
        valid_versions=parse_versions(data.get("validVersions")),
        flexible_versions=parse_versions(data.get("flexibleVersions")),
        root=root,
        structs=structs,
    )
    root.cls = _make_class(root, name)
    for sname, st in structs.items():
        if st is not root:
            st.cls = _make_class(st, f"{name}.{sname}")
            setattr(root.cls, sname, st.cls)
    for st in structs.values():  # also reachable from the parent: Request.Topic.Partition
        for f in st.fields:
            if f.struct is not None and st is not root:
                setattr(st.cls, f.struct.name, f.struct.cls)
    return msg


NODE_MESSAGES_DIR = Path(__file__).parent / "messages"
"""Definitions of the messages only pylog nodes exchange (see messages/README.md)."""


def load_all() -> dict[str, MessageSpec]:
    """Every definition shipped in kafka-python, then pylog's inter-node ones, by message name."""
    out: dict[str, MessageSpec] = {}
    for path in [*sorted(schema_dir().glob("*.json")), *sorted(NODE_MESSAGES_DIR.glob("*.json"))]:
        spec = parse_message(json.loads(_strip_comments(path.read_text("utf-8"))))
        out[spec.name] = spec
    return out
