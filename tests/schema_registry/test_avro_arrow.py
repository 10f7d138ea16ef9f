"""Avro -> Arrow: the C accelerator, its pure-Python twin and fastavro agree, logical types map,
several writer schemas resolve to one reader, bad payloads fail their row."""

from __future__ import annotations

import datetime
import decimal
import io
import json
import random
import uuid

import fastavro
import pyarrow as pa
import pytest

from pylog.schema_registry import avro_arrow as aa
from pylog.schema_registry.core import Schema
from pylog.schema_registry.formats import avro as favro
from pylog.schema_registry.wire import frame, schema_ids
from pylog.sdk.decoders import RecordDecodeError
from pylog.sdk.registry import RegistryDecoder

IMPLS = [pytest.param(aa.C_IMPL, id="c"), pytest.param(aa.PYTHON_IMPL, id="python")]
WIDE = {
    "type": "record",
    "name": "W",
    "fields": [
        {"name": "l", "type": "long"},
        {"name": "i", "type": "int"},
        {"name": "s", "type": "string"},
        {"name": "b", "type": "bytes"},
        {"name": "d", "type": "double"},
        {"name": "f", "type": "float"},
        {"name": "ok", "type": "boolean"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}},
        {
            "name": "fdec",
            "type": {
                "type": "fixed",
                "name": "F8",
                "size": 8,
                "logicalType": "decimal",
                "precision": 18,
                "scale": 2,
            },
        },
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
        {"name": "raw", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "maybe", "type": ["null", "long"], "default": None},
        {"name": "later", "type": ["string", "null"]},
    ],
}


def _record(rnd: random.Random, i: int) -> dict:
    return {
        "l": rnd.randrange(-(2**63), 2**63),
        "i": rnd.randrange(-(2**31), 2**31),
        "s": f"s{i}é" * (i % 4),
        "b": bytes(rnd.randrange(256) for _ in range(i % 7)),
        "d": rnd.random(),
        "f": 0.5,
        "ok": bool(i % 2),
        "ts": datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
        + datetime.timedelta(milliseconds=i),
        "us": datetime.datetime(2023, 1, 1, tzinfo=datetime.timezone.utc)
        + datetime.timedelta(microseconds=i),
        "day": datetime.date(2020, 2, 29) + datetime.timedelta(days=i),
        "tm": datetime.time(1, 2, 3),
        "dec": decimal.Decimal(rnd.randrange(-(10**11), 10**11)).scaleb(-3),
        "fdec": decimal.Decimal(rnd.randrange(-(10**17), 10**17)).scaleb(-2),
        "id": str(uuid.UUID(int=rnd.getrandbits(128))),
        "color": ["RED", "GREEN", "BLUE"][i % 3],
        "raw": b"abcd",
        "maybe": None if i % 3 else i,
        "later": None if i % 2 else "x",
    }


def _encode(schema: dict, rows: list[dict], sid: int = 1) -> pa.Array:
    parsed = fastavro.parse_schema(schema)
    out = []
    for r in rows:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, r)
        out.append(frame(sid, buf.getvalue()))
    return pa.array(out, pa.binary())


@pytest.mark.parametrize("impl", IMPLS)
def test_flat_decode_matches_fastavro(impl: object) -> None:
    rnd = random.Random(7)
    rows = [_record(rnd, i) for i in range(300)]
    values = _encode(WIDE, rows)
    s = favro.parse(json.dumps(WIDE)).parsed
    assert aa.flat_plan(s) is not None
    fast = aa.decode(s, s, values, null_on_error=False, impl=impl)
    general = aa.decode_records(s, s, values.to_pylist(), null_on_error=False)
    assert fast.type == general.type
    assert fast.to_pylist() == general.to_pylist()
    t = {f.name: f.type for f in fast.type}
    assert t["ts"] == pa.timestamp("ms", tz="UTC") and t["us"] == pa.timestamp("us", tz="UTC")
    assert t["day"] == pa.date32() and t["tm"] == pa.time32("ms") and t["id"] == pa.string()
    assert t["dec"] == pa.decimal128(12, 3) and t["fdec"] == pa.decimal128(18, 2)
    assert t["color"] == pa.dictionary(pa.int32(), pa.string())
    assert not fast.type.field("l").nullable and fast.type.field("maybe").nullable
    assert fast.to_pylist()[5]["dec"] == rows[5]["dec"]


