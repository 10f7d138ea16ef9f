"""Cross-checks against independent RecordBatch v2 implementations: kafka-python and aiokafka.

Batches their builders write (every codec, headers, null keys / values, control batches) decode to
the same records with both of our implementations, and batches we write read back identically
through their readers.
"""

from __future__ import annotations

import struct
from types import SimpleNamespace

import cramjam
import kafka.codec
import pyarrow as pa
import pytest
from aiokafka.record import default_records as aio_records
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch as KafkaBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from pylog.protocol import records as R

HEADERS_TYPE = R.RECORD_SCHEMA.field("headers").type
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
IMPLS = {"c": R.C_IMPL, "python": R.PYTHON_IMPL}

# aiokafka ships a Cython reader/builder and a pure-Python one: both are independent references.
AIO_FLAVOURS = {
    "aiokafka-cython": (aio_records.DefaultRecordBatchBuilder, aio_records.DefaultRecordBatch),
    "aiokafka-python": (aio_records._DefaultRecordBatchBuilderPy, aio_records._DefaultRecordBatchPy),
}


@pytest.fixture(autouse=True)
def kafka_python_snappy(monkeypatch):
    """kafka-python's snappy needs python-snappy: lend it cramjam's raw snappy (its xerial framing stays)."""
    shim = SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
    )
    monkeypatch.setattr(kafka.codec, "snappy", shim)


@pytest.fixture(params=["c", "python"])
def impl(request):
    mod = IMPLS[request.param]
    assert mod is not None, "the C accelerator was not built (pip install --no-deps -e .)"
    return mod


def sample_records(n: int = 40) -> list[tuple]:
    """(offset_delta, timestamp, key, value, headers): compressible; nulls, empties, unicode, one large."""
    out = []
    for i in range(n):
        key = None if i % 5 == 1 else (b"" if i % 7 == 3 else b"key-%d" % (i % 4))
        if i % 6 == 2:
            value = None
        elif i % 9 == 4:
            value = b""
        elif i == 10:
            value = b"large value " * 20000
        else:
            value = b"value %d, the same words again and again" % i
        headers = []
        if i % 3 == 0:
            headers = [("trace-id", b"abc%d" % i), ("ключ-😀", None), ("empty", b"")]
        out.append((i, 1_700_000_000_000 + (i * 37) % 1000, key, value, headers))
    return out


def rows_of(batch: pa.RecordBatch) -> list[tuple]:
    ts = batch.column("timestamp").cast(pa.int64()).to_pylist()
    off = batch.column("offset").to_pylist()
    keys = batch.column("key").to_pylist()
    values = batch.column("value").to_pylist()
    headers = batch.column("headers").to_pylist()
    return [
        (off[i], ts[i], keys[i], values[i], [(h["key"], h["value"]) for h in headers[i]])
        for i in range(batch.num_rows)
    ]


def expected(records: list[tuple], base_offset: int) -> list[tuple]:
    return [(base_offset + d, ts, k, v, list(h)) for d, ts, k, v, h in records]


def to_arrow(records: list[tuple], base_offset: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [
            pa.array([base_offset + r[0] for r in records], pa.int64()),
            pa.array([r[1] for r in records], pa.timestamp("ms")),
            pa.array([r[2] for r in records], pa.binary()),
            pa.array([r[3] for r in records], pa.binary()),
            pa.array([[{"key": k, "value": v} for k, v in r[4]] for r in records], HEADERS_TYPE),
        ],
        schema=R.RECORD_SCHEMA,
    )


def read_with(reader_cls, buf: bytes) -> list[tuple]:
    batch = reader_cls(bytes(buf))
    assert batch.validate_crc()
    return [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in batch]


# ---------------------------------------------------------------- theirs -> ours


def build_kafka_python(records, codec: int, transactional=False) -> bytes:
    b = KafkaBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=1234 if transactional else -1,
        producer_epoch=5 if transactional else -1,
        base_sequence=17 if transactional else -1,
        batch_size=1 << 24,
    )
    for delta, ts, key, value, headers in records:
        assert b.append(delta, timestamp=ts, key=key, value=value, headers=headers) is not None
    return bytes(b.build())


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_decode(impl, codec):
    records = sample_records()
    buf = build_kafka_python(records, CODECS[codec], transactional=codec == "zstd")
    base = 5_000_000_000
    buf = R.set_base_offset(buf, base)
    decoded = R.decode_batch(buf, impl=impl)
    assert decoded.header.compression == CODECS[codec]
    assert decoded.header.record_count == len(records)
    assert rows_of(decoded.records) == expected(records, base)
    assert decoded.header.is_transactional == (codec == "zstd")


