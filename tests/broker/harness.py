"""Run a Broker in a background thread (own event loop) and talk to it with our own codec."""

from __future__ import annotations

import asyncio
import itertools
import socket
import struct
import threading
from pathlib import Path
from typing import Any

from pylog.protocol import api

from pylog.broker.broker import Broker
from pylog.config import BrokerConfig


class BrokerThread:
    def __init__(self, data_dir: Path, config: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.config = dict(config or {})
        self.loop: asyncio.AbstractEventLoop | None = None
        self.broker: Broker | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._stop: asyncio.Event | None = None

    @property
    def address(self) -> tuple[str, int]:
        assert self.broker is not None
        return self.broker.bound_address

    def start(self) -> BrokerThread:
        self._started.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._started.wait(30):
            raise RuntimeError("broker did not start")
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        try:  # the same loop `pylog broker` runs on
            import uvloop

            loop = uvloop.new_event_loop()
        except ImportError:
            loop = asyncio.new_event_loop()
        self.loop = loop
        try:
            loop.run_until_complete(self._main())
        finally:
            loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        try:
            self.broker = Broker(
                BrokerConfig(self.config),
                self.data_dir,
                listen=("127.0.0.1", 0),
            )
            await self.broker.start()
        except BaseException as exc:
            self._error = exc
            self._started.set()
            raise
        self._started.set()
        await self._stop.wait()
        await self.broker.stop()

    def call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on the broker's loop and return its result."""
        assert self.loop is not None

        async def run() -> Any:
            out = fn(*args)
            if asyncio.iscoroutine(out):
                out = await out
            return out

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def stop(self) -> None:
        if self.loop is not None and self._stop is not None and self._thread is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(30)
        self._thread = None


class Client:
    """A blocking Kafka client speaking our codec, one request at a time or pipelined."""

    def __init__(self, address: tuple[str, int], client_id: str = "pylog-test") -> None:
        self.sock = socket.create_connection(address, timeout=30)
        self.client_id = client_id
        self._corr = itertools.count(1)
        self._sent: dict[int, tuple[int, int]] = {}

    def send(self, api_key: int, version: int, body: Any) -> int:
        corr = next(self._corr)
        self.sock.sendall(api.encode_request(api_key, version, corr, self.client_id, body))
        self._sent[corr] = (api_key, version)
        return corr

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read_exact(4))[0]
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def recv(self) -> tuple[int, Any]:
        frame = self.read_frame()
        corr = struct.unpack(">i", frame[:4])[0]
        key, version = self._sent.pop(corr)
        return api.decode_response(key, version, frame)

    def request(self, api_key: int, version: int, body: Any) -> Any:
        corr = self.send(api_key, version, body)
        got, resp = self.recv()
        assert got == corr
        return resp

    def is_closed(self, timeout: float = 10.0) -> bool:
        """True when the broker closed the connection (EOF) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()
