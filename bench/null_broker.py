"""A Kafka broker that stores nothing: it acknowledges every produce request at once and knows
every topic it is asked about. Benchmarks run a client against it to find the client's own
ceiling on this machine (what no broker can beat), e.g. ``bench_client_ceiling.py``.

    python bench/null_broker.py [--port 0] [--partitions 8]

Prints ``listening on 127.0.0.1:PORT`` once it accepts connections. Not a broker for anything
else: no fetch, no groups, no errors.
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import uuid
from typing import Any

from pylog.protocol import api
from pylog.protocol.api import ApiKey

SERVED = (ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.CREATE_TOPICS)
# Advertised, never answered: librdkafka infers features from them (record batch v2 needs Fetch,
# lz4 needs FindCoordinator; without them the producer silently sends uncompressed batches).
ADVERTISED = (*SERVED, ApiKey.FETCH, ApiKey.FIND_COORDINATOR)
NODE_ID = 1


class NullBroker(asyncio.Protocol):
    def __init__(self, port: int, partitions: int, topics: dict[str, int]) -> None:
        self.port = port
        self.partitions = partitions
        self.topics = topics  # partition counts of created topics (shared by connections)
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.next_offset = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        out: list[Any] = []
        while len(self.buf) >= 4:
            size = struct.unpack_from(">i", self.buf)[0]
            if len(self.buf) < 4 + size:
                break
            frame = bytes(self.buf[4 : 4 + size])
            del self.buf[: 4 + size]
            out += self.answer(frame)
        if out and self.transport is not None:
            self.transport.writelines(out)

    def answer(self, frame: bytes) -> list[Any]:
        request = api.decode_request(frame)
        h, body = request.header, request.body
        key, version = h.api_key, h.api_version
        if key == ApiKey.API_VERSIONS:
            versions = api.supported_versions()
            reply: Any = {
                "error_code": 0,
                "api_keys": [
                    {"api_key": k, "min_version": versions[k][0], "max_version": versions[k][1]}
                    for k in ADVERTISED
                ],
                "throttle_time_ms": 0,
            }
        elif key == ApiKey.METADATA:
            names = [t.name for t in body.topics] if body.topics else []
            reply = {
                "throttle_time_ms": 0,
                "brokers": [{"node_id": NODE_ID, "host": "127.0.0.1", "port": self.port, "rack": None}],
                "cluster_id": "null",
                "controller_id": NODE_ID,
                "topics": [self.topic(name) for name in names],
            }
        elif key == ApiKey.CREATE_TOPICS:
            for t in body.topics:
                self.topics[t.name] = t.num_partitions if t.num_partitions > 0 else self.partitions
            reply = {
                "throttle_time_ms": 0,
                "topics": [{"name": t.name, "error_code": 0, "error_message": None} for t in body.topics],
            }
        elif key == ApiKey.PRODUCE:
            if body.acks == 0:
                return []
            responses = []
            for t in body.topic_data:
                parts = []
                for p in t.partition_data:
                    parts.append({"index": p.index, "error_code": 0, "base_offset": self.next_offset,
                                  "log_append_time_ms": -1, "log_start_offset": 0})
                    self.next_offset += 1
                responses.append({"name": t.name, "partition_responses": parts})
            reply = {"responses": responses, "throttle_time_ms": 0}
        else:
            raise ValueError(f"api {key} is not served")
        return api.encode_response_parts(key, version, h.correlation_id, reply)

    def topic(self, name: str) -> dict[str, Any]:
        return {
            "error_code": 0,
            "name": name,
            "topic_id": uuid.uuid5(uuid.NAMESPACE_DNS, name),
            "is_internal": False,
            "partitions": [
                {"error_code": 0, "partition_index": i, "leader_id": NODE_ID, "leader_epoch": 0,
                 "replica_nodes": [NODE_ID], "isr_nodes": [NODE_ID], "offline_replicas": []}
                for i in range(self.topics.get(name, self.partitions))
            ],
            "topic_authorized_operations": -2147483648,
        }


async def serve(port: int, partitions: int) -> None:
    loop = asyncio.get_running_loop()
    holder: dict[str, int] = {"port": port}
    topics: dict[str, int] = {}
    server = await loop.create_server(
        lambda: NullBroker(holder["port"], partitions, topics), "127.0.0.1", port
    )
    holder["port"] = server.sockets[0].getsockname()[1]
    print(f"listening on 127.0.0.1:{holder['port']}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--partitions", type=int, default=8, help="partitions of every topic")
    args = ap.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(args.port, args.partitions))


if __name__ == "__main__":
    main()
