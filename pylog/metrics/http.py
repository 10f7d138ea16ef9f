"""The metrics listener: ``/metrics`` (Prometheus text, or OpenMetrics when the scraper's Accept asks
for it; gzip when it accepts it), ``/v1/status/live`` and ``/v1/status/ready``.

Served by the standard library's threading HTTP server on daemon threads, one per connection:
a scrape builds its families there (`collector.BrokerCollector`), so neither a slow scraper nor
a slow scrape holds the event loop, and a scraper that stops reading is dropped after
``SOCKET_TIMEOUT_S``.
"""

from __future__ import annotations

import gzip
import json
import logging
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.exposition import choose_encoder

log = logging.getLogger(__name__)

SOCKET_TIMEOUT_S = 30.0
PATHS = ("/metrics", "/v1/status/live", "/v1/status/ready")


@dataclass(frozen=True, slots=True)
class MetricsAddress:
    scheme: str  # http or https
    host: str
    port: int


def parse_listeners(value: str, name: str = "pylog.metrics.listeners") -> list[MetricsAddress]:
    """``http://HOST:PORT[,https://HOST:PORT...]`` -> addresses (port 0: a free one)."""
    out = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        parts = urlsplit(item)
        try:
            port = parts.port
        except ValueError:
            port = None
        if parts.scheme not in ("http", "https") or port is None or parts.hostname is None:
            raise ValueError(f"{name} must be http://HOST:PORT or https://HOST:PORT, got {item!r}")
        if parts.path not in ("", "/"):
            raise ValueError(f"{name}: {item!r} has a path; metrics are served at /metrics")
        out.append(MetricsAddress(parts.scheme, parts.hostname, port))
    if not out:
        raise ValueError(f"{name} names no address")
    return out


def new_registry(*collectors: Any) -> CollectorRegistry:
    """A registry of its own (not prometheus_client's global one: several nodes may share a
    process in tests) with the process, platform and GC collectors and ``collectors``."""
    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    for c in collectors:
        registry.register(c)
    return registry


Check = Callable[[], list[str]]  # why not live / ready; empty: fine


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(
        self, address: MetricsAddress, registry: CollectorRegistry, live: Check, ready: Check,
        ssl_context: ssl.SSLContext | None,
    ) -> None:
        if ":" in address.host:
            self.address_family = socket.AF_INET6
        self.registry, self.live, self.ready = registry, live, ready
        self.ssl_context = ssl_context
        super().__init__((address.host, address.port), _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        sock.settimeout(SOCKET_TIMEOUT_S)
        if self.ssl_context is not None:  # handshake on the handler's thread, not the accepting one
            sock = self.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = SOCKET_TIMEOUT_S

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            self.request.do_handshake()
        super().setup()

    def do_GET(self) -> None:
        path = urlsplit(self.path).path.rstrip("/") or "/"
        try:
            if path == "/metrics":
                self._metrics()
            elif path == "/v1/status/live":
                self._status(self.server.live(), "live")
            elif path == "/v1/status/ready":
                self._status(self.server.ready(), "ready")
            else:
                self._send(404, "application/json", _json({"error": f"no {path} here", "paths": PATHS}))
        except (BrokenPipeError, ConnectionResetError, TimeoutError, ssl.SSLError):
            self.close_connection = True  # the scraper went away; nothing to answer
        except Exception as exc:  # a bug: a 500 for this request, the server keeps serving
            log.exception("metrics listener: %s failed", path)
            try:
                self._send(500, "application/json", _json({"error": str(exc)}))
            except OSError:
                self.close_connection = True

    def _metrics(self) -> None:
        encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
        body = encoder(self.server.registry)
        headers = {}
        if "gzip" in self.headers.get("Accept-Encoding", ""):
            body = gzip.compress(body, compresslevel=1)
            headers["Content-Encoding"] = "gzip"
        self._send(200, content_type, body, headers)

    def _status(self, reasons: list[str], state: str) -> None:
        if reasons:
            self._send(503, "application/json", _json({"status": f"not {state}", "reasons": reasons}))
        else:
            self._send(200, "application/json", _json({"status": state}))

    def _send(self, code: int, content_type: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("metrics listener: %s - %s", self.address_string(), format % args)


def _json(body: Any) -> bytes:
    return json.dumps(body).encode()


class MetricsServer:
    """The metrics listeners of one node, each served by a daemon thread."""

    def __init__(
        self, addresses: list[MetricsAddress], registry: CollectorRegistry, *, live: Check, ready: Check,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if any(a.scheme == "https" for a in addresses) and ssl_context is None:
            raise ValueError("pylog.metrics.listeners: https needs a client listener with TLS (its ssl.* "
                             "settings serve the metrics too)")
        self.addresses = addresses
        self.registry = registry
        self._live, self._ready = live, ready
        self._ssl_context = ssl_context
        self._servers: list[tuple[MetricsAddress, _Server, threading.Thread]] = []

    def start(self) -> list[str]:
        """Bind every address (the ports are known from here on) and serve; the URLs served."""
        for a in self.addresses:
            context = self._ssl_context if a.scheme == "https" else None
            server = _Server(a, self.registry, self._live, self._ready, context)
            thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.5},
                name=f"metrics-{a.host}:{server.server_address[1]}", daemon=True,
            )
            thread.start()
            self._servers.append((a, server, thread))
        return self.urls

    @property
    def urls(self) -> list[str]:
        out = []
        for a, server, _ in self._servers:
            host = f"[{a.host}]" if ":" in a.host else a.host
            out.append(f"{a.scheme}://{host}:{server.server_address[1]}")
        return out

    def stop(self) -> None:
        """Stop serving (blocks up to the poll interval: call it off the event loop)."""
        for _, server, thread in self._servers:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
        self._servers = []
