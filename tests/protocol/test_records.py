"""RecordBatch v2 <-> Arrow: header, CRC, codecs, control markers, and the C / pure-Python twins agreeing."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib

import cramjam
import lz4.frame
import pyarrow as pa
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pylog.protocol import records as R
from pylog.protocol.errors import CorruptRecordBatch, ProtocolError, RecordBatchTooLarge
from pylog.protocol.records import compression as C

HEADERS_TYPE = R.RECORD_SCHEMA.field("headers").type
IMPLS = {"c": R.C_IMPL, "python": R.PYTHON_IMPL}


@pytest.fixture(params=["c", "python"])
def impl(request):
    mod = IMPLS[request.param]
    assert mod is not None, "the C accelerator was not built (pip install --no-deps -e .)"
    return mod


def make_rows(rows: list[dict]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [
            pa.array([r["offset"] for r in rows], pa.int64()),
            pa.array([r["timestamp"] for r in rows], pa.timestamp("ms")),
            pa.array([r["key"] for r in rows], pa.binary()),
            pa.array([r["value"] for r in rows], pa.binary()),
            pa.array(
                [[{"key": k, "value": v} for k, v in r["headers"]] for r in rows],
                HEADERS_TYPE,
            ),
        ],
        schema=R.RECORD_SCHEMA,
    )


def as_tuples(batch: pa.RecordBatch) -> list[tuple]:
    cols = {name: batch.column(name).to_pylist() for name in batch.schema.names}
    ts = batch.column("timestamp").cast(pa.int64()).to_pylist()
    return [
        (
            cols["offset"][i],
            ts[i],
            cols["key"][i],
            cols["value"][i],
            [(h["key"], h["value"]) for h in cols["headers"][i]],
        )
        for i in range(batch.num_rows)
    ]


SAMPLE = [
    {"offset": 100, "timestamp": 1_700_000_000_000, "key": b"k", "value": b"v", "headers": []},
    {"offset": 101, "timestamp": 1_700_000_000_005, "key": None, "value": b"", "headers": [("a", b"1")]},
    {"offset": 102, "timestamp": 1_699_999_999_000, "key": b"", "value": None, "headers": [("é€😀", None)]},
    {"offset": 105, "timestamp": 1_700_000_000_001, "key": b"x" * 300, "value": b"y" * 70000, "headers": []},
]


# ---------------------------------------------------------------- header, CRC, framing


def test_schema_matches_contract():
    assert (
        pa.schema(
            [
                ("offset", pa.int64()),
                ("timestamp", pa.timestamp("ms")),
                ("key", pa.binary()),
                ("value", pa.binary()),
                ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
            ]
        )
        == R.RECORD_SCHEMA
    )


def test_roundtrip_sample_and_header_fields(impl):
    rows = make_rows(SAMPLE)
    buf = R.encode_batch(
        rows,
        base_offset=100,
        producer_id=7,
        producer_epoch=3,
        base_sequence=42,
        partition_leader_epoch=5,
        impl=impl,
    )
    h = R.parse_header(buf)
    assert len(buf) == h.size_in_bytes and h.magic == 2
    assert (h.base_offset, h.last_offset_delta, h.record_count) == (100, 5, 4)
    assert (h.base_timestamp, h.max_timestamp) == (1_700_000_000_000, 1_700_000_000_005)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.partition_leader_epoch) == (7, 3, 42, 5)
    assert not h.is_transactional and not h.is_control and h.timestamp_type == 0 and h.compression == 0
    assert h.crc == R.compute_crc(buf)
    decoded = R.decode_batch(buf, impl=impl)
    assert decoded.header == h
    assert decoded.records.schema == R.RECORD_SCHEMA
    assert as_tuples(decoded.records) == as_tuples(rows)
    decoded.records.validate(full=True)


def test_attribute_bits(impl):
    rows = make_rows(SAMPLE[:1])
    h = R.parse_header(
        R.encode_batch(
            rows, base_offset=100, is_transactional=True, timestamp_type=1, max_timestamp=9, impl=impl
        )
    )
    assert h.is_transactional and h.timestamp_type == 1 and h.max_timestamp == 9 and not h.is_control
    h = R.parse_header(R.encode_batch(rows, base_offset=100, attributes=0x20 | 0x10 | 4, impl=impl))
    assert h.is_control and h.is_transactional and h.compression == 4


def test_crc_mismatch_detected_and_skippable(impl):
    buf = bytearray(R.encode_batch(make_rows(SAMPLE), base_offset=100, impl=impl))
    buf[-10] ^= 0xFF  # inside the last value
    with pytest.raises(CorruptRecordBatch, match="CRC"):
        R.decode_batch(buf, impl=impl)
    R.decode_batch(bytes(buf), verify_crc=False, impl=impl)


def test_set_base_offset_keeps_crc_valid():
    buf = R.encode_batch(make_rows(SAMPLE), base_offset=100)
    moved = R.set_base_offset(buf, 5000, partition_leader_epoch=9)
    h = R.parse_header(moved)
    assert h.base_offset == 5000 and h.partition_leader_epoch == 9 and h.crc == R.compute_crc(moved)
    d = R.decode_batch(moved)
    assert d.records.column("offset").to_pylist() == [5000, 5001, 5002, 5005]
    assert R.parse_header(R.set_base_offset(bytearray(buf), 1)).partition_leader_epoch == -1


def test_iter_batches_splits_and_ignores_partial_tail():
    a = R.encode_batch(make_rows(SAMPLE[:2]), base_offset=100)
    b = R.encode_batch(make_rows(SAMPLE[2:]), base_offset=100, compression="zstd")
    blob = a + b + b[:30]
    got = list(R.iter_batches(blob))
    assert [bytes(v) for _, v in got] == [a, b]
    assert [h.record_count for h, _ in got] == [2, 2]
    assert list(R.iter_batches(b"")) == [] and list(R.iter_batches(a[:11])) == []
    broken = bytearray(a)
    struct.pack_into(">i", broken, 8, 10)
    with pytest.raises(CorruptRecordBatch):
        list(R.iter_batches(broken))
    wrong_magic = bytearray(a)
    wrong_magic[16] = 1
    with pytest.raises(CorruptRecordBatch, match="magic"):
        list(R.iter_batches(wrong_magic))


def test_empty_batch(impl):
    empty = make_rows([])
    buf = R.encode_batch(empty, base_offset=10, last_offset_delta=4, impl=impl)
    h = R.parse_header(buf)
    assert (h.record_count, h.last_offset_delta, h.base_timestamp, h.max_timestamp) == (0, 4, -1, -1)
    assert R.decode_batch(buf, impl=impl).records.num_rows == 0


def test_encode_accepts_sliced_and_partial_columns(impl):
    rows = make_rows(SAMPLE).slice(1, 2)
    d = R.decode_batch(R.encode_batch(rows, base_offset=101, impl=impl), impl=impl)
    assert as_tuples(d.records) == as_tuples(rows)
    minimal = pa.record_batch(
        {
            "offset": pa.array([3, 4], pa.int64()),
            "timestamp": pa.array([1, 2], pa.int64()),
            "value": pa.array(["a", "b"], pa.large_string()),
        }
    )
    d = R.decode_batch(R.encode_batch(minimal, base_offset=3, impl=impl), impl=impl)
    assert as_tuples(d.records) == [(3, 1, None, b"a", []), (4, 2, None, b"b", [])]
    table = pa.Table.from_batches([make_rows(SAMPLE[:2]), make_rows(SAMPLE[2:])])
    d = R.decode_batch(R.encode_batch(table, base_offset=100, impl=impl), impl=impl)
    assert as_tuples(d.records) == as_tuples(make_rows(SAMPLE))


def test_encode_rejects_bad_input(impl):
    with pytest.raises(ValueError, match="int32"):
        R.encode_batch(make_rows(SAMPLE), base_offset=100 - 2**31, impl=impl)
    null_key_header = pa.RecordBatch.from_arrays(
        [
            pa.array([1], pa.int64()),
            pa.array([1], pa.timestamp("ms")),
            pa.array([None], pa.binary()),
            pa.array([None], pa.binary()),
            pa.array([[{"key": None, "value": b"x"}]], HEADERS_TYPE),
        ],
        schema=R.RECORD_SCHEMA,
    )
    with pytest.raises(ValueError, match="header key"):
        R.encode_batch(null_key_header, base_offset=1, impl=impl)


def test_null_header_list_encodes_as_no_headers(impl):
    rows = make_rows(SAMPLE[:2])
    rows = rows.set_column(4, "headers", pa.array([None, [{"key": "a", "value": b"1"}]], HEADERS_TYPE))
    d = R.decode_batch(R.encode_batch(rows, base_offset=100, impl=impl), impl=impl)
    assert d.records.column("headers").to_pylist() == [[], [{"key": "a", "value": b"1"}]]


# ---------------------------------------------------------------- codecs


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_codec_roundtrip_in_batches(impl, codec):
    rows = make_rows(SAMPLE)
    buf = R.encode_batch(rows, base_offset=100, compression=codec, impl=impl)
    h = R.parse_header(buf)
    assert h.compression == C.CODEC_IDS[codec]
    assert as_tuples(R.decode_batch(buf, impl=impl).records) == as_tuples(rows)


PAYLOAD = b"".join(b"record %d with some repeated text; " % i for i in range(5000))


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compress_decompress(codec):
    packed = C.compress(codec, PAYLOAD)
    assert len(packed) < len(PAYLOAD)
    assert C.decompress(codec, packed, len(PAYLOAD)) == PAYLOAD
    assert C.decompress(codec, C.compress(codec, b""), 10) == b""
    with pytest.raises(RecordBatchTooLarge):
        C.decompress(codec, packed, len(PAYLOAD) - 1)


def test_snappy_xerial_framing_and_raw_detection():
    packed = C.compress("snappy", PAYLOAD)
    assert packed[:16] == b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"
    (first_block,) = struct.unpack_from(">i", packed, 16)
    assert first_block < C.XERIAL_BLOCK_SIZE  # 32 KiB blocks as snappy-java writes
    raw = bytes(cramjam.snappy.compress_raw(PAYLOAD))
    assert C.decompress("snappy", raw, len(PAYLOAD)) == PAYLOAD
    little_endian_versions = b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1) + packed[16:]
    assert C.decompress("snappy", little_endian_versions, len(PAYLOAD)) == PAYLOAD


def test_other_framings_decoded():
    # gzip with several members, zstd without a declared size (as Java's streaming writer produces),
    # lz4 with a declared content size and block checksums.
    c1 = zlib.compressobj(6, zlib.DEFLATED, 31)
    c2 = zlib.compressobj(6, zlib.DEFLATED, 31)
    gz = c1.compress(PAYLOAD[:1000]) + c1.flush() + c2.compress(PAYLOAD[1000:]) + c2.flush()
    assert C.decompress("gzip", gz, len(PAYLOAD)) == PAYLOAD
    zs = zstandard.ZstdCompressor(write_content_size=False).compress(PAYLOAD)
    assert C.decompress("zstd", zs, len(PAYLOAD)) == PAYLOAD
    assert C.decompress("zstd", zs + zs, 2 * len(PAYLOAD)) == PAYLOAD * 2
    l4 = lz4.frame.compress(PAYLOAD, store_size=True, block_checksum=True, block_linked=True)
    assert C.decompress("lz4", l4, len(PAYLOAD)) == PAYLOAD


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_bomb_is_bounded(codec):
    bomb = C.compress(codec, b"\0" * 50_000_000)
    assert len(bomb) < 3_000_000
    with pytest.raises(RecordBatchTooLarge):
        C.decompress(codec, bomb, 1_000_000)
    zs = zstandard.ZstdCompressor(write_content_size=False).compress(b"\0" * 50_000_000)
    with pytest.raises(RecordBatchTooLarge):
        C.decompress("zstd", zs, 1_000_000)


def test_compression_bomb_in_a_batch_raises_too_large():
    rows = make_rows([{"offset": 0, "timestamp": 0, "key": None, "value": b"\0" * 5_000_000, "headers": []}])
    buf = R.encode_batch(rows, base_offset=0, compression="zstd")
    with pytest.raises(RecordBatchTooLarge):
        R.decode_batch(buf, max_uncompressed_bytes=1_000_000)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_corrupt_compressed_data_is_a_protocol_error(codec):
    packed = bytearray(C.compress(codec, PAYLOAD))
    for cut in (packed[: len(packed) // 2], packed[:5], b"garbage!" * 3):
        try:
            out = C.decompress(codec, bytes(cut), len(PAYLOAD))
        except ProtocolError:
            continue
        assert out != PAYLOAD  # a silently short stream is rejected by the record walk


def test_unknown_codec():
    with pytest.raises(ValueError):
        C.compress(5, b"x")
    with pytest.raises(ValueError):
        C.codec_id("brotli")


# ---------------------------------------------------------------- control records


def test_control_batch_roundtrip():
    for commit in (True, False):
        buf = R.encode_control_batch(
            base_offset=77,
            producer_id=9,
            producer_epoch=2,
            commit=commit,
            coordinator_epoch=11,
            timestamp_ms=1234,
            partition_leader_epoch=3,
        )
        d = R.decode_batch(buf)
        h = d.header
        assert h.is_control and h.is_transactional and h.record_count == 1 and h.base_offset == 77
        assert (h.producer_id, h.producer_epoch, h.base_sequence, h.partition_leader_epoch) == (9, 2, -1, 3)
        row = d.records.to_pylist()[0]
        assert row["key"] == struct.pack(">hh", 0, int(commit))
        assert row["value"] == struct.pack(">hi", 0, 11)
        rec = R.parse_control_record(row["key"], row["value"])
        assert rec == (0, R.ControlType.COMMIT if commit else R.ControlType.ABORT, 11)
        assert rec.is_commit is commit and rec.is_abort is (not commit)


def test_parse_control_record_errors():
    with pytest.raises(CorruptRecordBatch):
        R.parse_control_record(b"\x00", None)
    with pytest.raises(CorruptRecordBatch):
        R.parse_control_record(struct.pack(">hh", 0, 1), b"\x00")
    assert R.parse_control_record(struct.pack(">hh", 0, 2), b"anything").coordinator_epoch is None


# ---------------------------------------------------------------- malformed record sections


def varint(v: int) -> bytes:
    u = ((v << 1) ^ (v >> 63)) & (2**64 - 1)
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def record(body: bytes) -> bytes:
    return varint(len(body)) + body


GOOD_BODY = b"\x00" + varint(0) + varint(0) + varint(1) + b"k" + varint(1) + b"v" + varint(0)


@pytest.mark.parametrize(
    "section,count,match",
    [
        (record(GOOD_BODY) + b"\x00", 1, "left after"),
        (record(GOOD_BODY)[:-1], 1, "past end|truncated"),
        (record(GOOD_BODY + b"\x00"), 1, "does not match"),
        (
            record(b"\x00" + varint(0) + varint(0) + varint(-1) + varint(-1) + varint(-1)),
            1,
            "negative header",
        ),
        (
            record(
                b"\x00"
                + varint(0)
                + varint(0)
                + varint(-1)
                + varint(-1)
                + varint(1)
                + varint(-1)
                + varint(-1)
            ),
            1,
            "null header key",
        ),
        (
            record(
                b"\x00"
                + varint(0)
                + varint(0)
                + varint(-1)
                + varint(-1)
                + varint(1)
                + varint(2)
                + b"\xc3\x28"
                + varint(-1)
            ),
            1,
            "UTF-8",
        ),
        (
            record(
                b"\x00"
                + varint(0)
                + varint(0)
                + varint(-1)
                + varint(-1)
                + varint(1)
                + varint(3)
                + b"\xed\xa0\x80"
                + varint(-1)
            ),
            1,
            "UTF-8",
        ),
        (record(b"\x00" + b"\xff" * 11 + varint(0) + varint(-1) + varint(-1) + varint(0)), 1, "timestamp"),
        (record(GOOD_BODY) * 2, 3, "can hold|past end|truncated"),
        (record(GOOD_BODY), 10**9, "can hold"),
        (b"", -1, "negative"),
    ],
)
def test_malformed_sections(impl, section, count, match):
    with pytest.raises(CorruptRecordBatch, match=match):
        R.decode_records(section, count, 0, 0, impl=impl)


def test_any_negative_length_is_null_as_in_kafka(impl):
    body = (
        b"\x00" + varint(0) + varint(0) + varint(-2) + varint(-7) + varint(1) + varint(1) + b"h" + varint(-3)
    )
    rb = R.decode_records(record(body), 1, 0, 0, impl=impl)
    assert rb.to_pylist()[0]["key"] is None and rb.to_pylist()[0]["value"] is None
    assert rb.column("headers").to_pylist() == [[{"key": "h", "value": None}]]


def test_valid_utf8_header_keys_accepted(impl):
    body = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(-1) + varint(1)
    key = "aé€😀\U0010ffff".encode()
    rb = R.decode_records(record(body + varint(len(key)) + key + varint(0)), 1, 0, 0, impl=impl)
    assert rb.column("headers").to_pylist() == [[{"key": "aé€😀\U0010ffff", "value": b""}]]


def test_wrapping_arithmetic_matches(impl):
    body = b"\x00" + varint(2**62) + varint(2**31 - 1) + varint(-1) + varint(-1) + varint(0)
    rb = R.decode_records(record(body), 1, 2**63 - 1, 2**62, impl=impl)
    assert rb.column("offset").to_pylist() == [2**63 - 1 + 2**31 - 1 - 2**64]
    assert rb.column("timestamp").cast(pa.int64()).to_pylist() == [2**63 - 2**64]


# ---------------------------------------------------------------- the twins agree (hypothesis)

header_st = st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16))
value_st = st.none() | st.binary(max_size=40) | st.just(b"") | st.binary(min_size=5000, max_size=20000)
row_st = st.fixed_dictionaries(
    {
        "delta": st.integers(0, 2**31 - 1),
        "timestamp": st.integers(-(2**45), 2**45),
        "key": st.none() | st.binary(max_size=20),
        "value": value_st,
        "headers": st.lists(header_st, max_size=4),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(row_st, max_size=25),
    base=st.integers(-(2**40), 2**40),
    codec=st.sampled_from([0, 0, 2, 3, 4]),
)
def test_c_and_python_agree(rows, base, codec):
    assert R.C_IMPL is not None
    batch = make_rows([{**r, "offset": base + r["delta"]} for r in rows])
    encoded = {
        name: R.encode_batch(batch, base_offset=base, compression=codec, impl=mod)
        for name, mod in IMPLS.items()
    }
    assert encoded["c"] == encoded["python"]
    for mod in IMPLS.values():
        decoded = R.decode_batch(encoded["c"], impl=mod)
        decoded.records.validate(full=True)
        assert decoded.records.equals(R.decode_batch(encoded["c"], impl=R.PYTHON_IMPL).records)
        assert as_tuples(decoded.records) == as_tuples(batch)
    if codec == 0:
        h = R.parse_header(encoded["c"])
        again = R.encode_batch(
            R.decode_batch(encoded["c"]).records, base_offset=base, base_timestamp=h.base_timestamp
        )
        assert again == encoded["c"]


@settings(max_examples=60, deadline=None)
@given(section=st.binary(max_size=200), count=st.integers(-1, 40))
def test_c_and_python_agree_on_arbitrary_sections(section, count):
    results = []
    for mod in IMPLS.values():
        try:
            results.append(as_tuples(R.decode_records(section, count, 5, 6, impl=mod)))
        except CorruptRecordBatch:
            results.append("corrupt")
    assert results[0] == results[1]


def test_pure_python_forced_by_env():
    code = "import pylog.protocol.records as r; print(r.IMPLEMENTATION)"
    env = {**os.environ, "PYLOG_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "python"
    env.pop("PYLOG_PURE_PYTHON")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "c"
