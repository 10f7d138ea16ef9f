"""Format 2 ("one copy") segments: Arrow readers see exactly the records, fetches get the producer's bytes.

Batches come from pylog's encoder, from kafka-python's own batch builder, from lz4 frames in every
standard variant, and from real producers (confluent-kafka, kafka-python) against a real broker.
"""

from __future__ import annotations

import base64
import os
import struct
import time
import uuid
from pathlib import Path

import duckdb
import lz4.frame
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
import zstandard
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pylog.protocol.records import decode_batch, encode_batch, encode_control_batch, iter_batches
from pylog.storage import onecopy as oc
from pylog.storage.schema import BATCH_DTYPE

from pylog.model import RECORD_SCHEMA, TIMESTAMP_TYPE_MASK
from pylog.onecopy_kafka import rows_from_kafka

HEADERS = RECORD_SCHEMA.field("headers").type
CODECS = ["none", "lz4", "zstd"]


def make_rows(n: int, *, value_size: int = 40, seed: int = 1) -> pa.RecordBatch:
    """Records with null / short / long keys, empty / null / long values, headers (null values too)."""
    rng = np.random.default_rng(seed)
    keys = [None if i % 5 == 0 else b"key-%d" % i + (b"K" * (i % 17)) for i in range(n)]
    values = [b"" if i % 7 == 3 else None if i % 11 == 4 else rng.bytes(int(rng.integers(1, value_size + 1)))
              for i in range(n)]
    headers = [[{"key": f"h{j}-{'x' * (i % 15)}", "value": None if j == 1 else rng.bytes(j * 9)}
                for j in range(i % 4)] for i in range(n)]
    return pa.RecordBatch.from_arrays(
        [pa.array(range(n), pa.int64()),
         pa.array([1_700_000_000_000 + 3 * i for i in range(n)], pa.timestamp("ms")),
         pa.array(keys, pa.binary()), pa.array(values, pa.binary()), pa.array(headers, HEADERS)],
        schema=RECORD_SCHEMA)


def produce(rows: pa.RecordBatch, codec: str, **kw: int) -> bytes:
    return encode_batch(rows, base_offset=0, compression=codec, producer_id=7, producer_epoch=2,
                        base_sequence=0, **kw)


def assigned(batch: bytes, base_offset: int, epoch: int) -> bytes:
    """The producer's batch as the log serves it: base offset and leader epoch set (outside the CRC)."""
    out = bytearray(batch)
    struct.pack_into(">q", out, 0, base_offset)
    struct.pack_into(">i", out, 12, epoch)
    return bytes(out)


def joined(chunks: list) -> bytes:
    return b"".join(bytes(c) for c in chunks)


def expected(batches: list[tuple[bytes, int]]) -> pa.Table:
    """What a reader must see: each batch decoded by pylog's codec at its assigned base offset."""
    return pa.Table.from_batches(
        [decode_batch(assigned(b, base, 0)).records for b, base in batches], schema=RECORD_SCHEMA)


def as_v1(table: pa.Table) -> pa.Table:
    return pa.Table.from_batches([oc.to_record_schema(b) for b in table.to_batches()], schema=RECORD_SCHEMA)


def write_file(path: Path, messages: list[oc.Message]) -> Path:
    path.write_bytes(joined(oc.file_chunks(messages)))
    return path