@pytest.mark.parametrize("impl", IMPLS)
def test_truncated_payloads_fail_their_row(impl: object) -> None:
    rnd = random.Random(3)
    values = _encode(WIDE, [_record(rnd, i) for i in range(10)]).to_pylist()
    values[4] = values[4][:12]
    values[6] = values[6][:5]
    arr = pa.array(values, pa.binary())
    s = favro.parse(json.dumps(WIDE)).parsed
    with pytest.raises(aa.AvroDecodeError) as bad:
        aa.decode(s, s, arr, null_on_error=False, impl=impl)
    assert bad.value.row == 4
    out = aa.decode(s, s, arr, null_on_error=True, impl=impl).to_pylist()
    assert out[4] is None and out[6] is None and out[5] is not None


def test_nested_schemas_take_the_general_path() -> None:
    nested = {
        "type": "record",
        "name": "N",
        "fields": [
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "attrs", "type": {"type": "map", "values": "long"}},
            {
                "name": "inner",
                "type": {"type": "record", "name": "I", "fields": [{"name": "x", "type": "int"}]},
            },
        ],
    }
    s = favro.parse(json.dumps(nested)).parsed
    assert aa.flat_plan(s) is None
    rows = [{"tags": ["a"], "attrs": {"k": 1}, "inner": {"x": 2}}]
    out = aa.decode(s, s, _encode(nested, rows), null_on_error=False)
    assert out.to_pylist() == [{"tags": ["a"], "attrs": [("k", 1)], "inner": {"x": 2}}]


class _Schemas:
    def __init__(self, by_id: dict[int, dict], latest: int) -> None:
        self.by_id = {i: Schema("AVRO", json.dumps(d)) for i, d in by_id.items()}
        self.latest_id = latest

    def schema(self, sid: int) -> Schema:
        from pylog.schema_registry.errors import RegistryError

        if sid not in self.by_id:
            raise RegistryError(404, 40403, "unknown")
        return self.by_id[sid]

    def latest(self, _subject: str) -> tuple[int, Schema]:
        return self.latest_id, self.by_id[self.latest_id]

    def resolved_references(self, _refs: object) -> list:
        return []


def test_several_writer_versions_come_back_as_one_table() -> None:
    v1 = {
        "type": "record",
        "name": "P",
        "fields": [
            {"name": "id", "type": "int"},
            {"name": "c", "type": {"type": "enum", "name": "C", "symbols": ["A", "B"]}},
        ],
    }
    v2 = {
        "type": "record",
        "name": "P",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "c", "type": {"type": "enum", "name": "C", "symbols": ["Z", "A", "B"]}},
            {"name": "note", "type": ["null", "string"], "default": None},
            {"name": "n", "type": "int", "default": 7},
        ],
    }
    a = _encode(v1, [{"id": 1, "c": "B"}, {"id": 2, "c": "A"}], sid=1).to_pylist()
    b = _encode(v2, [{"id": 3, "c": "Z", "note": "x", "n": 1}], sid=2).to_pylist()
    values = pa.array([a[0], b[0], a[1], None], pa.binary())
    dec = RegistryDecoder("t", "value", _Schemas({1: v1, 2: v2}, latest=2))
    out = dec(values)
    assert out.to_pylist() == [
        {"id": 1, "c": "B", "note": None, "n": 7},
        {"id": 3, "c": "Z", "note": "x", "n": 1},
        {"id": 2, "c": "A", "note": None, "n": 7},
        None,
    ]
    assert out.type.field("id").type == pa.int64()
    with pytest.raises(RecordDecodeError) as unknown:
        dec(pa.array([frame(99, b"\x02")]))
    assert "99" in str(unknown.value)
    nulls = RegistryDecoder("t", "value", _Schemas({1: v1, 2: v2}, latest=2), on_error="null")
    assert nulls(pa.array([a[0], b"junk", frame(99, b"")], pa.binary())).to_pylist()[1:] == [None, None]


def test_schema_ids_reads_the_header_columnwise() -> None:
    ids, ok = schema_ids(pa.array([frame(258, b"x"), b"\x01\x00\x00\x00\x01", b"\x00", None], pa.binary()))
    assert ids.tolist() == [258, -1, -1, -1] and ok.tolist() == [True, False, False, False]


def test_schema_ids_of_a_slice() -> None:
    values = pa.array([b"junk", frame(7, b"x"), b"\x00", frame(9, b"yy")] * 3, pa.binary())
    for start in range(len(values)):
        ids, ok = schema_ids(values.slice(start))
        want, want_ok = schema_ids(pa.array(values.slice(start).to_pylist(), pa.binary()))
        assert ids.tolist() == want.tolist() and ok.tolist() == want_ok.tolist()
