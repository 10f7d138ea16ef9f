"""Compile a (message, version) description into Python decode / encode functions.

For each struct reachable from the message, the generator writes straight-line Python source
specialised to one version: consecutive fixed-width fields become one `Struct.unpack_from` /
`pack`, lengths are checked against the bytes left before anything is sliced or allocated, array
counts are bounded by the remaining bytes divided by the smallest element, tagged fields are
decoded by tag and unknown tags skipped. The source is compiled once per (message, version) and
cached, so a request costs only the generated code.

Decoders: `decode(buf: memoryview, pos: int, end: int) -> (obj, pos)`.
Encoders: `encode(obj) -> list[bytes-like]` (parts to join or write out; `records` are passed
through without copying).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from .errors import MalformedMessage
from .framing import read_uvarint, skip_tagged_fields, write_uvarint
from .schema import FIXED_FORMATS, ZERO_UUID, FieldSpec, Message, MessageSpec, StructSpec

Decoder = Callable[[memoryview, int, int], tuple[Any, int]]
Encoder = Callable[[Any], list[Any]]

_ZERO16 = bytes(16)
_UV1 = [bytes((i,)) for i in range(128)]


def _uvarint_rest(buf: memoryview, pos: int, first: int, end: int) -> tuple[int, int]:
    """Finish an unsigned varint whose first byte (>= 0x80) was already read."""
    return read_uvarint(buf, pos - 1, end)


def _uuid_from(raw: bytes) -> uuid.UUID:
    return ZERO_UUID if raw == _ZERO16 else uuid.UUID(bytes=raw)


def _uuid_bytes(value: Any) -> bytes:
    if value is None:
        return _ZERO16
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, str):
        return uuid.UUID(value).bytes
    raw = bytes(value)
    if len(raw) != 16:
        raise ValueError(f"a uuid needs 16 bytes, got {len(raw)}")
    return raw


def _blen(value: Any) -> int:
    return value.nbytes if value.__class__ is memoryview else len(value)


def _coerce(cls: type[Message], value: Any) -> Message:
    """Turn a dict (or another object with the same attribute names) into `cls`."""
    if isinstance(value, dict):
        try:
            return cls(**value)
        except TypeError as exc:
            raise ValueError(f"{cls.__qualname__}: {exc}") from None
    if value is None:
        raise ValueError(f"{cls.__qualname__}: None where a struct is required")
    return cls(**{n: getattr(value, n) for n in cls._fields if hasattr(value, n)})


def _write_tags(tags: list[tuple[int, list[Any]]], w: Callable[[Any], None]) -> None:
    w(write_uvarint(len(tags)))
    for tag, parts in tags:
        w(write_uvarint(tag))
        w(write_uvarint(sum(map(_blen, parts))))
        for p in parts:
            w(p)


def _null_error(where: str) -> ValueError:
    return ValueError(f"{where} is not nullable in this version")


_BASE_NS: dict[str, Any] = {
    "_M": MalformedMessage,
    "_uvr": _uvarint_rest,
    "_uvw": write_uvarint,
    "_UV1": _UV1,
    "_uuid": _uuid_from,
    "_uuidb": _uuid_bytes,
    "_Z16": _ZERO16,
    "_blen": _blen,
    "_coerce": _coerce,
    "_tags": _write_tags,
    "_nullerr": _null_error,
    "_skip_tags": skip_tagged_fields,
    "_unpack_from": struct.unpack_from,
    "_pack": struct.pack,
    "_str": str,
    "_bytes": bytes,
    "_list": list,
    "_range": range,
    "_P_h": struct.Struct(">h").pack,
    "_P_i": struct.Struct(">i").pack,
    "_U_h": struct.Struct(">h").unpack_from,
    "_U_i": struct.Struct(">i").unpack_from,
}


def _min_size(f: FieldSpec, version: int, flexible: bool, elem: bool = False) -> int:
    """Smallest number of bytes one value of this field (or one array element) can take."""
    t = f.element if elem else f.type
    compact = f.compact(version, flexible)
    if t in FIXED_FORMATS:
        return struct.calcsize(">" + FIXED_FORMATS[t])
    if t == "string":
        return 1 if compact else 2
    if t in ("bytes", "records"):
        return 1 if compact else 4
    if t == "array":
        return 1 if compact else 4
    assert f.struct is not None
    if not elem and f.is_nullable(version):
        return 1
    return _struct_min_size(f.struct, version, flexible)


def _struct_min_size(st: StructSpec, version: int, flexible: bool) -> int:
    total = 1 if flexible else 0
    for f in st.fields:
        if f.present(version) and not (flexible and f.is_tagged(version)):
            total += _min_size(f, version, flexible)
    return total


class _Generator:
    """Writes the source for one (message, version) and compiles it."""

    def __init__(self, msg: MessageSpec, version: int) -> None:
        self.msg = msg
        self.version = version
        self.flexible = msg.is_flexible(version)
        self.ns: dict[str, Any] = dict(_BASE_NS)
        self.src: list[str] = []
        self.done: set[str] = set()
        self.n = 0
        self.end = "end"  # name of the end-of-input variable in the code being written

    def tmp(self, prefix: str = "t") -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def const(self, value: Any, prefix: str = "_k") -> str:
        name = self.tmp(prefix)
        self.ns[name] = value
        return name

    def default_expr(self, f: FieldSpec) -> str:
        if f.default_kind == "list":
            return "[]"
        if f.default_kind == "struct":
            assert f.struct is not None
            return f"{self.cls_name(f.struct)}()"
        v = f.default
        if v is None or isinstance(v, (bool, int, float, str, bytes)):
            return repr(v)
        return self.const(v)

    def cls_name(self, st: StructSpec) -> str:
        name = f"C_{st.name}"
        self.ns[name] = st.cls
        return name

    def build(self) -> tuple[Decoder, Encoder]:
        self.gen_struct(self.msg.root)
        root = self.msg.root.name
        self.src.append(f"def encode(o):\n    parts = []\n    e_{root}(o, parts.append)\n    return parts\n")
        code = "\n".join(self.src)
        filename = f"<pylog.protocol {self.msg.name} v{self.version}>"
        exec(compile(code, filename, "exec"), self.ns)
        self.ns["__source__"] = code
        return self.ns[f"d_{root}"], self.ns["encode"]

    # ---------------------------------------------------------------- structs

    def gen_struct(self, st: StructSpec) -> None:
        if st.name in self.done:
            return
        self.done.add(st.name)
        v, flex = self.version, self.flexible
        present = [f for f in st.fields if f.present(v)]
        regular = [f for f in present if not (flex and f.is_tagged(v))]
        tagged = sorted((f for f in present if flex and f.is_tagged(v)), key=lambda f: f.tag or 0)
        for f in present:
            if f.struct is not None:
                self.gen_struct(f.struct)
        self.src.append(self.gen_decoder(st, regular, tagged))
        self.src.append(self.gen_encoder(st, regular, tagged))

    def where(self, st: StructSpec, f: FieldSpec) -> str:
        return f"{self.msg.name} v{self.version} {st.name}.{f.json_name}"

    def gen_decoder(self, st: StructSpec, regular: list[FieldSpec], tagged: list[FieldSpec]) -> str:
        L = [f"def d_{st.name}(buf, pos, end):"]
        i = 0
        while i < len(regular):
            f = regular[i]
            if f.type in FIXED_FORMATS:
                j = i
                while j < len(regular) and regular[j].type in FIXED_FORMATS:
                    j += 1
                self.dec_fixed(L, "    ", regular[i:j], st)
                i = j
            else:
                self.dec_field(L, "    ", f"v_{f.name}", f, st)
                i += 1
        if self.flexible:
            for f in tagged:
                L.append(f"    v_{f.name} = {self.default_expr(f)}")
            self.dec_tags(L, st, tagged)
        args = []
        for f in st.fields:
            if f.present(self.version):
                args.append(f"v_{f.name}")
            else:
                args.append(self.default_expr(f))
        L.append(f"    return {self.cls_name(st)}({', '.join(args)}), pos")
        return "\n".join(L) + "\n"

    def dec_fixed(self, L: list[str], ind: str, group: list[FieldSpec], st: StructSpec) -> None:
        fmt = ">" + "".join(FIXED_FORMATS[f.type] for f in group)
        size = struct.calcsize(fmt)
        unpack = self.const(struct.Struct(fmt).unpack_from, "_U")
        names = ", ".join(f"v_{f.name}" for f in group)
        L.append(f"{ind}if end - pos < {size}: raise _M({self.where(st, group[0])!r} + ': truncated')")
        L.append(f"{ind}{names}, = {unpack}(buf, pos)")
        L.append(f"{ind}pos += {size}")
        for f in group:
            if f.type == "uuid":
                L.append(f"{ind}v_{f.name} = _uuid(v_{f.name})")

    def dec_uvarint(self, L: list[str], ind: str, var: str, where: str) -> None:
        E = self.end
        L.append(f"{ind}if pos >= {E}: raise _M({where!r} + ': truncated')")
        L.append(f"{ind}{var} = buf[pos]")
        L.append(f"{ind}pos += 1")
        L.append(f"{ind}if {var} > 127: {var}, pos = _uvr(buf, pos, {var}, {E})")

    def dec_length(self, L: list[str], ind: str, var: str, f: FieldSpec, kind: str, where: str) -> None:
        """Read a length / count prefix into `var` (-1 or below means null)."""
        E = self.end
        if f.compact(self.version, self.flexible):
            self.dec_uvarint(L, ind, var, where)
            L.append(f"{ind}{var} -= 1")
        else:
            size, reader = (2, "_U_h") if kind == "string" else (4, "_U_i")
            L.append(f"{ind}if {E} - pos < {size}: raise _M({where!r} + ': truncated')")
            L.append(f"{ind}{var} = {reader}(buf, pos)[0]")
            L.append(f"{ind}pos += {size}")

    def dec_null(self, L: list[str], ind: str, var: str, f: FieldSpec, where: str, elem: bool) -> None:
        if not elem and f.is_nullable(self.version):
            L.append(f"{ind}{var} = None")
        else:
            L.append(f"{ind}raise _M({where!r} + ': null in a non-nullable field')")

    def dec_field(
        self, L: list[str], ind: str, var: str, f: FieldSpec, st: StructSpec, elem: bool = False
    ) -> None:
        """Decode one value of `f` (or one element of array `f`) into `var`."""
        E = self.end
        where = self.where(st, f)
        t = f.element if elem else f.type
        if t in FIXED_FORMATS:
            fmt = ">" + FIXED_FORMATS[t]
            size = struct.calcsize(fmt)
            unpack = self.const(struct.Struct(fmt).unpack_from, "_U")
            L.append(f"{ind}if {E} - pos < {size}: raise _M({where!r} + ': truncated')")
            L.append(f"{ind}{var} = {unpack}(buf, pos)[0]")
            L.append(f"{ind}pos += {size}")
            if t == "uuid":
                L.append(f"{ind}{var} = _uuid({var})")
        elif t in ("string", "bytes", "records"):
            n = self.tmp("n")
            self.dec_length(L, ind, n, f, t, where)
            L.append(f"{ind}if {n} < 0:")
            self.dec_null(L, ind + "    ", var, f, where, elem)
            L.append(f"{ind}else:")
            L.append(f"{ind}    if {n} > {E} - pos: raise _M({where!r} + ': length exceeds the frame')")
            if t == "string":
                L.append(f"{ind}    {var} = _str(buf[pos:pos + {n}], 'utf-8')")
            elif t == "bytes":
                L.append(f"{ind}    {var} = _bytes(buf[pos:pos + {n}])")
            else:
                L.append(f"{ind}    {var} = buf[pos:pos + {n}]")
            L.append(f"{ind}    pos += {n}")
        elif t == "array":
            self.dec_array(L, ind, var, f, st, where)
        else:
            assert f.struct is not None
            dec = f"d_{f.struct.name}"
            if not elem and f.is_nullable(self.version):
                L.append(f"{ind}if pos >= {E}: raise _M({where!r} + ': truncated')")
                L.append(f"{ind}if buf[pos] > 127:")
                L.append(f"{ind}    {var} = None")
                L.append(f"{ind}    pos += 1")
                L.append(f"{ind}else:")
                L.append(f"{ind}    {var}, pos = {dec}(buf, pos + 1, {E})")
            else:
                L.append(f"{ind}{var}, pos = {dec}(buf, pos, {E})")

    def dec_array(self, L: list[str], ind: str, var: str, f: FieldSpec, st: StructSpec, where: str) -> None:
        E = self.end
        n = self.tmp("n")
        self.dec_length(L, ind, n, f, "array", where)
        L.append(f"{ind}if {n} < 0:")
        self.dec_null(L, ind + "    ", var, f, where, False)
        L.append(f"{ind}else:")
        ind2 = ind + "    "
        et = f.element
        minsize = max(1, _min_size(f, self.version, self.flexible, elem=True))
        L.append(
            f"{ind2}if {n} * {minsize} > {E} - pos: raise _M({where!r} + ': array count exceeds the frame')"
        )
        if et in FIXED_FORMATS and et != "uuid":
            c = FIXED_FORMATS[et]
            L.append(f"{ind2}{var} = _list(_unpack_from('>%d{c}' % {n}, buf, pos))")
            L.append(f"{ind2}pos += {n} * {minsize}")
            return
        app, e = self.tmp("a"), self.tmp("e")
        L.append(f"{ind2}{var} = []")
        L.append(f"{ind2}{app} = {var}.append")
        L.append(f"{ind2}for _ in _range({n}):")
        if et == "struct":
            assert f.struct is not None
            L.append(f"{ind2}    {e}, pos = d_{f.struct.name}(buf, pos, {E})")
        else:
            self.dec_field(L, ind2 + "    ", e, f, st, elem=True)
        L.append(f"{ind2}    {app}({e})")

    def dec_tags(self, L: list[str], st: StructSpec, tagged: list[FieldSpec]) -> None:
        """The tagged-field section: one byte on the common path (no tags), a helper otherwise."""
        where = f"{self.msg.name} v{self.version} {st.name} tagged fields"
        L.append(f"    if pos >= end: raise _M({where!r} + ': truncated')")
        L.append("    if buf[pos] == 0:")
        L.append("        pos += 1")
        L.append("    else:")
        if not tagged:
            L.append("        pos = _skip_tags(buf, pos, end)")
            return
        fn = f"tt_{st.name}"
        T = [f"def {fn}(buf, pos, end):", "    found = {}"]
        self.dec_uvarint(T, "    ", "nt", where)
        T.append(f"    if nt > (end - pos) // 2: raise _M({where!r} + ': count exceeds the frame')")
        T.append("    for _ in _range(nt):")
        self.dec_uvarint(T, "        ", "tg", where)
        self.dec_uvarint(T, "        ", "sz", where)
        T.append(f"        if sz > end - pos: raise _M({where!r} + ': size exceeds the frame')")
        T.append("        tend = pos + sz")
        kw = "if"
        for f in tagged:
            T.append(f"        {kw} tg == {f.tag}:")
            self.end = "tend"
            self.dec_field(T, "            ", "v", f, st)
            self.end = "end"
            T.append(f"            found[{f.name!r}] = v")
            kw = "elif"
        T.append("        pos = tend")
        T.append("    return found, pos")
        self.src.append("\n".join(T) + "\n")
        L.append(f"        found, pos = {fn}(buf, pos, end)")
        for f in tagged:
            L.append(f"        if {f.name!r} in found: v_{f.name} = found[{f.name!r}]")

    # --------------------------------------------------------------- encoders

    def gen_encoder(self, st: StructSpec, regular: list[FieldSpec], tagged: list[FieldSpec]) -> str:
        cls = self.cls_name(st)
        L = [f"def e_{st.name}(o, w):", f"    if o.__class__ is not {cls}: o = _coerce({cls}, o)"]
        i = 0
        while i < len(regular):
            f = regular[i]
            if f.type in FIXED_FORMATS:
                j = i
                while j < len(regular) and regular[j].type in FIXED_FORMATS:
                    j += 1
                group = regular[i:j]
                fmt = ">" + "".join(FIXED_FORMATS[g.type] for g in group)
                pack = self.const(struct.Struct(fmt).pack, "_P")
                args = ", ".join(f"_uuidb(o.{g.name})" if g.type == "uuid" else f"o.{g.name}" for g in group)
                L.append(f"    w({pack}({args}))")
                i = j
            else:
                L.append(f"    x = o.{f.name}")
                self.enc_field(L, "    ", "x", "w", f, st)
                i += 1
        if self.flexible:
            if not tagged:
                L.append("    w(b'\\x00')")
            else:
                L.append("    tags = []")
                for f in tagged:
                    if f.default_kind == "struct" and f.struct is not None:
                        self.gen_not_default(f.struct)
                    L.append(f"    x = o.{f.name}")
                    L.append(f"    if {self.differs_from_default('x', f)}:")
                    L.append("        sub = []")
                    L.append("        ws = sub.append")
                    self.enc_field(L, "        ", "x", "ws", f, st)
                    L.append(f"        tags.append(({f.tag}, sub))")
                L.append("    if tags: _tags(tags, w)")
                L.append("    else: w(b'\\x00')")
        return "\n".join(L) + "\n"

    def differs_from_default(self, var: str, f: FieldSpec) -> str:
        if f.default_kind == "list":
            return var
        if f.default_kind == "struct":
            assert f.struct is not None
            return f"nd_{f.struct.name}({var})"
        if f.type == "uuid":
            return f"_uuidb({var}) != _Z16"
        if f.default is None:
            return f"{var} is not None"
        return f"{var} != {self.default_expr(f)}"

    def gen_not_default(self, st: StructSpec) -> None:
        """`nd_<Struct>(x)`: does x differ from a default-constructed struct in this version's fields?"""
        name = f"nd_{st.name}"
        if name in self.done:
            return
        self.done.add(name)
        cls = self.cls_name(st)
        terms = []
        for f in st.fields:
            if not f.present(self.version):
                continue
            x = f"x.{f.name}"
            if f.default_kind == "list":
                terms.append(f"{x} is None or len({x}) > 0")
            elif f.default_kind == "struct":
                assert f.struct is not None
                self.gen_not_default(f.struct)
                terms.append(f"{x} is None or nd_{f.struct.name}({x})")
            else:
                terms.append(self.differs_from_default(x, f))
        body = " or ".join(f"({t})" for t in terms) or "False"
        self.src.append(
            f"def {name}(x):\n"
            f"    if x is None: return True\n"
            f"    if x.__class__ is not {cls}: x = _coerce({cls}, x)\n"
            f"    return {body}\n"
        )

    def enc_length(self, L: list[str], ind: str, w: str, expr: str, f: FieldSpec, kind: str) -> None:
        if f.compact(self.version, self.flexible):
            L.append(f"{ind}k = {expr} + 1")
            L.append(f"{ind}{w}(_UV1[k] if k < 128 else _uvw(k))")
        elif kind == "string":
            L.append(f"{ind}{w}(_P_h({expr}))")
        else:
            L.append(f"{ind}{w}(_P_i({expr}))")

    def enc_null(
        self, L: list[str], ind: str, w: str, f: FieldSpec, st: StructSpec, kind: str, elem: bool
    ) -> None:
        if not elem and f.is_nullable(self.version):
            if f.compact(self.version, self.flexible):
                L.append(f"{ind}{w}(b'\\x00')")
            elif kind == "string":
                L.append(f"{ind}{w}(b'\\xff\\xff')")
            else:
                L.append(f"{ind}{w}(b'\\xff\\xff\\xff\\xff')")
        else:
            L.append(f"{ind}raise _nullerr({self.where(st, f)!r})")

    def enc_field(
        self, L: list[str], ind: str, var: str, w: str, f: FieldSpec, st: StructSpec, elem: bool = False
    ) -> None:
        """Encode the value in `var` (one value of `f`, or one element of array `f`) through writer `w`."""
        t = f.element if elem else f.type
        if t in FIXED_FORMATS:
            pack = self.const(struct.Struct(">" + FIXED_FORMATS[t]).pack, "_P")
            arg = f"_uuidb({var})" if t == "uuid" else var
            L.append(f"{ind}{w}({pack}({arg}))")
        elif t == "string":
            L.append(f"{ind}if {var} is None:")
            self.enc_null(L, ind + "    ", w, f, st, t, elem)
            L.append(f"{ind}else:")
            L.append(f"{ind}    b = {var}.encode('utf-8')")
            if not f.compact(self.version, self.flexible):
                too_long = repr(self.where(st, f) + ": string longer than 32767 bytes")
                L.append(f"{ind}    if len(b) > 32767: raise ValueError({too_long})")
            self.enc_length(L, ind + "    ", w, "len(b)", f, t)
            L.append(f"{ind}    {w}(b)")
        elif t in ("bytes", "records"):
            L.append(f"{ind}if {var} is None:")
            if t == "records" and self.msg.kind == "response":
                # Kafka answers "no records" with an empty record set, never null: librdkafka
                # rejects a null one as a corrupt response (ShareFetch "invalid MessageSetSize -1").
                self.enc_length(L, ind + "    ", w, "0", f, t)
            else:
                self.enc_null(L, ind + "    ", w, f, st, t, elem)
            L.append(f"{ind}elif {var}.__class__ is list:")
            self.enc_length(L, ind + "    ", w, f"sum(map(_blen, {var}))", f, t)
            L.append(f"{ind}    for p in {var}: {w}(p)")
            L.append(f"{ind}else:")
            self.enc_length(L, ind + "    ", w, f"_blen({var})", f, t)
            L.append(f"{ind}    {w}({var})")
        elif t == "array":
            L.append(f"{ind}if {var} is None:")
            self.enc_null(L, ind + "    ", w, f, st, t, elem)
            L.append(f"{ind}else:")
            ind2 = ind + "    "
            self.enc_length(L, ind2, w, f"len({var})", f, t)
            et = f.element
            if et in FIXED_FORMATS and et != "uuid":
                c = FIXED_FORMATS[et]
                L.append(f"{ind2}if {var}: {w}(_pack('>%d{c}' % len({var}), *{var}))")
            else:
                e = self.tmp("e")
                L.append(f"{ind2}for {e} in {var}:")
                if et == "struct":
                    assert f.struct is not None
                    L.append(f"{ind2}    e_{f.struct.name}({e}, {w})")
                else:
                    self.enc_field(L, ind2 + "    ", e, w, f, st, elem=True)
        else:
            assert f.struct is not None
            enc = f"e_{f.struct.name}"
            if not elem and f.is_nullable(self.version):
                L.append(f"{ind}if {var} is None: {w}(b'\\xff')")
                L.append(f"{ind}else:")
                L.append(f"{ind}    {w}(b'\\x01')")
                L.append(f"{ind}    {enc}({var}, {w})")
            else:
                L.append(f"{ind}{enc}({var}, {w})")


_CACHE: dict[tuple[int, int], tuple[Decoder, Encoder]] = {}


def compile_message(msg: MessageSpec, version: int) -> tuple[Decoder, Encoder]:
    """The (decoder, encoder) pair of `msg` at `version`, generated on first use."""
    key = (id(msg), version)
    pair = _CACHE.get(key)
    if pair is None:
        pair = _CACHE[key] = _Generator(msg, version).build()
    return pair


def generated_source(msg: MessageSpec, version: int) -> str:
    """The Python source generated for `msg` at `version` (for debugging)."""
    gen = _Generator(msg, version)
    gen.build()
    return gen.ns["__source__"]