def check_readers(path: Path, want: pa.Table) -> None:
    """pyarrow (file and stream), Polars (read_ipc, scan_ipc) and DuckDB all read `want`."""
    with pa.memory_map(str(path)) as source:
        got = pa.ipc.open_file(source).read_all()
    assert got.schema.equals(oc.SCHEMA_V2, check_metadata=True)
    assert as_v1(got).equals(want)
    # the same messages as a stream (the active segment's layout)
    data = path.read_bytes()
    body = data[8:-(10 + struct.unpack_from("<i", data, len(data) - 10)[0])]
    assert as_v1(pa.ipc.open_stream(body).read_all()).equals(want)
    polars_want = pl.from_arrow(want)
    assert pl.read_ipc_stream(body).to_dicts() == polars_want.to_dicts()
    assert pl.read_ipc(path, memory_map=False).to_dicts() == polars_want.to_dicts()
    assert pl.read_ipc(path).to_dicts() == polars_want.to_dicts()
    assert pl.scan_ipc(path).collect().to_dicts() == polars_want.to_dicts()
    dataset = ds.dataset(str(path), format="arrow")  # noqa: F841 (DuckDB finds it by name)
    con = duckdb.connect()
    got_rows = con.sql("select * from dataset order by \"offset\"").fetchall()
    want_rows = con.sql("select * from want order by \"offset\"").fetchall()
    assert got_rows == want_rows and len(got_rows) == want.num_rows


@pytest.mark.parametrize("codec", CODECS)
def test_every_reader_sees_the_records_and_fetch_gets_the_producers_bytes(tmp_path: Path, codec: str) -> None:
    produced = [produce(make_rows(n, seed=n), codec) for n in (1, 20, 300)]
    bases = [100, 101, 121]
    messages = [oc.encode_message(rows_from_kafka(b, base_offset=base, partition_leader_epoch=0))
                for b, base in zip(produced, bases)]
    check_readers(write_file(tmp_path / "seg.arrow", messages), expected(list(zip(produced, bases))))
    for m, b, base in zip(messages, produced, bases):
        (fetched,) = oc.kafka_batches(joined(m.chunks))
        assert joined(fetched) == assigned(b, base, 0)
        decode_batch(joined(fetched))  # CRC valid


@pytest.mark.parametrize("codec", CODECS)
def test_one_copy_on_disk(codec: str) -> None:
    """The message body holds each records section once (aliased by every column naming it) plus
    the small columns: less than the producer's batch plus 16 bytes of views per record value."""
    rows = make_rows(500, value_size=1000)
    b = produce(rows, codec)
    m = oc.encode_message(rows_from_kafka(b, base_offset=0))
    n_views = 500 * 2 + int(pa.compute.list_value_length(rows.column(4)).to_numpy().sum()) * 2
    assert m.length < len(b) + 16 * n_views + 8 * 2 * 500 + 4096


@pytest.mark.parametrize("codec,stored", [("gzip", "zstd"), ("snappy", "lz4")])
def test_gzip_and_snappy_are_stored_with_an_arrow_codec(tmp_path: Path, codec: str, stored: str) -> None:
    b = produce(make_rows(50), codec)
    m = oc.encode_message(rows_from_kafka(b, base_offset=10, partition_leader_epoch=0,
                                          segment_compression=stored))
    check_readers(write_file(tmp_path / "s.arrow", [m]), expected([(b, 10)]))
    (fetched,) = oc.kafka_batches(joined(m.chunks))
    served = decode_batch(joined(fetched))
    assert served.header.compression == {"zstd": 4, "lz4": 3}[stored]
    assert served.records.equals(decode_batch(assigned(b, 10, 0)).records)


@pytest.mark.parametrize("segment_compression", ["none", "producer"])
def test_gzip_stored_plain_under_segment_compression_none(segment_compression: str) -> None:
    b = produce(make_rows(30), "gzip")
    m = oc.encode_message(rows_from_kafka(b, base_offset=0, segment_compression=segment_compression))
    (fetched,) = oc.kafka_batches(joined(m.chunks))
    served = decode_batch(joined(fetched))
    assert served.header.compression == 0
    assert served.records.equals(decode_batch(b).records)


def _lz4_batch(raw_batch: bytes, **frame: bool) -> bytes:
    """`raw_batch` (plain) re-framed as an lz4 batch with the given lz4 frame options."""
    section = lz4.frame.compress(raw_batch[61:], block_size=lz4.frame.BLOCKSIZE_MAX64KB, **frame)
    return _with_section(raw_batch, section, 3)


