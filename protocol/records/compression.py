"""Kafka's record batch codecs, with decompression that never allocates past a bound.

Codec ids are Kafka's attribute bits: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd. Libraries were
picked by measurement (bench/bench_records.py, and a codec micro-benchmark on 1 MB of text):
lz4 -> the ``lz4`` package (frame format; 10x faster to compress than cramjam's), zstd -> ``zstandard``,
snappy -> ``cramjam`` (raw blocks, xerial framing done here), gzip -> stdlib ``zlib``.

Decompression is streamed in growing chunks so that a small batch costs a small buffer and a
compression bomb stops at ``max_bytes`` with RecordBatchTooLarge, never allocating far beyond it.

``decompress_records`` is ``decompress`` for a records section about to be decoded: an lz4 frame as
Kafka's clients write it (independent blocks, no checksums) is decoded by the C accelerator straight
into a buffer the record decoder reads, without the bytes object and copies of the lz4 package's
frame API. The accelerator calls the lz4 package's own block decoder (``LZ4_decompress_safe``,
exported by its extension), so it needs no lz4 headers or library at build time; without it, or
for any other frame, the lz4 package decides, with the same results.
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
import zlib
from collections.abc import Callable
from typing import Any

import cramjam
import lz4.frame
import zstandard

from ..errors import CorruptRecordBatch, RecordBatchTooLarge

try:
    from . import _crecords as _c_impl  # type: ignore[attr-defined]
except ImportError:  # no compiler at install time
    _c_impl = None

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS = {name: codec for codec, name in CODEC_NAMES.items()}

# snappy-java's SnappyOutputStream stream header: magic, version 1, minimum compatible version 1.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's default block size

_FIRST_CHUNK = 64 * 1024

Bytes = bytes | bytearray | memoryview

# zstd contexts are costly to create (about a MB at level 3) and not safe to share between threads.
_zstd_local = threading.local()


def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    cache = _zstd_local.__dict__.setdefault("compressors", {})
    comp = cache.get(level)
    if comp is None:
        comp = cache[level] = zstandard.ZstdCompressor(level=level)
    return comp


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    dctx = getattr(_zstd_local, "decompressor", None)
    if dctx is None:
        dctx = _zstd_local.decompressor = zstandard.ZstdDecompressor()
    return dctx


def codec_id(codec: int | str) -> int:
    """Accept a Kafka codec id or a `compression.type` name."""
    if isinstance(codec, str):
        try:
            return CODEC_IDS[codec.lower()]
        except KeyError:
            raise ValueError(f"unknown compression codec {codec!r}") from None
    if codec not in CODEC_NAMES:
        raise ValueError(f"unknown compression codec {codec}")
    return codec


def batch_codec(codec: int) -> int:
    """A batch's codec bits (attributes 0-2) as a known codec: a batch naming 5, 6 or 7 is corrupt
    (Kafka answers CORRUPT_MESSAGE), whichever path reads it."""
    if codec not in CODEC_NAMES:
        raise CorruptRecordBatch(f"unknown compression codec {codec}")
    return codec


def compress(codec: int | str, data: Bytes, level: int | None = None) -> bytes:
    """Compress a records section the way Kafka's own clients frame it."""
    codec = codec_id(codec)
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        c = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        # Kafka reads independent 64 KiB blocks, no content size (as the Java client writes them).
        return lz4.frame.compress(
            data,
            compression_level=0 if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    return _zstd_compressor(3 if level is None else level).compress(data)


def decompress(codec: int | str, data: Bytes, max_bytes: int) -> bytes:
    """Decompress; output past ``max_bytes`` raises RecordBatchTooLarge, bad input (an unknown
    codec id too) CorruptRecordBatch."""
    codec = codec_id(codec) if isinstance(codec, str) else batch_codec(codec)
    if codec == NONE:
        if len(data) > max_bytes:
            raise RecordBatchTooLarge(f"records section of {len(data)} bytes exceeds {max_bytes}")
        return bytes(data)
    try:
        if codec == GZIP:
            return _gzip_decompress(data, max_bytes)
        if codec == SNAPPY:
            return _snappy_decompress(data, max_bytes)
        if codec == LZ4:
            return _lz4_decompress(data, max_bytes)
        return _zstd_decompress(data, max_bytes)
    except RecordBatchTooLarge:
        raise
    except CorruptRecordBatch:
        raise
    except (zlib.error, RuntimeError, ValueError, zstandard.ZstdError, cramjam.DecompressionError) as exc:
        raise CorruptRecordBatch(f"{CODEC_NAMES[codec]} decompression failed: {exc}") from None


def _lz4_block_decoder_address() -> int:
    """Where ``LZ4_decompress_safe`` lies in the lz4 package's block extension; 0 if not found."""
    try:
        import lz4.block._block as block

        return ctypes.cast(ctypes.CDLL(block.__file__).LZ4_decompress_safe, ctypes.c_void_p).value or 0
    except (ImportError, OSError, AttributeError):
        return 0


def _c_lz4_frames() -> Callable[[Bytes, int], Any] | None:
    if _c_impl is None or os.environ.get("PYLOG_PURE_PYTHON") == "1":
        return None
    decode = getattr(_c_impl, "lz4_frame_decompress", None)  # absent from an accelerator built before it
    address = _lz4_block_decoder_address() if decode is not None else 0
    if not address:
        return None
    _c_impl.set_lz4_block_decoder(address)
    return decode


_c_lz4_frame = _c_lz4_frames()
C_LZ4_FRAMES = _c_lz4_frame is not None  # the accelerator reads Kafka's lz4 frames itself


def decompress_records(codec: int, data: Bytes, max_bytes: int, *, accelerated: bool = True) -> Bytes:
    """``decompress`` for a records section about to be decoded (any buffer, not necessarily bytes):
    an lz4 frame goes through the C accelerator when it can take it (``accelerated=False``: never,
    the pure-Python twin). Same results and errors as ``decompress``."""
    if codec == LZ4 and accelerated and _c_lz4_frame is not None:
        try:
            out = _c_lz4_frame(data, max_bytes)
        except ValueError as exc:
            raise CorruptRecordBatch(f"lz4 decompression failed: {exc}") from None
        if out is not None:
            return out
    return decompress(codec, data, max_bytes)


def _too_large(max_bytes: int) -> RecordBatchTooLarge:
    return RecordBatchTooLarge(f"records section decompresses past {max_bytes} bytes")


def _bounded(step: Callable[[int], bytes], finished: Callable[[], bool], max_bytes: int, hint: int) -> bytes:
    """Pull output through ``step(max_len)`` in growing chunks until ``finished()``; stop at max_bytes."""
    parts: list[bytes] = []
    total = 0
    chunk = min(max(hint, _FIRST_CHUNK), max_bytes + 1)
    while True:
        out = step(min(chunk, max_bytes + 1 - total))
        total += len(out)
        if total > max_bytes:
            raise _too_large(max_bytes)
        if out:
            parts.append(out)
        if finished():
            break
        if not out:
            raise CorruptRecordBatch("compressed records section is truncated")
        chunk *= 2
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _gzip_decompress(data: Bytes, max_bytes: int) -> bytes:
    # Concatenated gzip members are legal (Java's GZIPInputStream reads them all).
    state: dict[str, Any] = {"d": zlib.decompressobj(47), "pending": bytes(data)}

    def step(max_len: int) -> bytes:
        d = state["d"]
        if d.eof:
            state["d"] = d = zlib.decompressobj(47)
        src = state["pending"]
        out = d.decompress(src, max_len)
        state["pending"] = d.unused_data if d.eof else d.unconsumed_tail
        return out

    def finished() -> bool:
        d = state["d"]
        return bool(d.eof) and not state["pending"]

    return _bounded(step, finished, max_bytes, 4 * len(data))


def _read_uvarint32(data: Bytes, pos: int) -> tuple[int, int]:
    result = 0
    for i in range(5):
        if pos >= len(data):
            raise CorruptRecordBatch("truncated snappy length preamble")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            return result, pos
    raise CorruptRecordBatch("bad snappy length preamble")


def _snappy_block(block: Bytes, budget: int, max_bytes: int) -> bytes:
    size, _ = _read_uvarint32(block, 0)
    if size > budget:
        raise _too_large(max_bytes)
    out = bytes(cramjam.snappy.decompress_raw(block))
    if len(out) != size:
        raise CorruptRecordBatch("snappy block length mismatch")
    return out


def _snappy_decompress(data: Bytes, max_bytes: int) -> bytes:
    mv = memoryview(data).cast("B")
    if len(mv) < 16 or mv[:8] != XERIAL_MAGIC:
        return _snappy_block(mv, max_bytes, max_bytes)
    # Version and compatibility fields are not checked: some producers write them little-endian.
    parts = []
    total = 0
    pos = 16
    while pos < len(mv):
        if len(mv) - pos < 4:
            raise CorruptRecordBatch("truncated xerial snappy block length")
        (blen,) = struct.unpack_from(">i", mv, pos)
        pos += 4
        if blen < 0 or blen > len(mv) - pos:
            raise CorruptRecordBatch("xerial snappy block length past end")
        out = _snappy_block(mv[pos : pos + blen], max_bytes - total, max_bytes)
        total += len(out)
        parts.append(out)
        pos += blen
    return b"".join(parts)


def _xerial_compress(data: Bytes) -> bytes:
    mv = memoryview(data).cast("B")
    parts = [XERIAL_HEADER]
    for start in range(0, len(mv), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(mv[start : start + XERIAL_BLOCK_SIZE]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK_MAX = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_U32LE = struct.Struct("<I")


def _lz4_frame_bound(mv: memoryview) -> int | None:
    """Most bytes one LZ4 frame spanning exactly ``mv`` can decompress to (its declared content
    size, else blocks x block maximum), read from the frame and block headers alone; None when
    ``mv`` is not exactly one well-formed frame (the streaming path then decides)."""
    n = len(mv)
    if n < 7 or _U32LE.unpack_from(mv, 0)[0] != _LZ4_MAGIC:
        return None
    flg, bd = mv[4], mv[5]
    block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 0x07)
    if flg >> 6 != 1 or block_max is None:
        return None
    pos = 7
    content_size = None
    if flg & 0x08:
        if n < 15:
            return None
        content_size = int.from_bytes(mv[6:14], "little")
        pos += 8
    if flg & 0x01:  # dictionary id
        pos += 4
    block_checksum = 4 if flg & 0x10 else 0
    blocks = 0
    while True:
        if pos + 4 > n:
            return None
        size = _U32LE.unpack_from(mv, pos)[0]
        pos += 4
        if size == 0:  # end mark
            break
        size &= 0x7FFFFFFF
        if size > block_max:
            return None
        pos += size + block_checksum
        blocks += 1
    if flg & 0x04:  # content checksum
        pos += 4
    if pos != n:
        return None
    bound = blocks * block_max
    return bound if content_size is None else min(bound, content_size)


def _lz4_decompress(data: Bytes, max_bytes: int) -> bytes:
    mv = memoryview(data).cast("B")
    bound = _lz4_frame_bound(mv)
    if bound is not None and bound <= max_bytes:
        # The frame cannot exceed the limit: one call, no chunked pulls and joins.
        out = lz4.frame.decompress(mv)
        if len(out) > bound:
            raise CorruptRecordBatch("lz4 frame decompresses past its block bound")
        return out
    d = lz4.frame.LZ4FrameDecompressor()
    state = {"src": bytes(data)}

    def step(max_len: int) -> bytes:
        src, state["src"] = state["src"], b""
        return d.decompress(src, max_length=max_len)

    out = _bounded(step, lambda: bool(d.eof), max_bytes, 4 * len(data))
    if d.unused_data:
        raise CorruptRecordBatch("bytes after the lz4 frame")
    return out


def _zstd_decompress(data: Bytes, max_bytes: int) -> bytes:
    src = bytes(data)
    size = zstandard.frame_content_size(src)
    if size > max_bytes:
        raise _too_large(max_bytes)
    if size >= 0:
        # One frame with a declared size (librdkafka): a single exact allocation, truncation detected.
        try:
            return _zstd_decompressor().decompress(src, allow_extra_data=False)
        except zstandard.ZstdError:
            pass  # several frames, or corrupt: the streaming path below decides
    # Streaming producers (the Java client) do not declare the size. The stream reader does not
    # report a truncated frame; the record walk that follows rejects the short section.
    reader = _zstd_decompressor().stream_reader(src, read_across_frames=True)
    done = {"eof": False}

    def step(max_len: int) -> bytes:
        out = reader.read(max_len)
        if len(out) < max_len:
            done["eof"] = True
        return out

    return _bounded(step, lambda: done["eof"], max_bytes, 4 * len(src))
