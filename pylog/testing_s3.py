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
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Mapping
from types import TracebackType

ACCESS_KEY = "pylog-test"
SECRET_KEY = "pylog-test-secret"
REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class S3TestServer:
    """``moto_server`` on 127.0.0.1 with one bucket; ``uri(prefix)`` names a place in it."""

    def __init__(self, bucket: str | None = None, *, start_timeout_s: float = 30.0) -> None:
        self.bucket = bucket or f"pylog-{uuid.uuid4().hex[:12]}"
        self.port = _free_port()
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
        deadline = time.monotonic() + self._start_timeout_s
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint_url}/moto-api/", timeout=1).close()
                break
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
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