def _with_section(raw_batch: bytes, section: bytes, codec: int) -> bytes:
    head = bytearray(raw_batch[:61])
    struct.pack_into(">h", head, 21, (struct.unpack_from(">h", head, 21)[0] & ~7) | codec)
    struct.pack_into(">i", head, 8, 49 + len(section))
    out = bytes(head) + section
    return out[:17] + struct.pack(">I", crc32c(out[21:])) + out[21:]


@pytest.mark.parametrize("frame", [
    {"block_linked": False, "content_checksum": False, "store_size": False},  # Kafka's Java client
    {"block_linked": True, "content_checksum": True, "store_size": True},  # lz4's defaults
    {"block_linked": False, "block_checksum": True, "content_checksum": True, "store_size": False},
])
def test_every_standard_lz4_frame_is_read_by_arrow_polars_duckdb(tmp_path: Path, frame: dict) -> None:
    rows = make_rows(400, value_size=600)  # > 64 KiB: several lz4 blocks
    b = _lz4_batch(produce(rows, "none"), **frame)
    m = oc.encode_message(rows_from_kafka(b, base_offset=5, partition_leader_epoch=0))
    check_readers(write_file(tmp_path / "f.arrow", [m]), expected([(b, 5)]))
    assert joined(oc.kafka_batches(joined(m.chunks))[0]) == assigned(b, 5, 0)


def test_zstd_frame_without_content_size(tmp_path: Path) -> None:
    """A streamed zstd frame (as zstd-jni writes it) declares no content size."""
    plain = produce(make_rows(200), "none")
    section = zstandard.ZstdCompressor(write_content_size=False).compress(plain[61:])
    b = _with_section(plain, section, 4)
    m = oc.encode_message(rows_from_kafka(b, base_offset=0, partition_leader_epoch=0))
    check_readers(write_file(tmp_path / "z.arrow", [m]), expected([(b, 0)]))


