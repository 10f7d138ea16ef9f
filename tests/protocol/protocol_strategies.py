"""Hypothesis strategies derived from the message descriptions themselves.

`message_strategy(spec, version)` walks the schema the codec compiles from and draws an object of
the generated class with every field that exists in `version` set: nulls where the version allows
them, tagged fields sometimes left at their default, arrays of 0-3 elements.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from pylog.protocol.schema import FieldSpec, MessageSpec, StructSpec

_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
}

_TEXT = st.text(max_size=12)
_BYTES = st.binary(max_size=24)


def _primitive(t: str) -> st.SearchStrategy[Any]:
    if t in _INTS:
        lo, hi = _INTS[t]
        return st.one_of(st.sampled_from([lo, hi, 0, -1 if lo < 0 else 1]), st.integers(lo, hi))
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "bool":
        return st.booleans()
    if t == "string":
        return _TEXT
    if t in ("bytes", "records"):
        return _BYTES
    if t == "uuid":
        return st.uuids()
    raise AssertionError(t)


def _value(
    f: FieldSpec, version: int, flexible: bool, elem: bool = False, response: bool = False
) -> st.SearchStrategy[Any]:
    """Values of `f`; a response's records are never null (the codec writes an empty set)."""
    t = f.element if elem else f.type
    if t == "array":
        inner = _value(f, version, flexible, elem=True, response=response)
        base: st.SearchStrategy[Any] = st.lists(inner, max_size=3)
    elif t == "struct":
        assert f.struct is not None
        base = struct_strategy(f.struct, version, flexible, response)
    else:
        assert t is not None
        base = _primitive(t)
    if not elem and f.is_nullable(version) and not (response and t == "records"):
        base = st.one_of(st.none(), base)
    return base


def struct_strategy(
    spec: StructSpec, version: int, flexible: bool, response: bool = False
) -> st.SearchStrategy[Any]:
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in spec.fields:
        if not f.present(version):
            continue
        s = _value(f, version, flexible, response=response)
        if flexible and f.is_tagged(version):
            s = st.one_of(st.just(f.make_default()), s)
        fields[f.name] = s
    return st.deferred(lambda: st.fixed_dictionaries(fields).map(lambda kw: spec.cls(**kw)))


def message_strategy(msg: MessageSpec, version: int) -> st.SearchStrategy[Any]:
    return struct_strategy(msg.root, version, msg.is_flexible(version), msg.kind == "response")
