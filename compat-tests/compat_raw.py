"""A few Kafka requests spelled out by hand, for tests that need exact bytes on a raw socket.

Only non-flexible versions are used so every field is a plain big-endian struct. Record batches
come from kafka-python's public ``DefaultRecordBatchBuilder`` (a real client's encoder).
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

API_VERSIONS, METADATA, PRODUCE, LIST_OFFSETS, INIT_PRODUCER_ID = 18, 3, 0, 2, 22


def kstr(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def kbytes(b: bytes | None) -> bytes:
    if b is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(b)) + b


def header(api_key: int, version: int, correlation_id: int, client_id: str | None = "raw") -> bytes:
    """Request header v1 (non-flexible)."""
    return struct.pack(">hhi", api_key, version, correlation_id) + kstr(client_id)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> tuple[int, ...]:
        vals = struct.unpack_from(">" + fmt, self.data, self.pos)
        self.pos += struct.calcsize(">" + fmt)
        return vals

    def i8(self) -> int:
        return self.take("b")[0]

    def i16(self) -> int:
        return self.take("h")[0]

    def i32(self) -> int:
        return self.take("i")[0]

    def i64(self) -> int:
        return self.take("q")[0]

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s


class Closed(Exception):
    """The broker closed the connection."""


class RawConn:
    """A blocking socket speaking length-prefixed frames."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.next_id = 1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError:
                raise Closed("connection reset") from None
            if not chunk:
                raise Closed(f"EOF after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._recv_exact(4))
        return self._recv_exact(size)

    def outcome(self) -> tuple[str, bytes | None]:
        """After bad input: ("closed", None) or ("frame", payload); a silent open socket raises."""
        try:
            return "frame", self.recv_frame()
        except Closed:
            return "closed", None
        except TimeoutError:
            raise AssertionError("the broker neither answered nor closed the connection") from None

    def request(self, api_key: int, version: int, body: bytes) -> Reader:
        """Send one request and return a reader positioned after the response's correlation id."""
        cid = self.next_id
        self.next_id += 1
        self.send(frame(header(api_key, version, cid) + body))
        r = Reader(self.recv_frame())
        got = r.i32()
        assert got == cid, f"correlation id {got} != {cid}"
        return r


@dataclass
class ApiVersionsResult:
    error_code: int
    versions: dict[int, tuple[int, int]]


def api_versions(conn: RawConn, version: int = 0) -> ApiVersionsResult:
    """ApiVersions v0..v2 (same body: none; response error, [key, min, max], v1+ throttle)."""
    r = conn.request(API_VERSIONS, version, b"")
    return parse_api_versions_v0(r)


def parse_api_versions_v0(r: Reader) -> ApiVersionsResult:
    err = r.i16()
    n = r.i32()
    versions = {}
    for _ in range(max(n, 0)):
        key, lo, hi = r.take("hhh")
        versions[key] = (lo, hi)
    return ApiVersionsResult(err, versions)


def init_producer_id(conn: RawConn) -> tuple[int, int, int]:
    """InitProducerId v0 for an idempotent producer: (error, producer_id, epoch)."""
    r = conn.request(INIT_PRODUCER_ID, 0, kstr(None) + struct.pack(">i", 60000))
    r.i32()  # throttle
    err = r.i16()
    pid = r.i64()
    epoch = r.i16()
    return err, pid, epoch


def record_batch(
    values: list[bytes],
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp: int = 1_600_000_000_000,
) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 20,
    )
    for i, v in enumerate(values):
        b.append(i, timestamp=timestamp + i, key=None, value=v, headers=[])
    return bytes(b.build())


@dataclass
class ProducePartitionResult:
    error_code: int
    base_offset: int


def produce(
    conn: RawConn, topic: str, partition: int, records: bytes, *, acks: int = -1, version: int = 3
) -> ProducePartitionResult:
    """Produce v3..v8 (non-flexible) with one topic partition."""
    body = (
        kstr(None)
        + struct.pack(">hi", acks, 30000)
        + struct.pack(">i", 1)
        + kstr(topic)
        + struct.pack(">i", 1)
        + struct.pack(">i", partition)
        + kbytes(records)
    )
    r = conn.request(PRODUCE, version, body)
    assert r.i32() == 1
    assert r.string() == topic
    assert r.i32() == 1
    assert r.i32() == partition
    err = r.i16()
    base = r.i64()
    return ProducePartitionResult(err, base)


def list_offset(conn: RawConn, topic: str, partition: int, timestamp: int = -1) -> tuple[int, int]:
    """ListOffsets v1: (error, offset) for latest (-1), earliest (-2) or a timestamp."""
    body = (
        struct.pack(">ii", -1, 1)
        + kstr(topic)
        + struct.pack(">i", 1)
        + struct.pack(">iq", partition, timestamp)
    )
    r = conn.request(LIST_OFFSETS, 1, body)
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    r.i32()
    err = r.i16()
    r.i64()  # timestamp
    off = r.i64()
    return err, off