def test_kafka_python_memory_records_builder(impl):
    builder = MemoryRecordsBuilder(magic=2, compression_type=3, batch_size=1 << 24)
    records = sample_records(25)
    for _delta, ts, key, value, headers in records:
        builder.append(timestamp=ts, key=key, value=value, headers=headers)
    builder.close()
    blob = builder.buffer()
    batches = list(R.iter_batches(blob))
    assert len(batches) == 1
    assert rows_of(R.decode_batch(batches[0][1], impl=impl).records) == expected(records, 0)


@pytest.mark.parametrize("flavour", AIO_FLAVOURS)
@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_batches_decode(impl, flavour, codec):
    builder_cls, _ = AIO_FLAVOURS[flavour]
    records = sample_records()
    b = builder_cls(
        magic=2,
        compression_type=CODECS[codec],
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 24,
    )
    for delta, ts, key, value, headers in records:
        assert b.append(delta, timestamp=ts, key=key, value=value, headers=headers) is not None
    buf = bytes(b.build())
    decoded = R.decode_batch(buf, impl=impl)
    assert decoded.header.compression == CODECS[codec]
    assert rows_of(decoded.records) == expected(records, 0)


def test_kafka_python_control_batch_decodes(impl):
    # kafka-python's builder writes the marker record; the control bit is a broker's to set.
    key, value = struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 42)
    buf = bytearray(build_kafka_python([(0, 99, key, value, [])], 0, transactional=True))
    struct.pack_into(">h", buf, 21, struct.unpack_from(">h", buf, 21)[0] | 0x20)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    decoded = R.decode_batch(bytes(buf), impl=impl)
    assert decoded.header.is_control and decoded.header.is_transactional
    row = decoded.records.to_pylist()[0]
    marker = R.parse_control_record(row["key"], row["value"])
    assert marker.is_commit and marker.coordinator_epoch == 42
    # and kafka-python agrees the batch is a commit marker
    (rec,) = list(KafkaBatch(bytes(buf)))
    assert rec.commit and rec.version == 0


# ---------------------------------------------------------------- ours -> theirs


READERS = {"kafka-python": KafkaBatch, **{name: classes[1] for name, classes in AIO_FLAVOURS.items()}}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_read_by_their_readers(impl, reader, codec):
    records = sample_records()
    base = 123_456
    buf = R.encode_batch(
        to_arrow(records, base),
        base_offset=base,
        compression=codec,
        producer_id=8,
        producer_epoch=1,
        base_sequence=100,
        impl=impl,
    )
    assert read_with(READERS[reader], buf) == expected(records, base)
    theirs = READERS[reader](bytes(buf))
    assert theirs.compression_type == CODECS[codec]
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (8, 1, 100)
    assert theirs.next_offset == base + len(records)


@pytest.mark.parametrize("commit", [True, False])
def test_our_control_batches_read_by_their_readers(commit):
    buf = R.encode_control_batch(
        base_offset=900, producer_id=3, producer_epoch=4, commit=commit, coordinator_epoch=7, timestamp_ms=55
    )
    kp = KafkaBatch(bytes(buf))
    assert kp.validate_crc() and kp.is_control_batch and kp.is_transactional
    (rec,) = list(kp)
    assert rec.commit is commit and rec.abort is (not commit) and rec.offset == 900
    for _, reader_cls in AIO_FLAVOURS.values():
        batch = reader_cls(bytes(buf))
        assert batch.validate_crc() and batch.is_control_batch
        (rec,) = list(batch)
        assert rec.key == struct.pack(">hh", 0, int(commit))
        assert rec.value == struct.pack(">hi", 0, 7)


def test_multi_batch_blob_through_memory_records(impl):
    parts = [
        R.encode_batch(to_arrow(sample_records(10), base), base_offset=base, compression=codec, impl=impl)
        for base, codec in ((0, "none"), (10, "lz4"), (20, "snappy"))
    ]
    mr = MemoryRecords(b"".join(parts))
    seen = []
    while (batch := mr.next_batch()) is not None:
        seen += [r.offset for r in batch]
    assert seen == list(range(30))
