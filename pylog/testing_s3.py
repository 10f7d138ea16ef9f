"""A real S3-compatible HTTP server on loopback for tests of the remote tier (moto's server mode).

The server runs in its own process (``moto_server``), so a test can stop it, pause it with
SIGSTOP or kill it like any other dependency; brokers, the SDK and Spark reach it over HTTP with
real S3 clients. Needs ``moto[server]`` (in the ``test`` extra)::

    with S3TestServer() as s3:
        store_uri, options = s3.uri("tier"), s3.options   # s3://<bucket>/tier, endpoint + keys
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.local import free_port

CLOCK: Clock = SYSTEM_CLOCK  # the harness's clock: it waits for the S3 server to start

ACCESS_KEY = "pylog-test"
SECRET_KEY = "pylog-test-secret"
REGION = "us-east-1"


class S3TestServer:
    """``moto_server`` on 127.0.0.1 with one bucket; ``uri(prefix)`` names a place in it."""

    def __init__(self, bucket: str | None = None, *, start_timeout_s: float = 30.0) -> None:
        self.bucket = bucket or f"pylog-{uuid.uuid4().hex[:12]}"
        self.port = free_port()
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self._start_timeout_s = start_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def options(self) -> dict[str, str]:
        """The store options (see ``storage.remote_store.open_remote_store``)."""
        return {"endpoint_url": self.endpoint_url, "region": REGION,
                "access_key_id": ACCESS_KEY, "secret_access_key": SECRET_KEY}

    @property
    def env(self) -> Mapping[str, str]:
        """The same, by the usual AWS environment names (for processes started by a test)."""
        return {"AWS_ENDPOINT_URL": self.endpoint_url, "AWS_REGION": REGION,
                "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}

    def uri(self, prefix: str = "") -> str:
        return f"s3://{self.bucket}/{prefix}".rstrip("/")

    def start(self) -> S3TestServer:
        exe = shutil.which("moto_server", path=os.path.dirname(sys.executable)) or shutil.which("moto_server")
        if exe is None:
            raise RuntimeError("moto_server is not installed: pip install 'moto[server]>=5.2.2'")
        self._proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(self.port)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = CLOCK.monotonic_s() + self._start_timeout_s
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint_url}/moto-api/", timeout=1).close()
                break
            except OSError:
                if self._proc.poll() is not None or CLOCK.monotonic_s() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto_server did not start on {self.endpoint_url}") from None
                time.sleep(0.1)
        self._request("PUT", f"/{self.bucket}")
        return self

    def _request(self, method: str, path: str) -> None:
        # An unsigned request is enough: moto accepts any credentials.
        req = urllib.request.Request(f"{self.endpoint_url}{path}", method=method)
        urllib.request.urlopen(req, timeout=10).close()

    def pause(self) -> None:
        assert self._proc is not None
        self._proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self._proc is not None
        self._proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.send_signal(signal.SIGCONT)
            self._proc.kill()
            self._proc.wait(timeout=10)
            self._proc = None

    def __enter__(self) -> S3TestServer:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class S3FaultProxy:
    """An HTTP proxy in front of an S3 endpoint that refuses or delays a seeded share of requests.

    Refused requests get S3's own ``503 SlowDown`` answer (clients retry it); delayed ones are
    forwarded after ``delay_s`` (longer than a client's request timeout: a timeout). The seed is
    printed so a failing run can be replayed. ``set_faults`` changes the shares while running.
    """

    def __init__(self, upstream: str, *, seed: int, refuse: float = 0.0, delay: float = 0.0,
                 delay_s: float = 5.0) -> None:
        import random

        self.upstream = _host_port(upstream)
        self.seed = seed
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.refuse, self.delay, self.delay_s = refuse, delay, delay_s
        self.counts = {"forwarded": 0, "refused": 0, "delayed": 0}
        self._server: Any = None
        self.endpoint_url = ""
        print(f"S3FaultProxy seed={seed} refuse={refuse} delay={delay}")

    def set_faults(self, *, refuse: float = 0.0, delay: float = 0.0) -> None:
        with self._lock:
            self.refuse, self.delay = refuse, delay

    def _draw(self) -> str:
        with self._lock:
            r = self._rng.random()
            if r < self.refuse:
                kind = "refused"
            else:
                kind = "delayed" if r < self.refuse + self.delay else "forwarded"
            self.counts[kind] += 1
            return kind

    def start(self) -> S3FaultProxy:
        import http.client
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                body = self._body()
                kind = proxy._draw()
                if kind == "refused":
                    payload = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
                               b"<Message>Please reduce your request rate.</Message></Error>")
                    self.send_response(503)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if kind == "delayed":
                    time.sleep(proxy.delay_s)
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=60)
                try:
                    conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                    for k, v in self.headers.items():
                        if k.lower() not in ("connection", "expect"):
                            conn.putheader(k, v)
                    conn.endheaders(body)
                    resp = conn.getresponse()
                    data = resp.read()
                    self.send_response(resp.status)
                    for k, v in resp.getheaders():
                        if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                            self.send_header(k, v)
                    # a HEAD answer has no body but tells the object's length
                    length = resp.getheader("Content-Length") if self.command == "HEAD" else None
                    self.send_header("Content-Length", length or str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                except (OSError, http.client.HTTPException):
                    self.close_connection = True
                finally:
                    conn.close()

            def _body(self) -> bytes:
                """The request body as sent: raw chunks (with trailers) when chunked."""
                if "chunked" not in (self.headers.get("Transfer-Encoding") or "").lower():
                    length = int(self.headers.get("Content-Length") or 0)
                    return self.rfile.read(length) if length else b""
                raw = bytearray()
                while True:
                    line = self.rfile.readline(65537)
                    raw += line
                    size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                    if size == 0:
                        while True:  # trailers, then an empty line
                            t = self.rfile.readline(65537)
                            raw += t
                            if t in (b"\r\n", b"\n", b""):
                                return bytes(raw)
                    raw += self.rfile.read(size + 2)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True, name="s3-fault-proxy").start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> S3FaultProxy:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _host_port(url: str) -> tuple[str, int]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 80