def test_kafka_python_batches(tmp_path: Path) -> None:
    """kafka-python's own batch builder (its varints, its lz4 / zstd framing)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    produced = []
    for codec in (0, 3, 4):
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                            producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                            batch_size=1 << 20)
        for i in range(100):
            builder.append(i, timestamp=1_700_000_000_000 + i, key=None if i % 3 else b"k%d" % i,
                           value=b"v" * (i * 13), headers=[("h", b"x" * i)] if i % 2 else [])
        produced.append(bytes(builder.build()))
    messages = [oc.encode_message(rows_from_kafka(b, base_offset=100 * i, partition_leader_epoch=0))
                for i, b in enumerate(produced)]
    check_readers(write_file(tmp_path / "k.arrow", messages),
                  expected([(b, 100 * i) for i, b in enumerate(produced)]))
    for i, (m, b) in enumerate(zip(messages, produced)):
        assert joined(oc.kafka_batches(joined(m.chunks))[0]) == assigned(b, 100 * i, 0)


def test_control_batch_and_large_record(tmp_path: Path) -> None:
    control = encode_control_batch(base_offset=0, producer_id=3, producer_epoch=1, commit=True,
                                   coordinator_epoch=5, timestamp_ms=1_700_000_000_000)
    big = pa.RecordBatch.from_pylist(
        [{"offset": 0, "timestamp": 1, "key": b"big", "value": os.urandom(3 << 20), "headers": []}],
        schema=RECORD_SCHEMA)
    produced = [control, produce(big, "lz4"), produce(big, "none")]
    messages = [oc.encode_message(rows_from_kafka(b, base_offset=i, partition_leader_epoch=0))
                for i, b in enumerate(produced)]
    want = expected([(b, i) for i, b in enumerate(produced)])
    check_readers(write_file(tmp_path / "c.arrow", messages), want)
    for i, (m, b) in enumerate(zip(messages, produced)):
        assert joined(oc.kafka_batches(joined(m.chunks))[0]) == assigned(b, i, 0)


def test_log_append_time_resigns_the_batch() -> None:
    b = produce(make_rows(10), "lz4")
    m = oc.encode_message(rows_from_kafka(b, base_offset=0, partition_leader_epoch=0, log_append_time=42))
    served = decode_batch(joined(oc.kafka_batches(joined(m.chunks))[0]))  # CRC checked
    assert served.header.max_timestamp == 42 and served.header.attributes & TIMESTAMP_TYPE_MASK
    got = pa.ipc.read_record_batch(joined(m.chunks), oc.SCHEMA_V2)
    assert got.column(1).cast(pa.int64()).to_pylist() == [42] * 10


def test_non_minimal_varints_are_re_encoded() -> None:
    """A record whose key length is a 2-byte varint for 3 (legal, no client writes it)."""
    plain = produce(pa.RecordBatch.from_pylist(
        [{"offset": 0, "timestamp": 5, "key": b"abc", "value": b"v" * 20, "headers": []}],
        schema=RECORD_SCHEMA),
        "none")
    section = bytearray(plain[61:])
    # record: length, attributes, ts delta, offset delta, key length (zigzag 3 = 6) ...
    assert section[4] == 6
    section[4:5] = b"\x86\x00"
    section[0] += 2  # the record length (zigzag): one byte more
    b = _with_section(plain, bytes(section), 0)
    assert decode_batch(b).records.equals(decode_batch(plain).records)
    m = oc.encode_message(rows_from_kafka(b, base_offset=0))
    got = pa.ipc.read_record_batch(joined(m.chunks), oc.SCHEMA_V2)
    assert oc.to_record_schema(got).equals(decode_batch(plain).records)
    assert joined(oc.kafka_batches(joined(m.chunks))[0]) == plain


def test_sealing_merges_batches_without_touching_sections(tmp_path: Path) -> None:
    """Small appended messages (plain and lz4) become one compressed message with one variadic
    buffer per section; every batch still fetches byte for byte."""
    produced = [produce(make_rows(n, seed=n), codec) for n, codec in ((3, "none"), (40, "lz4"), (1, "lz4"),
                                                                     (25, "none"))]
    bases = list(np.cumsum([0, 3, 40, 1])[:4] + 1000)
    appended = [oc.encode_message(rows_from_kafka(b, base_offset=int(base), partition_leader_epoch=0))
                for b, base in zip(produced, bases)]
    stored = [oc.rows_from_message(joined(m.chunks)) for m in appended]
    merged = oc.encode_message(oc.concat_rows(stored))
    check_readers(write_file(tmp_path / "m.arrow", [merged]), expected(list(zip(produced, bases))))
    fetched = oc.kafka_batches(joined(merged.chunks))
    assert [joined(f) for f in fetched] == [assigned(b, int(base), 0) for b, base in zip(produced, bases)]
    entries = oc.parse_message(joined(merged.chunks)).entries
    assert entries["row"].tolist() == [0, 3, 43, 44]


def test_one_message_cannot_mix_lz4_and_zstd() -> None:
    a = rows_from_kafka(produce(make_rows(3), "lz4"), base_offset=0)
    b = rows_from_kafka(produce(make_rows(3), "zstd"), base_offset=3)
    with pytest.raises(ValueError, match="mix codecs"):
        oc.encode_message(oc.concat_rows([a, b]))


record = st.fixed_dictionaries({
    "key": st.none() | st.binary(max_size=40),
    "value": st.none() | st.binary(max_size=300),
    "headers": st.lists(st.fixed_dictionaries({"key": st.text(max_size=20),
                                               "value": st.none() | st.binary(max_size=30)}), max_size=3),
    "ts": st.integers(-1, 2**41),
    "gap": st.integers(0, 3),
})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.tuples(st.lists(record, min_size=1, max_size=30), st.sampled_from(CODECS)),
                        min_size=1, max_size=4))
def test_random_batches_round_trip(tmp_path: Path, batches: list) -> None:
    produced, bases, base = [], [], 0
    for recs, codec in batches:
        offsets = np.cumsum([0] + [r["gap"] for r in recs[1:]]) + np.arange(len(recs))
        rows = pa.RecordBatch.from_arrays(
            [pa.array(offsets.tolist(), pa.int64()), pa.array([r["ts"] for r in recs], pa.timestamp("ms")),
             pa.array([r["key"] for r in recs], pa.binary()),
             pa.array([r["value"] for r in recs], pa.binary()),
             pa.array([r["headers"] for r in recs], HEADERS)], schema=RECORD_SCHEMA)
        produced.append(produce(rows, codec))
        bases.append(base)
        base += int(offsets[-1]) + 1
    appended = [rows_from_kafka(b, base_offset=o, partition_leader_epoch=0) for b, o in zip(produced, bases)]
    first = next((r.kafka_codec for r in appended if r.kafka_codec), 0)
    keep = [i for i, r in enumerate(appended) if r.kafka_codec in (0, first)]  # one message, one codec
    messages = [oc.encode_message(r) for r in appended]
    path = write_file(tmp_path / f"{uuid.uuid4().hex}.arrow", messages)
    with pa.memory_map(str(path)) as source:
        got = pa.ipc.open_file(source).read_all()
    want = expected(list(zip(produced, bases)))
    assert as_v1(got).equals(want)
    assert pl.read_ipc(path, memory_map=False).to_dicts() == pl.from_arrow(want).to_dicts()
    for m, b, o in zip(messages, produced, bases):
        assert joined(oc.kafka_batches(joined(m.chunks))[0]) == assigned(b, o, 0)
    concat = oc.concat_rows([oc.rows_from_message(joined(oc.encode_message(r).chunks))
                             for r in (appended[i] for i in keep)])
    merged = oc.encode_message(concat)
    assert [joined(f) for f in oc.kafka_batches(joined(merged.chunks))] == [
        assigned(produced[i], bases[i], 0) for i in keep]
    for r in [*appended, concat]:
        check_layouts(r)


def check_layouts(rows: oc.Rows) -> None:
    """The accelerator lays a message's small buffers out exactly as its pure-Python twin."""
    assert oc._c_layout is not None
    sizes = np.array([len(s) for s in rows.sections], np.int64)
    for prefix in (False, True):
        assert oc._layout_c(rows, sizes, prefix) == oc._layout_py(rows, sizes, prefix)


