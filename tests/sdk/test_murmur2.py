"""Kafka's murmur2 partitioner: the pure twin against Kafka's published values and kafka-python,
and the numpy version against the twin."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from pylog.sdk.murmur2 import murmur2, murmur2_array, partition_for_key, partitions_for_keys

# Apache Kafka's UtilsTest.testMurmur2
KAFKA_VALUES = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), KAFKA_VALUES.items())
def test_kafka_values(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected
    assert murmur2_array(pa.array([key])).tolist() == [expected]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=70)), max_size=60), st.integers(0, 5))
def test_vectorised_equals_twin(keys: list[bytes | None], cut: int) -> None:
    arr = pa.array(keys, pa.binary()).slice(min(cut, len(keys)))
    keys = keys[min(cut, len(keys)):]
    got = murmur2_array(arr).tolist()
    assert got == [murmur2(k or b"") for k in keys]
    assert all((g & 0xFFFFFFFF) == kafka_python_murmur2(k) for g, k in zip(got, keys) if k is not None)
    parts = partitions_for_keys(arr, 7).tolist()
    assert parts == [-1 if k is None else partition_for_key(k, 7) for k in keys]


@pytest.mark.parametrize("typ", [pa.string(), pa.large_binary(), pa.large_string(), pa.binary_view()])
def test_column_types(typ: pa.DataType) -> None:
    words = ["", "a", "ab", "abc", "abcd", "héllo wörld", "x" * 1000]
    arr = pa.array(words, typ)
    assert murmur2_array(arr).tolist() == [murmur2(w.encode()) for w in words]
    chunked = pa.chunked_array([arr.slice(0, 3), arr.slice(3)])
    assert murmur2_array(chunked).tolist() == [murmur2(w.encode()) for w in words]


def test_int32_result() -> None:
    out = murmur2_array(pa.array([b"k%d" % i for i in range(1000)]))
    assert out.dtype == np.int32 and len(out) == 1000
