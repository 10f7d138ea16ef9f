"""Fetch sessions (KIP-227): a fetch of many idle partitions through an unchanged incremental
session against a sessionless full fetch of the same partitions, on a pylog broker process.

Each request is a consumer Fetch v12 over one socket, every partition at its log end (nothing new
to return, max_wait_ms 0), as a consumer that has caught up polls. Prints, side by side, the
broker's CPU per request (from /proc), the request and response sizes on the wire, and the
client's round trip. Not part of the test run:

    python bench/bench_fetch_sessions.py [--partitions 1000] [--requests 200]
"""

from __future__ import annotations

import argparse
import socket
import struct
import time
from typing import Any

from common import BenchBroker, create_topic
from pylog.protocol.api import ApiKey, decode_response, encode_request

FETCH_VERSION = 12
TOPIC = "sessions"


class Wire:
    """One blocking connection; counts the bytes each way."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.corr = 0

    def request(self, api_key: int, version: int, body: Any) -> tuple[Any, int, int]:
        self.corr += 1
        frame = encode_request(api_key, version, self.corr, "bench", body)
        self.sock.sendall(frame)
        size = struct.unpack(">i", self._read(4))[0]
        payload = self._read(size)
        return decode_response(api_key, version, payload)[1], len(frame), size + 4

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return bytes(buf)


def fetch_body(session_id: int, epoch: int, partitions: list[int], offset: int) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 50 << 20,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [
            {
                "topic": TOPIC,
                "partitions": [
                    {"partition": p, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
                    for p in partitions
                ],
            }
        ]
        if partitions
        else [],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def fill(bootstrap: str, partitions: int) -> None:
    """One record in every partition, so each has a high watermark of 1."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(partitions):
        producer.produce(TOPIC, b"x", partition=p)
    assert producer.flush(60) == 0


def run(broker: BenchBroker, wire: Wire, requests: int, build: Any) -> dict[str, float]:
    """``requests`` fetches built by ``build(i)`` -> per-request means."""
    sent = received = 0
    cpu0 = broker.stats().cpu_s
    t0 = time.perf_counter()
    for i in range(requests):
        resp, out, back = wire.request(ApiKey.FETCH, FETCH_VERSION, build(i))
        assert resp.error_code == 0, resp.error_code
        sent += out
        received += back
    wall = time.perf_counter() - t0
    cpu = broker.stats().cpu_s - cpu0
    return {
        "cpu_ms": cpu * 1000 / requests,
        "request_b": sent / requests,
        "response_b": received / requests,
        "rtt_ms": wall * 1000 / requests,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=200)
    args = ap.parse_args()
    n, parts = args.requests, list(range(args.partitions))
    broker = BenchBroker("pylog").start()
    try:
        create_topic(broker.bootstrap, TOPIC, args.partitions)
        fill(broker.bootstrap, args.partitions)
        wire = Wire(broker.bootstrap)
        warm = fetch_body(0, -1, parts, 1)
        for _ in range(5):
            wire.request(ApiKey.FETCH, FETCH_VERSION, warm)
        full = run(broker, wire, n, lambda _i: warm)
        resp, _, _ = wire.request(ApiKey.FETCH, FETCH_VERSION, fetch_body(0, 0, parts, 1))
        session_id = resp.session_id
        assert session_id != 0, "the broker granted no fetch session"
        epoch = [1]

        def incremental(_i: int) -> dict[str, Any]:
            body = fetch_body(session_id, epoch[0], [], 1)
            epoch[0] += 1
            return body

        for _ in range(5):
            wire.request(ApiKey.FETCH, FETCH_VERSION, incremental(0))
        inc = run(broker, wire, n, incremental)
    finally:
        broker.stop()
    print(f"\nFetch of {args.partitions} idle partitions, {n} requests each (pylog broker process)\n")
    print(f"{'':34} {'full (sessionless)':>20} {'incremental session':>20} {'ratio':>8}")
    rows = [
        ("broker CPU per request (ms)", "cpu_ms", "{:.2f}"),
        ("request bytes", "request_b", "{:.0f}"),
        ("response bytes", "response_b", "{:.0f}"),
        ("round trip (ms)", "rtt_ms", "{:.2f}"),
    ]
    for label, key, fmt in rows:
        ratio = full[key] / inc[key] if inc[key] else float("inf")
        print(f"{label:34} {fmt.format(full[key]):>20} {fmt.format(inc[key]):>20} {ratio:>7.1f}x")


if __name__ == "__main__":
    main()