def wire_records(path: Path) -> int:
    return sum(h.record_count for h, _ in iter_batches(path.read_bytes() if path.exists() else b""))


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_real_producers_batches(tmp_path: Path, client: str) -> None:
    """Batches exactly as real clients sent them to a real broker (its active segment's `.wire`
    keeps the producer's bytes): stored one copy, read by every reader, fetched byte for byte."""
    from kafka.admin import KafkaAdminClient, NewTopic

    import pylog

    batches: list[tuple[bytes, int]] = []
    with pylog.LocalBroker() as broker:
        # created before the first send: a producer racing the auto-creation of its topic may give
        # up on a batch (kafka-python drops it once its retries are spent)
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            # in format 1, whose active segment's `.wire` is where this test reads the producers' bytes
            admin.create_topics([NewTopic(f"onecopy-{c}", 1, 1, topic_configs={"pylog.segment.format": "1"})
                                 for c in ("lz4", "zstd", "none")])
        finally:
            admin.close()
        for t, codec in enumerate(("lz4", "zstd", "none")):
            topic = f"onecopy-{codec}"
            values = [os.urandom(8) + b"payload-%d " % i * (20 + i % 50) for i in range(300)]  # compressible
            if client == "confluent-kafka":
                from confluent_kafka import Producer

                p = Producer({"bootstrap.servers": broker.bootstrap_servers, "compression.type": codec,
                              "linger.ms": 50, "enable.idempotence": True})
                for i, v in enumerate(values):
                    p.produce(topic, key=b"key-%d" % i if i % 2 else None, value=v,
                              headers=[("h", b"%d" % i)])
                assert p.flush(30) == 0
            else:
                from kafka import KafkaProducer

                p = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, compression_type=None
                                  if codec == "none" else codec, linger_ms=50)
                sent = [p.send(topic, key=b"key-%d" % i if i % 2 else None, value=v,
                               headers=[("h", b"%d" % i)]) for i, v in enumerate(values)]
                p.flush(30)
                for future in sent:
                    future.get(30)  # a refused batch fails here, with the broker's error
                p.close()
            wire = broker.data_dir / f"{topic}-0" / "00000000000000000000.wire"
            deadline = time.monotonic() + 20
            while wire_records(wire) < 300:
                assert time.monotonic() < deadline, f"{wire} holds fewer than 300 records"
                time.sleep(0.1)
            shift = 10_000 * t  # each topic's offsets start at 0: store them apart
            batches += [(bytes(b), h.base_offset + shift) for h, b in iter_batches(wire.read_bytes())]
    assert {h.compression for h, _ in iter_batches(b"".join(b for b, _ in batches))} == {0, 3, 4}
    messages = [oc.encode_message(rows_from_kafka(b, base_offset=o)) for b, o in batches]
    check_readers(write_file(tmp_path / "real.arrow", messages), expected(batches))
    for m, (b, o) in zip(messages, batches):
        epoch = struct.unpack_from(">i", b, 12)[0]
        assert joined(oc.kafka_batches(joined(m.chunks))[0]) == assigned(b, o, epoch)


