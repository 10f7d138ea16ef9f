"""Two registry instances over one broker's ``_schemas``: the instance whose broker leads partition 0
writes, the other forwards writes to it over HTTP and reads the shared log."""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "broker"))

from harness import BrokerThread

from pylog.schema_registry.http import RegistryServer

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}


def _http(method: str, url: str, body: object = None) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/vnd.schemaregistry.v1+json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_second_instance_forwards_writes_and_shares_state(tmp_path: Path) -> None:
    broker = BrokerThread(tmp_path / "data", {"schema.registry.listeners": "http://127.0.0.1:0"}).start()
    follower: RegistryServer | None = None
    try:
        assert broker.broker is not None and broker.broker.schema_registry is not None
        writer_url = broker.broker.schema_registry.url
        host, port = broker.address
        follower = RegistryServer("http://127.0.0.1:0", f"{host}:{port}", node_id=2)  # leads nothing
        follower_url = broker.call(follower.start)
        status, body = _http(
            "POST", f"{follower_url}/subjects/s-value/versions", {"schema": json.dumps(SCHEMA)}
        )
        assert (status, body) == (200, {"id": 1, "version": 1, "subject": "s-value"})
        assert _http("GET", f"{writer_url}/subjects/s-value/versions/1")[1]["id"] == 1
        deadline = time.monotonic() + 10
        while _http("GET", f"{follower_url}/subjects")[1] != ["s-value"]:
            assert time.monotonic() < deadline, "the follower never read the forwarded write"
            time.sleep(0.05)
        status, body = _http(
            "POST",
            f"{follower_url}/subjects/s-value/versions",
            {"schema": json.dumps({**SCHEMA, "fields": [{"name": "a", "type": "string"}]})},
        )
        assert status == 409 and body["error_code"] == 409
        assert _http("GET", f"{writer_url}/schemas/ids/1")[1] == {
            "schema": json.dumps(SCHEMA, separators=(",", ":"))
        }
    finally:
        if follower is not None:
            broker.call(follower.stop)
        broker.stop()
