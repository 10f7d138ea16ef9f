"""Micro benchmark of the message codec: typical ProduceRequest v9 and FetchResponse v12.

Prints requests/s for pylog.protocol and, side by side in the same run, for kafka-python 3.0's
own codec built from the same JSON definitions. Not part of the test run:

    python bench/bench_protocol.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from pylog.protocol.api import ApiKey, decode_request, decode_response, encode_request, encode_response

BATCH = bytes(range(256)) * 4  # a 1 KiB record batch stand-in (opaque to the codec)


def produce_body(partitions: int) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [
            {"name": "orders", "partition_data": [{"index": i, "records": BATCH} for i in range(partitions)]}
        ],
    }


def fetch_body(partitions: int) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "orders",
                "partitions": [
                    {
                        "partition_index": i,
                        "error_code": 0,
                        "high_watermark": 1_000_000,
                        "last_stable_offset": 1_000_000,
                        "log_start_offset": 0,
                        "aborted_transactions": [],
                        "preferred_read_replica": -1,
                        "records": BATCH,
                    }
                    for i in range(partitions)
                ],
            }
        ],
    }


def rate(fn: Callable[[], Any], seconds: float) -> float:
    n, batch = 0, 200
    start = time.perf_counter()
    while True:
        for _ in range(batch):
            fn()
        n += batch
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed


def kafka_python_cases(partitions: int) -> dict[str, Callable[[], Any]]:
    try:
        from kafka.protocol.consumer import FetchResponse
        from kafka.protocol.producer import ProduceRequest
    except ImportError:
        return {}
    P = ProduceRequest[9]
    T = P.TopicProduceData
    req = P(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            T(
                name="orders",
                partition_data=[T.PartitionProduceData(index=i, records=BATCH) for i in range(partitions)],
            )
        ],
    )
    req.with_header(correlation_id=1, client_id="bench")
    req_bytes = bytes(req.encode(header=True, framed=True))
    resp_bytes = encode_response(ApiKey.FETCH, 12, 1, fetch_body(partitions))
    resp = FetchResponse.decode(resp_bytes, version=12, header=True, framed=True)
    return {
        "ProduceRequest v9 decode": lambda: ProduceRequest.decode(
            req_bytes, version=9, header=True, framed=True
        ),
        "ProduceRequest v9 encode": lambda: req.encode(header=True, framed=True),
        "FetchResponse v12 decode": lambda: FetchResponse.decode(
            resp_bytes, version=12, header=True, framed=True
        ),
        "FetchResponse v12 encode": lambda: resp.encode(header=True, framed=True),
    }


def pylog_cases(partitions: int) -> dict[str, Callable[[], Any]]:
    produce = produce_body(partitions)
    req_frame = memoryview(encode_request(ApiKey.PRODUCE, 9, 1, "bench", produce))[4:]
    produce_obj = decode_request(req_frame).body
    fetch = fetch_body(partitions)
    resp_frame = memoryview(encode_response(ApiKey.FETCH, 12, 1, fetch))[4:]
    fetch_obj = decode_response(ApiKey.FETCH, 12, resp_frame)[1]
    fetch_req = {
        "max_wait_ms": 500,
        "min_bytes": 1,
        "isolation_level": 1,
        "topics": [
            {
                "topic": "orders",
                "partitions": [{"partition": i, "fetch_offset": 10} for i in range(partitions)],
            }
        ],
    }
    fetch_req_frame = memoryview(encode_request(ApiKey.FETCH, 12, 1, "bench", fetch_req))[4:]
    produce_resp = {
        "responses": [
            {
                "name": "orders",
                "partition_responses": [{"index": i, "base_offset": 42} for i in range(partitions)],
            }
        ]
    }
    return {
        "FetchRequest v12 decode": lambda: decode_request(fetch_req_frame),
        "ProduceResponse v9 encode (dict)": lambda: encode_response(ApiKey.PRODUCE, 9, 1, produce_resp),
        "ProduceRequest v9 decode": lambda: decode_request(req_frame),
        "ProduceRequest v9 encode": lambda: encode_request(ApiKey.PRODUCE, 9, 1, "bench", produce_obj),
        "FetchResponse v12 decode": lambda: decode_response(ApiKey.FETCH, 12, resp_frame),
        "FetchResponse v12 encode": lambda: encode_response(ApiKey.FETCH, 12, 1, fetch_obj),
        "FetchResponse v12 encode (dict)": lambda: encode_response(ApiKey.FETCH, 12, 1, fetch),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    args = ap.parse_args()
    print(f"{'case':<34} {'partitions':>10} {'pylog req/s':>13} {'kafka-python req/s':>19} {'speedup':>8}")
    for partitions in (1, 10):
        ours, theirs = pylog_cases(partitions), kafka_python_cases(partitions)
        for name, fn in ours.items():
            a = rate(fn, args.seconds)
            peer = theirs.get(name)
            b = rate(peer, args.seconds) if peer else None
            peer_text = f"{b:>19,.0f}" if b else f"{'-':>19}"
            speed = f"{a / b:>7.1f}x" if b else f"{'':>8}"
            print(f"{name:<34} {partitions:>10} {a:>13,.0f} {peer_text} {speed}")


if __name__ == "__main__":
    main()
