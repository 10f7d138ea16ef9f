"""The C accelerator's Arrow C data interface decode agrees with the buffers + from_buffers path."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from pylog.protocol import records as R
from pylog.protocol.records import batch as B


def test_the_accelerator_has_the_arrow_entry_point() -> None:
    assert B._c_arrow is not None, "rebuild the C accelerator: pip install --no-deps -e ."

HEADERS = R.RECORD_SCHEMA.field("headers").type


def random_batch(rng: random.Random, n: int) -> pa.RecordBatch:
    keys = [None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 20)) for _ in range(n)]
    values = [None if rng.random() < 0.1 else rng.randbytes(rng.randint(0, 200)) for _ in range(n)]
    headers = [
        [
            {"key": f"h{j}", "value": None if rng.random() < 0.3 else rng.randbytes(5)}
            for j in range(rng.randint(0, 3))
        ]
        for _ in range(n)
    ]
    return pa.RecordBatch.from_pydict(
        {
            "offset": list(range(100, 100 + n)),
            "timestamp": pa.array([1000 + 3 * i for i in range(n)], pa.timestamp("ms")),
            "key": pa.array(keys, pa.binary()),
            "value": pa.array(values, pa.binary()),
            "headers": pa.array(headers, HEADERS),
        },
        schema=R.RECORD_SCHEMA,
    )


def decode_arrow(body: bytes | memoryview, n: int, importer=pa.RecordBatch._import_from_c) -> pa.RecordBatch:  # type: ignore[no-untyped-def]
    return B._c_arrow(body, n, 100, 1000, importer, R.RECORD_SCHEMA)


@pytest.mark.parametrize("n", [1, 2, 7, 100, 1000])
def test_matches_the_from_buffers_path_and_outlives_its_input(n: int) -> None:
    rng = random.Random(n)
    for _ in range(20):
        rb = random_batch(rng, n)
        wire = bytearray(R.encode_batch(rb, base_offset=100))
        section = memoryview(wire)[R.HEADER_SIZE :]
        got = decode_arrow(section, n)
        got.validate(full=True)
        ref = B.records_from_buffers(B._pyrecords.decode_records(section, n, 100, 1000), n)
        section.release()
        wire[:] = b"\0" * len(wire)  # the decoded batch owns its memory
        assert got.equals(rb) and got.equals(ref)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, R.RECORD_SCHEMA) as w:
            w.write_batch(got.slice(n // 2))
        assert pa.ipc.open_stream(sink.getvalue()).read_next_batch().equals(rb.slice(n // 2))


def section_of(n: int, seed: int) -> bytes:
    return R.encode_batch(random_batch(random.Random(seed), n), base_offset=0)[R.HEADER_SIZE :]


def test_malformed_sections_raise_value_error() -> None:
    body = section_of(5, 1)
    for cut in range(len(body)):
        with pytest.raises(ValueError):
            decode_arrow(body[:cut], 5)
    for count in (-1, 4, 6, 10**9):
        with pytest.raises(ValueError):
            decode_arrow(body, count)


def test_a_failing_importer_gets_its_exception_through_and_the_array_is_released() -> None:
    body = section_of(50, 2)

    def refuse(address: int, schema: pa.Schema) -> None:
        raise RuntimeError("refused")

    for _ in range(100):
        with pytest.raises(RuntimeError, match="refused"):
            decode_arrow(body, 50, refuse)
    with pytest.raises(pa.ArrowInvalid):
        B._c_arrow(body, 50, 0, 0, pa.RecordBatch._import_from_c, pa.schema([("x", pa.int64())]))
    assert decode_arrow(body, 50).num_rows == 50