def test_pyarrow_alone_finds_batches_and_sections(tmp_path: Path) -> None:
    """FORMAT.md's recipe: custom metadata from the file reader, plain sections as value buffers."""
    produced = [produce(make_rows(n, seed=n), "none") for n in (4, 9)]
    rows = oc.concat_rows([rows_from_kafka(b, base_offset=o, partition_leader_epoch=0)
                           for b, o in zip(produced, (0, 4))])
    path = write_file(tmp_path / "p.arrow", [oc.encode_message(rows)])
    reader = pa.ipc.open_file(str(path))
    batch, custom = reader.get_batch_with_custom_metadata(0)
    entries = np.frombuffer(base64.b64decode(custom[b"pylog.batches"]), BATCH_DTYPE)
    crcs = np.frombuffer(base64.b64decode(custom[b"pylog.crcs"]), "<u4")
    assert entries["base_offset"].tolist() == [0, 4] and entries["row"].tolist() == [0, 4]
    for i, b in enumerate(produced):
        assert batch.column("value").buffers()[2 + i].to_pybytes() == b[61:]
        assert int(crcs[i]) == struct.unpack_from(">I", b, 17)[0]


def test_a_format_1_message_is_refused_clearly() -> None:
    from pylog.storage.ipc import encode_message

    v1 = encode_message(decode_batch(produce(make_rows(3), "none")).records, b"")
    with pytest.raises(ValueError, match="not a format 2"):
        oc.kafka_batches(v1.to_pybytes())


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_corrupt_batches_are_refused_with_the_codecs_errors(codec: str) -> None:
    from pylog.protocol.errors import CorruptRecordBatch

    b = bytearray(produce(make_rows(20), codec))
    b[61] ^= 0x7F  # the first record's length varint, or the lz4 frame's magic
    with pytest.raises(CorruptRecordBatch, match="CRC"):
        rows_from_kafka(bytes(b), base_offset=0)
    with pytest.raises(CorruptRecordBatch):  # MalformedRecords for plain, lz4's error for lz4
        rows_from_kafka(bytes(b), base_offset=0, verify=False)
