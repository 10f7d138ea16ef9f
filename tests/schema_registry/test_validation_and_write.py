"""The produce-time validation check on real RecordBatch bytes, and the write side's Arrow -> Avro
schema and encoding read back by the decoder."""

from __future__ import annotations

import datetime
import decimal
import json

import numpy as np
import pyarrow as pa
from pylog.protocol.records import encode_batch

from pylog.schema_registry import avro_arrow
from pylog.schema_registry.formats import avro as favro
from pylog.schema_registry.validation import KEY_VALIDATION, VALUE_VALIDATION, SchemaValidation
from pylog.schema_registry.wire import frame
from pylog.sdk.registry_write import encode, record_schema


def _batch(keys: list[bytes | None], values: list[bytes | None], codec: str = "none") -> bytes:
    n = len(values)
    rows = pa.RecordBatch.from_pydict(
        {
            "offset": pa.array(range(n), pa.int64()),
            "timestamp": pa.array([0] * n, pa.timestamp("ms")),
            "key": pa.array(keys, pa.binary()),
            "value": pa.array(values, pa.binary()),
        }
    )
    return encode_batch(rows, base_offset=0, compression=codec)


def test_validation_checks_the_configured_columns() -> None:
    known = SchemaValidation(lambda ids: np.isin(ids, [1, 2]))
    good, unknown = frame(1, b"x"), frame(9, b"x")
    on_value = {VALUE_VALIDATION: "true"}
    assert known.check("t", {}, _batch([b"k"], [b"plain"])) is None  # validation off
    assert known.check("t", on_value, _batch([b"plain key", None], [good, good], "zstd")) is None
    refusal = known.check("t", on_value, _batch([None, None], [good, b"plain"], "lz4"))
    assert refusal is not None and refusal.startswith("record 1 of the batch: the value is not in")
    refusal = known.check("t", on_value, _batch([None], [unknown]))
    assert refusal is not None and "schema id 9" in refusal
    refusal = known.check("t", {KEY_VALIDATION: "true"}, _batch([b"plain"], [good]))
    assert refusal is not None and "the key" in refusal
    no_registry = SchemaValidation(None)
    assert "serves no schema registry" in str(no_registry.check("t", on_value, _batch([None], [good])))


def test_arrow_schema_round_trips_through_avro() -> None:
    t0 = datetime.datetime(2024, 3, 1, 12, tzinfo=datetime.timezone.utc)
    table = pa.table(
        {
            "id": pa.array([1, 2, None], pa.int64()),
            "small": pa.array([1, 2, 3], pa.int16()),
            "name": ["a", None, "c"],
            "at": pa.array([t0, None, t0], pa.timestamp("ms", tz="UTC")),
            "day": pa.array([datetime.date(2024, 1, 1)] * 3, pa.date32()),
            "price": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-3.50")], pa.decimal128(9, 2)),
            "tags": [["x"], [], None],
            "inner": [{"a": 1}, {"a": 2}, None],
            "ratio": pa.array([0.5] * 3, pa.float32()),
        }
    )
    struct = pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns], names=table.column_names)
    schema = record_schema(struct.type, "t_value")
    wire = encode(struct, schema, 7)
    assert wire[0].as_py()[:5] == b"\x00\x00\x00\x00\x07"
    parsed = favro.parse(json.dumps(schema)).parsed
    back = avro_arrow.decode(parsed, parsed, wire, null_on_error=False)
    assert back.to_pylist() == struct.to_pylist()
    assert back.type.field("at").type == pa.timestamp("ms", tz="UTC")
    assert back.type.field("price").type == pa.decimal128(9, 2)
