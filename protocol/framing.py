"""Kafka framing: the int32 size prefix and the request / response headers.

Every Kafka message travels as `int32 size` + `size` bytes. `FrameReader` turns a byte stream
into whole frames for an `asyncio.BufferedProtocol`, where the socket is read straight into the
buffers it hands out; it checks each announced size against `max_frame_bytes` before it keeps a
single byte of the body, so a hostile 2 GiB prefix costs nothing. A large frame (a produce
request, a fetch response) is received into a buffer of its own, with no chunk to join.

Headers (Kafka's RequestHeader / ResponseHeader):
- request v0: api_key int16, api_version int16, correlation_id int32
- request v1: + client_id, a nullable string with an int16 length, even in flexible requests
  (so that any broker can read the header of an ApiVersions request of any version)
- request v2: + tagged fields
- response v0: correlation_id int32; v1: + tagged fields. ApiVersions responses always use v0.
"""

from __future__ import annotations

from struct import Struct
from typing import NamedTuple

from .errors import FrameTooLarge, MalformedMessage, ProtocolError

DEFAULT_MAX_FRAME_BYTES = 104857600
"""Kafka's default `socket.request.max.bytes` (100 MiB)."""

_I32 = Struct(">i")
_HHI = Struct(">hhi")
_H = Struct(">h")


def check_frame_size(size: int, max_frame_bytes: int) -> int:
    """The announced body size of a frame, refused before anything is allocated for it."""
    if size < 0:
        raise MalformedMessage(f"negative frame size {size}")
    if size > max_frame_bytes:
        raise FrameTooLarge(size=size, max_frame_bytes=max_frame_bytes)
    return size


SCRATCH_BYTES = 256 * 1024
"""What one socket read may bring of small frames (asyncio's and uvloop's own read size)."""
LARGE_FRAME_BYTES = 64 * 1024
"""From this size on a frame is received into a buffer of its own instead of the scratch."""
COMMIT_ON_WRITE_BYTES = 16 * 1024 * 1024
"""From this size on a frame's own buffer is one whose pages the kernel provides as they are
written, so a prefix that announces a huge frame costs no memory until its bytes arrive."""


def _frame_buffer(size: int) -> memoryview:
    """A writable buffer for a large frame: an uninitialised malloc block (NumPy's ``empty``),
    whose pages malloc reuses from frame to frame and which the socket fills without a zeroing
    pass first (a bytearray's would cost as much user CPU as a replica's CRC check), or past
    ``COMMIT_ON_WRITE_BYTES`` an uninitialised Arrow allocation."""
    if size < COMMIT_ON_WRITE_BYTES:
        import numpy as np

        return np.empty(size, np.uint8).data
    import pyarrow as pa

    return memoryview(pa.allocate_buffer(size)).cast("B")


class FrameReader:
    """Split a byte stream into Kafka frames for an ``asyncio.BufferedProtocol``.

    Theory of operation: the socket reads into what ``get_buffer`` returns, and
    ``buffer_updated(n)`` returns the frames that completed. Between frames, reads land in a
    scratch buffer; each whole small frame found there is copied out (one copy, as a ``bytes``
    chunk would have cost) and the scratch is reused. Once a size prefix announces a frame of
    ``LARGE_FRAME_BYTES`` or more that is not all there yet, it gets a buffer of its own of
    exactly that size (after the bound check, not zeroed first), what the scratch holds of it
    moves there, and later reads fill it directly until it is complete (past
    ``COMMIT_ON_WRITE_BYTES`` that buffer's memory is only committed as the bytes arrive). Large
    frames are writable, so their owner may patch them in place. A bad prefix is raised at once
    unless frames precede it in the same read: they are returned first and ``raise_pending``
    raises it afterwards (Kafka serves them first too).
    """

    __slots__ = ("_end", "_error", "_filled", "_frame", "_max", "_scratch", "_start", "_view")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._max = max_frame_bytes
        self._scratch = bytearray(SCRATCH_BYTES)
        self._view = memoryview(self._scratch)
        self._start = 0  # unparsed bytes are scratch[start:end]
        self._end = 0
        self._frame: memoryview | None = None  # a large frame being filled
        self._filled = 0
        self._error: ProtocolError | None = None

    @property
    def max_frame_bytes(self) -> int:
        return self._max

    @max_frame_bytes.setter
    def max_frame_bytes(self, value: int) -> None:
        """A new bound for size prefixes read from now on."""
        self._max = value

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for an incomplete frame (at most the announced frame size, plus a prefix)."""
        return self._filled if self._frame is not None else self._end - self._start

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the next bytes read from the socket go."""
        if self._frame is not None:
            return self._frame[self._filled :]
        if self._end - self._start == 0:
            self._start = self._end = 0
        elif len(self._scratch) - self._end < LARGE_FRAME_BYTES + 4:
            held = self._end - self._start  # a small frame's beginning (or a prefix): move it up
            self._view[:held] = self._view[self._start : self._end]
            self._start, self._end = 0, held
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> list[memoryview]:
        """``nbytes`` were written into the last buffer handed out; the frames now complete."""
        if self._error is not None:
            raise self._error
        frame = self._frame
        if frame is not None:
            self._filled += nbytes
            if self._filled < len(frame):
                return []
            self._frame = None
            self._filled = 0
            return [frame]
        self._end += nbytes
        out: list[memoryview] = []
        try:
            self._split(out)
        except ProtocolError as exc:
            self._error = exc
            if not out:
                raise
        return out

    def raise_pending(self) -> None:
        """Raise the error found behind frames already returned, if any."""
        if self._error is not None:
            raise self._error

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        """Copy ``data`` in as socket reads would (for tests and non-buffered callers)."""
        src = memoryview(data).cast("B")
        out: list[memoryview] = []
        pos = 0
        while pos < len(src):
            buf = self.get_buffer()
            take = min(len(buf), len(src) - pos)
            buf[:take] = src[pos : pos + take]
            pos += take
            out.extend(self.buffer_updated(take))
        return out

    def _split(self, out: list[memoryview]) -> None:
        view = self._view
        start, end = self._start, self._end
        try:
            while end - start >= 4:
                size = check_frame_size(_I32.unpack_from(view, start)[0], self._max)
                if end - start - 4 >= size:
                    body = view[start + 4 : start + 4 + size]
                    out.append(memoryview(bytearray(body) if size >= LARGE_FRAME_BYTES else bytes(body)))
                    start += 4 + size
                    continue
                if size >= LARGE_FRAME_BYTES:
                    frame = _frame_buffer(size)
                    have = end - start - 4
                    frame[:have] = view[start + 4 : end]
                    self._frame, self._filled = frame, have
                    start = end
                break
        finally:
            if start == end:
                start = end = 0
            self._start, self._end = start, end


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int = 1


