"""Schema Registry wire format -> typed columns: pylog's batch decoders against a plain fastavro loop.

Rows: Avro records of 5 and 10 fields (long, string, double, boolean, timestamp-millis, repeated),
framed as the serializers frame them (magic byte, schema id, payload), decoded by

- pylog C: `RegistryDecoder` (decode="registry"): group by schema id, one `_cavro` call per batch,
  columns resolved to the reader schema, an Arrow struct out;
- pylog Python twin: the same with the accelerator's pure-Python twin (PYLOG_PURE_PYTHON path);
- pylog general: the per-record fastavro path pylog takes for nested schemas, into Arrow;
- baseline: `fastavro.schemaless_reader` per record in a Python loop, then `pandas.DataFrame`;

and the same 5 fields as Protobuf (the protobuf runtime parses one message at a time) and as JSON
Schema (Arrow's JSON reader over the batch).

Payload encoding is setup, not timed. A second table times the write side: pylog's
`write_topic(value_schema="registry")` encoder against confluent-kafka's `AvroSerializer` called per
record (both run fastavro per record). Single thread; records/s is the best of --repeat runs.

    python bench/bench_registry.py [--records 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import time
from collections.abc import Callable

import fastavro
import pandas as pd
import pyarrow as pa

from pylog.schema_registry import avro_arrow
from pylog.schema_registry.core import Schema
from pylog.schema_registry.formats import avro as avro_format
from pylog.sdk.registry import RegistryDecoder

_TS = {"type": "long", "logicalType": "timestamp-millis"}
FIVE = {
    "type": "record",
    "name": "E5",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "ok", "type": "boolean"},
        {"name": "at", "type": _TS},
    ],
}
TEN = {
    "type": "record",
    "name": "E10",
    "fields": [
        *FIVE["fields"],
        {"name": "page", "type": "string"},
        {"name": "ms", "type": "int"},
        {"name": "ratio", "type": "float"},
        {"name": "ref", "type": ["null", "string"], "default": None},
        {"name": "seen", "type": _TS},
    ],
}


def payloads(schema: dict, n: int) -> pa.Array:
    parsed = fastavro.parse_schema(schema)
    t0 = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    names = [f["name"] for f in schema["fields"]]
    out = []
    for i in range(min(n, 50_000)):
        row = {
            "id": i,
            "user": f"user-{i % 1000}",
            "amount": i * 0.25,
            "ok": i % 2 == 0,
            "at": t0 + datetime.timedelta(milliseconds=i),
            "page": f"/p/{i % 50}",
            "ms": i % 5000,
            "ratio": 0.5,
            "ref": None if i % 3 else f"r{i}",
            "seen": t0,
        }
        buf = io.BytesIO()
        buf.write(b"\x00\x00\x00\x00\x01")
        fastavro.schemaless_writer(buf, parsed, {k: row[k] for k in names})
        out.append(buf.getvalue())
    reps = -(-n // len(out))
    return pa.array((out * reps)[:n], pa.binary())


class _OneSchema:
    def __init__(self, schema: dict | str, schema_type: str = "AVRO") -> None:
        self.s = Schema(schema_type, schema if isinstance(schema, str) else json.dumps(schema))

    def schema(self, _sid: int) -> Schema:
        return self.s

    def latest(self, _subject: str) -> tuple[int, Schema]:
        return 1, self.s

    def resolved_references(self, _refs: object) -> list:
        return []


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument(
        "--slow-records",
        type=int,
        default=100_000,
        help="records for the per-record rows (Python twin, general path, baseline)",
    )
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for label, schema in (("5 fields", FIVE), ("10 fields", TEN)):
        values = payloads(schema, args.records)
        slow = values.slice(0, args.slow_records)
        parsed = avro_format.parse(json.dumps(schema)).parsed

        def pylog_c(v: pa.Array = values, s: dict = schema) -> object:
            return RegistryDecoder("t", "value", _OneSchema(s))(v)

        def pylog_py(v: pa.Array = slow, p: object = parsed) -> object:
            return avro_arrow.decode(p, p, v, null_on_error=False, impl=avro_arrow.PYTHON_IMPL)

        def pylog_general(v: pa.Array = slow, p: object = parsed) -> object:
            return avro_arrow.decode_records(p, p, v.to_pylist(), null_on_error=False)

        def baseline(v: pa.Array = slow, s: dict = schema) -> object:
            ps = fastavro.parse_schema(s)
            recs = [fastavro.schemaless_reader(io.BytesIO(b[5:]), ps, ps) for b in v.to_pylist()]
            return pd.DataFrame(recs)

        out = pylog_c()
        assert out.type.num_fields == len(schema["fields"]) and len(out) == len(values)
        base = args.slow_records / best(baseline, args.repeat)
        for method, fn, n in (
            ('pylog C (decode="registry")', pylog_c, args.records),
            ("pylog Python twin", pylog_py, args.slow_records),
            ("pylog general (fastavro per record)", pylog_general, args.slow_records),
        ):
            rate = n / best(fn, args.repeat)
            rows.append((label, method, rate, rate / base))
        rows.append((label, "fastavro loop -> pandas (baseline)", base, 1.0))
    print(f"{'record':<10} {'decoder':<38} {'records/s':>14} {'vs baseline':>12}")
    for label, method, rate, ratio in rows:
        print(f"{label:<10} {method:<38} {rate:>14,.0f} {ratio:>11.1f}x")
    for label, method, rate in other_formats(args.slow_records, args.repeat):
        print(f"{label:<10} {method:<38} {rate:>14,.0f}")
    print()
    print(f"{'record':<10} {'encoder':<38} {'records/s':>14} {'vs peer':>12}")
    for label, method, rate, ratio in encode_rows(args.slow_records, args.repeat):
        print(f"{label:<10} {method:<38} {rate:>14,.0f} {ratio:>11.1f}x")


def other_formats(n: int, repeat: int) -> list[tuple[str, str, float]]:
    import base64

    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(name="e5.proto", package="bench", syntax="proto3")
    m = fd.message_type.add(name="E5")
    for i, (name, t) in enumerate(
        (
            ("id", F.TYPE_INT64),
            ("user", F.TYPE_STRING),
            ("amount", F.TYPE_DOUBLE),
            ("ok", F.TYPE_BOOL),
            ("at", F.TYPE_INT64),
        ),
        1,
    ):
        m.field.add(name=name, number=i, type=t, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.E5"))
    protos, jsons = [], []
    for i in range(min(n, 50_000)):
        row = {
            "id": i,
            "user": f"user-{i % 1000}",
            "amount": i * 0.25,
            "ok": i % 2 == 0,
            "at": 1_700_000_000_000 + i,
        }
        protos.append(b"\x00\x00\x00\x00\x01\x00" + cls(**row).SerializeToString())
        jsons.append(b"\x00\x00\x00\x00\x01" + json.dumps(row).encode())
    reps = -(-n // len(protos))
    proto_values = pa.array((protos * reps)[:n], pa.binary())
    json_values = pa.array((jsons * reps)[:n], pa.binary())
    proto_schema = _OneSchema(base64.b64encode(fd.SerializeToString()).decode(), "PROTOBUF")
    json_schema = _OneSchema(
        {"type": "object", "properties": {k: {} for k in ("id", "user", "amount", "ok", "at")}}, "JSON"
    )
    rows = []
    for method, schemas, values in (
        ("pylog Protobuf (per record)", proto_schema, proto_values),
        ("pylog JSON Schema (Arrow JSON reader)", json_schema, json_values),
    ):

        def run(s: _OneSchema = schemas, v: pa.Array = values) -> object:
            return RegistryDecoder("t", "value", s)(v)

        run()
        rows.append(("5 fields", method, n / best(run, repeat)))
    return rows


def encode_rows(n: int, repeat: int) -> list[tuple[str, str, float, float]]:
    from confluent_kafka.schema_registry._sync.mock_schema_registry_client import MockSchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from pylog.sdk.registry_write import encode, record_schema

    out = []
    for label, schema in (("5 fields", FIVE), ("10 fields", TEN)):
        decoded = RegistryDecoder("t", "value", _OneSchema(schema))(payloads(schema, n))
        arrow_schema = record_schema(decoded.type, "t_value")

        def pylog_encode(v: pa.Array = decoded, s: dict = arrow_schema) -> object:
            return encode(v, s, 1)

        client = MockSchemaRegistryClient({"url": "mock://bench"})  # no HTTP in the timed loop
        ser = AvroSerializer(client, json.dumps(arrow_schema))
        ctx = SerializationContext("t", MessageField.VALUE)
        rows = decoded.to_pylist()

        def peer(r: list = rows, ser: AvroSerializer = ser, ctx: SerializationContext = ctx) -> object:
            return [ser(x, ctx) for x in r]

        peer_rate = n / best(peer, repeat)
        rate = n / best(pylog_encode, repeat)
        out += [
            (label, 'pylog (value_schema="registry")', rate, rate / peer_rate),
            (label, "confluent-kafka AvroSerializer (peer)", peer_rate, 1.0),
        ]
    return out


if __name__ == "__main__":
    main()
