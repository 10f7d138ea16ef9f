"""``ClientConnection``: the client side of one Kafka connection, sans-IO.

Theory of operation: a Kafka connection is a pipeline. The client may send request after request
without waiting; the broker answers every request in the order it received them, each response
carrying the request's correlation id. So the client needs only a queue of what it sent:
``send_request`` encodes a request under the next correlation id, appends it to the queue and
returns the bytes to write; each response frame that arrives must answer the head of the queue,
and is decoded with the API key and version that request used. A response that names another
correlation id, a frame that does not parse, or a size prefix past ``max_response_bytes`` means
the byte stream can no longer be trusted: the connection becomes broken, with an error that says
why, and every request still queued fails with it (the shell then closes the socket). A request
whose caller gave up stays queued, marked abandoned, so that the responses after it still line up;
its response is skipped undecoded.

``in_flight_bytes`` counts the encoded bytes of requests not yet answered: the shell holds a new
request back while they exceed ``max_in_flight_bytes`` (one request may always be in flight,
whatever its size), so a producer far ahead of its broker cannot queue without bound.

This module does no I/O and reads no clock; `pylog.client.protocol` drives it from asyncio.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from pylog.client.errors import ConnectionBroken
from pylog.protocol import api
from pylog.protocol.errors import FrameTooLarge, ProtocolError
from pylog.protocol.framing import FrameReader

DEFAULT_MAX_RESPONSE_BYTES = 512 * 1024 * 1024
"""The largest response frame accepted (a fetch answer is bounded by the request's max_bytes)."""
DEFAULT_MAX_IN_FLIGHT_BYTES = 64 * 1024 * 1024
"""Request bytes that may wait for their answers on one connection."""


@dataclass(slots=True)
class Pending:
    """A request sent and not yet answered."""

    correlation_id: int
    api_key: int
    api_version: int
    nbytes: int
    abandoned: bool = False


@dataclass(slots=True)
class Outgoing:
    """An encoded request, not yet queued."""

    correlation_id: int
    api_key: int
    api_version: int
    parts: list[Any]
    nbytes: int


@dataclass(slots=True)
class Response:
    """A decoded response and the request it answers."""

    correlation_id: int
    api_key: int
    api_version: int
    body: Any


class ClientConnection:
    """Correlation ids, the queue of requests in flight, and response frames."""

    def __init__(
        self,
        client_id: str | None,
        *,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_in_flight_bytes: int = DEFAULT_MAX_IN_FLIGHT_BYTES,
        peer: str = "the broker",
    ) -> None:
        self.client_id = client_id
        self.peer = peer
        self.max_in_flight_bytes = max_in_flight_bytes
        self.error: ConnectionBroken | None = None
        self._reader = FrameReader(max_response_bytes)
        self._queue: deque[Pending] = deque()
        self._next_id = 0
        self._in_flight_bytes = 0

    # --- sending ------------------------------------------------------------------------------

    def prepare_request(self, api_key: int, api_version: int, body: Any) -> Outgoing:
        """Encode a request under the next correlation id. Raises ConnectionBroken once the
        connection is broken, ValueError for a body the codec cannot encode."""
        if self.error is not None:
            raise self.error
        correlation_id = self._next_id
        parts = api.encode_request_parts(api_key, api_version, correlation_id, self.client_id, body)
        self._next_id = (correlation_id + 1) & 0x7FFFFFFF
        nbytes = sum(p.nbytes if isinstance(p, memoryview) else len(p) for p in parts)
        return Outgoing(correlation_id, api_key, api_version, parts, nbytes)

    def request_sent(self, out: Outgoing) -> int:
        """``out`` is being written: its answer is the next one after those already queued.
        Returns its correlation id."""
        if self.error is not None:
            raise self.error
        self._queue.append(Pending(out.correlation_id, out.api_key, out.api_version, out.nbytes))
        self._in_flight_bytes += out.nbytes
        return out.correlation_id

    def send_request(self, api_key: int, api_version: int, body: Any) -> tuple[int, list[Any]]:
        """``prepare_request`` and ``request_sent`` at once: (correlation id, parts to write)."""
        out = self.prepare_request(api_key, api_version, body)
        return self.request_sent(out), out.parts

    def has_room(self, nbytes: int) -> bool:
        """Whether a request of ``nbytes`` may be sent now (bounded in-flight bytes)."""
        return not self._queue or self._in_flight_bytes + nbytes <= self.max_in_flight_bytes

    def abandon(self, correlation_id: int) -> None:
        """The caller no longer wants this answer; it will be read and dropped."""
        for p in self._queue:
            if p.correlation_id == correlation_id:
                p.abandoned = True
                return

    @property
    def in_flight(self) -> int:
        return len(self._queue)

    @property
    def in_flight_bytes(self) -> int:
        return self._in_flight_bytes

    @property
    def pending(self) -> list[Pending]:
        return list(self._queue)

    # --- receiving ----------------------------------------------------------------------------

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the next bytes read from the socket go (``asyncio.BufferedProtocol``)."""
        return self._reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> list[Response]:
        """``nbytes`` arrived in the last buffer; the responses they complete, in order. When the
        stream breaks, the responses before the break are returned and ``error`` is set."""
        if self.error is not None:
            return []
        try:
            frames = self._reader.buffer_updated(nbytes)
        except ProtocolError as exc:
            self._break(self._frame_error(exc))
            return []
        out = self._responses(frames)
        if self.error is None:
            try:
                self._reader.raise_pending()
            except ProtocolError as exc:
                self._break(self._frame_error(exc))
        return out

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Response]:
        """Copy ``data`` in as socket reads would (tests and stream-based callers)."""
        src = memoryview(data).cast("B")
        out: list[Response] = []
        pos = 0
        while pos < len(src) and self.error is None:
            buf = self.get_buffer()
            take = min(len(buf), len(src) - pos)
            buf[:take] = src[pos : pos + take]
            pos += take
            out.extend(self.buffer_updated(take))
        return out

    def _responses(self, frames: list[memoryview]) -> list[Response]:
        out: list[Response] = []
        for frame in frames:
            if not self._queue:
                self._break(ConnectionBroken(f"{self.peer} sent a response to no request"))
                break
            head = self._queue[0]
            if len(frame) < 4:
                self._break(ConnectionBroken(f"{self.peer} sent a response of {len(frame)} bytes"))
                break
            got = int.from_bytes(frame[:4], "big", signed=True)
            if got != head.correlation_id:
                self._break(ConnectionBroken(
                    f"{self.peer} answered correlation id {got}, expected {head.correlation_id}"))
                break
            self._queue.popleft()
            self._in_flight_bytes -= head.nbytes
            if head.abandoned:
                continue
            try:
                _, body = api.decode_response(head.api_key, head.api_version, frame)
            except ProtocolError as exc:
                self._break(ConnectionBroken(
                    f"{self.peer} sent a response to api {head.api_key} v{head.api_version} "
                    f"that does not parse: {exc}"))
                break
            out.append(Response(head.correlation_id, head.api_key, head.api_version, body))
        return out

    def _frame_error(self, exc: ProtocolError) -> ConnectionBroken:
        if isinstance(exc, FrameTooLarge):
            return ConnectionBroken(
                f"{self.peer} announced a response of {exc.size} bytes, more than the "
                f"{exc.max_frame_bytes} this connection accepts")
        return ConnectionBroken(f"{self.peer} sent a broken frame: {exc}")

    # --- closing ------------------------------------------------------------------------------

    def _break(self, error: ConnectionBroken) -> None:
        if self.error is None:
            self.error = error

    def close(self, error: ConnectionBroken) -> list[Pending]:
        """The connection is gone (``error`` says why, unless it already broke); the requests
        that will never be answered, abandoned ones included."""
        self._break(error)
        lost = list(self._queue)
        self._queue.clear()
        self._in_flight_bytes = 0
        return lost
