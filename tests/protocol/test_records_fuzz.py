"""Fuzzing the batch decoder: mutated valid batches and random bytes raise only ProtocolError subclasses,
both implementations agree, and memory stays bounded by the input and the decompression limit."""

from __future__ import annotations

import resource
import struct

import pyarrow as pa
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pylog.protocol import records as R
from pylog.protocol.errors import ProtocolError

HEADERS_TYPE = R.RECORD_SCHEMA.field("headers").type
MAX_UNCOMPRESSED = 1 << 20


def _seed_batches() -> list[bytes]:
    n = 12
    rows = pa.RecordBatch.from_arrays(
        [
            pa.array(range(40, 40 + n), pa.int64()),
            pa.array([1_700_000_000_000 + 3 * i for i in range(n)], pa.timestamp("ms")),
            pa.array([None if i % 4 == 0 else b"k%d" % i for i in range(n)], pa.binary()),
            pa.array([None if i % 5 == 0 else b"value-%d " % i * (i + 1) for i in range(n)], pa.binary()),
            pa.array(
                [
                    [{"key": "hé", "value": None}, {"key": "x", "value": b"1"}] if i % 3 else []
                    for i in range(n)
                ],
                HEADERS_TYPE,
            ),
        ],
        schema=R.RECORD_SCHEMA,
    )
    seeds = [R.encode_batch(rows, base_offset=40, compression=c) for c in range(5)]
    seeds.append(
        R.encode_control_batch(
            base_offset=7, producer_id=1, producer_epoch=0, commit=True, coordinator_epoch=3, timestamp_ms=1
        )
    )
    return seeds


SEEDS = _seed_batches()


def _fix_crc(buf: bytearray) -> None:
    if len(buf) >= 61:
        struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))


@st.composite
def mutated_batches(draw) -> tuple[bytes, bool]:
    buf = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "truncate", "insert", "field", "field"]))
        if kind == "flip" and buf:
            i = draw(st.integers(0, len(buf) - 1))
            buf[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and buf:
            i = draw(st.integers(0, len(buf) - 1))
            buf[i] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF]))
        elif kind == "truncate":
            del buf[draw(st.integers(0, len(buf))) :]
        elif kind == "insert":
            i = draw(st.integers(0, len(buf)))
            buf[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "field" and len(buf) >= 61:
            # header fields that size things: length, attributes (codec), record count
            offset, fmt = draw(st.sampled_from([(8, ">i"), (21, ">h"), (57, ">i"), (23, ">i")]))
            lo, hi = (-(2**15), 2**15 - 1) if fmt == ">h" else (-(2**31), 2**31 - 1)
            value = draw(st.integers(lo, hi) | st.sampled_from([0, 1, 5, 7, hi, lo]))
            struct.pack_into(fmt, buf, offset, value)
    fix = draw(st.booleans())
    if fix:
        _fix_crc(buf)
    return bytes(buf), fix


def _outcome(buf: bytes, impl, verify: bool):
    try:
        d = R.decode_batch(buf, verify_crc=verify, max_uncompressed_bytes=MAX_UNCOMPRESSED, impl=impl)
    except ProtocolError as exc:
        return type(exc)
    records = d.records
    records.validate(full=True)
    # the output is bounded by what the input (after bounded decompression) can hold
    assert records.get_total_buffer_size() <= 40 * (len(buf) + MAX_UNCOMPRESSED) + 4096
    return (d.header, records.set_column(1, "timestamp", records.column(1).cast(pa.int64())).to_pylist())


def _check(buf: bytes, verify: bool) -> None:
    results = [_outcome(buf, impl, verify) for impl in (R.C_IMPL, R.PYTHON_IMPL)]
    assert results[0] == results[1]
    try:
        for header, view in R.iter_batches(buf):
            assert header.size_in_bytes == len(view)
    except ProtocolError:
        pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated_batches())
def test_mutated_batches_only_raise_protocol_errors(case):
    buf, crc_fixed = case
    _check(buf, verify=not crc_fixed)
    _check(buf, verify=False)


@settings(max_examples=150, deadline=None)
@given(buf=st.binary(max_size=300))
def test_random_bytes_only_raise_protocol_errors(buf):
    _check(buf, verify=False)
    if len(buf) >= 61:
        fixed = bytearray(buf)
        struct.pack_into(">b", fixed, 16, 2)
        struct.pack_into(">i", fixed, 8, len(fixed) - 12)
        _fix_crc(fixed)
        _check(bytes(fixed), verify=True)


def test_huge_declared_counts_do_not_allocate():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    buf = bytearray(SEEDS[0])
    struct.pack_into(">i", buf, 57, 2**31 - 1)  # record count
    _fix_crc(buf)
    for impl in (R.C_IMPL, R.PYTHON_IMPL):
        for _ in range(50):
            assert _outcome(bytes(buf), impl, True) is not None
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert after - before < 64 * 1024  # KiB: nothing sized by the declared count
