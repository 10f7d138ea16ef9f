"""LZ4 frames: the one-call path (bounded from the block headers) agrees with the streaming path."""

from __future__ import annotations

import lz4.frame
import pytest
from pylog.protocol.errors import CorruptRecordBatch, RecordBatchTooLarge
from pylog.protocol.records import compression as C

PAYLOAD = b"".join(b"record %08d " % i * 7 for i in range(20_000))


def frames(data: bytes) -> list[bytes]:
    out = []
    for block_size in (lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX1MB, lz4.frame.BLOCKSIZE_MAX4MB):
        for store_size in (False, True):
            for checksums in (False, True):
                out.append(
                    lz4.frame.compress(
                        data,
                        block_size=block_size,
                        store_size=store_size,
                        block_checksum=checksums,
                        content_checksum=checksums,
                        block_linked=False,
                    )
                )
    return out


@pytest.mark.parametrize("data", [b"", b"x", PAYLOAD, bytes(range(256)) * 300])
def test_every_frame_layout_takes_the_bounded_path_and_round_trips(data: bytes) -> None:
    for frame in frames(data):
        bound = C._lz4_frame_bound(memoryview(frame))
        assert bound is not None and bound >= len(data)
        assert C.decompress(C.LZ4, frame, max(bound, 1)) == data


def test_frame_bound_refuses_what_is_not_exactly_one_frame() -> None:
    frame = frames(PAYLOAD)[0]
    assert C._lz4_frame_bound(memoryview(frame + b"\0")) is None
    assert C._lz4_frame_bound(memoryview(frame[:-1])) is None
    assert C._lz4_frame_bound(memoryview(b"\0" * 16)) is None
    with pytest.raises(CorruptRecordBatch):
        C.decompress(C.LZ4, frame + b"trailing", 1 << 26)
    with pytest.raises(CorruptRecordBatch):
        C.decompress(C.LZ4, frame[:-3], 1 << 26)


def test_limit_below_the_bound_still_streams_and_stops_at_max_bytes() -> None:
    frame = frames(PAYLOAD)[0]
    assert C.decompress(C.LZ4, frame, len(PAYLOAD)) == PAYLOAD  # bound > limit: streaming path
    with pytest.raises(RecordBatchTooLarge):
        C.decompress(C.LZ4, frame, len(PAYLOAD) - 1)


def test_declared_content_size_smaller_than_the_data_is_corrupt() -> None:
    frame = bytearray(lz4.frame.compress(PAYLOAD[:1000], store_size=True, content_checksum=False))
    frame[6:14] = (10).to_bytes(8, "little")  # the header checksum byte is not verified by the bound
    with pytest.raises(CorruptRecordBatch):
        C.decompress(C.LZ4, bytes(frame), 1 << 26)
