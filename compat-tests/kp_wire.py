"""One request over a raw socket, encoded and decoded by kafka-python's own protocol classes (a real
client's codec), for APIs and field values no client's public API sends: Metadata by topic id with
``name=""`` (what the Java client sends), DescribeTopicPartitions pages, requests to a controller
listener.
"""

from __future__ import annotations

import itertools
from typing import Any

from compat_raw import RawConn

_ids = itertools.count(1)


def call(address: str, request_cls: Any, version: int, timeout: float = 15.0, **fields: Any) -> Any:
    """Send ``request_cls[version](**fields)`` to ``host:port``; the decoded response."""
    host, _, port = address.rpartition(":")
    req = request_cls[version](**fields)
    cid = next(_ids)
    req.with_header(correlation_id=cid, client_id="kp-wire")
    with RawConn(host, int(port), timeout=timeout) as conn:
        conn.send(req.encode(header=True, framed=True))
        frame = conn.recv_frame()
    response_cls = _response_class(request_cls)
    resp = response_cls.decode(frame, version=version, header=True)
    assert resp.header.correlation_id == cid
    return resp


def _response_class(request_cls: Any) -> Any:
    import importlib

    module = importlib.import_module(request_cls.__module__)
    return getattr(module, request_cls.__name__.removesuffix("Request") + "Response")
