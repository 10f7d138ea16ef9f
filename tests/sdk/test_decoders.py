"""Value decoders: JSON to struct without per-record Python, UTF-8, registry and callables."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from pylog.sdk.decoders import JsonDecoder, apply_decoders, decode_utf8, register_decoder, resolve_decoders


def test_json_struct_nulls_and_newlines() -> None:
    values = pa.array([b'{"a": 1, "b": "x"}', None, b"", b'{"a": 2,\n "c": [1, 2]}'], pa.binary())
    out = JsonDecoder()(values)
    assert out.type == pa.struct([("a", pa.int64()), ("b", pa.string()), ("c", pa.list_(pa.int64()))])
    assert out.to_pylist() == [{"a": 1, "b": "x", "c": None}, None, None, {"a": 2, "b": None, "c": [1, 2]}]


def test_json_schema_is_kept_across_batches() -> None:
    dec = JsonDecoder()
    dec(pa.array([b'{"a": 1}']))
    assert dec(pa.array([b'{"a": 2, "z": 3}', b"{}"])).to_pylist() == [{"a": 2}, {"a": None}]


def test_json_sliced_and_large_input() -> None:
    rows = [json.dumps({"i": i, "s": "x" * (i % 5)}).encode() for i in range(10_000)]
    arr = pa.array(rows, pa.large_binary()).slice(17, 5000)
    out = JsonDecoder()(arr)
    assert out.field("i").to_pylist() == list(range(17, 5017))


def test_json_rejects_non_objects() -> None:
    with pytest.raises(ValueError, match="json-any"):
        JsonDecoder()(pa.array([b"[1, 2]"]))
    assert resolve_decoders("json-any")["value"](pa.array([b"[1, 2]", b"[3]"])).to_pylist() == [[1, 2], [3]]
    with pytest.raises(ValueError, match="mixed types"):
        resolve_decoders("json-any")["value"](pa.array([b"[1, 2]", b"3"]))


def test_utf8() -> None:
    assert decode_utf8(pa.array([b"h\xc3\xa9", None])).to_pylist() == ["hé", None]
    with pytest.raises(ValueError, match="UTF-8"):
        decode_utf8(pa.array([b"\xff"]))


def test_registry_and_errors() -> None:
    register_decoder("length", pa.compute.binary_length)
    batch = pa.record_batch({"key": pa.array([b"k"]), "value": pa.array([b"abc"])})
    out = apply_decoders(batch, resolve_decoders({"key": "utf8", "value": "length"}))
    assert out.to_pylist() == [{"key": "k", "value": 3}]
    with pytest.raises(ValueError, match="unknown decoder 'nope'"):
        resolve_decoders("nope")
    with pytest.raises(ValueError, match="applies to 'key' and 'value'"):
        resolve_decoders({"offset": "utf8"})
    with pytest.raises(TypeError):
        resolve_decoders(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="returned 2 values"):
        apply_decoders(batch, resolve_decoders(lambda v: pa.array([1, 2])))