def skip_tagged_fields(buf: memoryview, pos: int, end: int) -> int:
    """Skip a tagged-field section (count, then tag / size / payload triples); return the new position."""
    count, pos = read_uvarint(buf, pos, end)
    if count > (end - pos) // 2:
        raise MalformedMessage(f"{count} tagged fields cannot fit in {end - pos} bytes")
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos, end)
        size, pos = read_uvarint(buf, pos, end)
        if size > end - pos:
            raise MalformedMessage(f"tagged field of {size} bytes exceeds the {end - pos} remaining")
        pos += size
    return pos


def read_uvarint(buf: memoryview | bytes, pos: int, end: int) -> tuple[int, int]:
    """Read an unsigned varint of at most 5 bytes (Kafka's `readUnsignedVarint`)."""
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise MalformedMessage("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift >= 35:
            raise MalformedMessage("varint is longer than 5 bytes")


def write_uvarint(value: int) -> bytes:
    """Encode an unsigned varint (values up to 2**32 - 1)."""
    if value < 0x80:
        return _UV1[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_UV1 = [bytes((i,)) for i in range(128)]


def decode_request_header(frame: memoryview, flexible_from: int | None) -> tuple[RequestHeader, int]:
    """Parse a request header v1 (v2 when `api_version >= flexible_from`); return it and the body offset.

    `flexible_from` is the API's first flexible version (None: never flexible / unknown API).
    The header of an ApiVersions request of any version parses, whatever the body holds.
    """
    end = len(frame)
    if end < 10:
        raise MalformedMessage(f"request header needs at least 10 bytes, frame has {end}")
    api_key, api_version, correlation_id = _HHI.unpack_from(frame, 0)
    n = _H.unpack_from(frame, 8)[0]
    pos = 10
    if n < 0:
        client_id = None
    else:
        if n > end - pos:
            raise MalformedMessage(f"client id of {n} bytes exceeds the frame")
        client_id = str(frame[pos : pos + n], "utf-8", "replace")
        pos += n
    version = 1
    if flexible_from is not None and api_version >= flexible_from:
        version = 2
        pos = skip_tagged_fields(frame, pos, end)
    return RequestHeader(api_key, api_version, correlation_id, client_id, version), pos


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, header_version: int
) -> bytes:
    """Request header bytes for header version 0, 1 or 2."""
    head = _HHI.pack(api_key, api_version, correlation_id)
    if header_version == 0:
        return head
    if client_id is None:
        head += b"\xff\xff"
    else:
        raw = client_id.encode("utf-8")
        if len(raw) > 0x7FFF:
            raise ValueError("client id longer than 32767 bytes")
        head += _H.pack(len(raw)) + raw
    if header_version >= 2:
        head += b"\x00"
    return head


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    """Response header bytes for header version 0 or 1."""
    return _I32.pack(correlation_id) + (b"\x00" if header_version >= 1 else b"")


def decode_response_header(frame: memoryview, header_version: int) -> tuple[int, int]:
    """Parse a response header; return (correlation_id, body offset)."""
    end = len(frame)
    if end < 4:
        raise MalformedMessage("response shorter than its header")
    correlation_id = _I32.unpack_from(frame, 0)[0]
    pos = 4
    if header_version >= 1:
        pos = skip_tagged_fields(frame, pos, end)
    return correlation_id, pos
