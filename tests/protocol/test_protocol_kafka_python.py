"""Cross-checks against kafka-python's own (independently written) message codec.

kafka-python 3.0 builds its messages from the same JSON definitions with its own code. Bytes we
encode must decode there and re-encode to the very same bytes, and the other way round, for every
message and version both sides know; a few realistic exchanges are also checked field by field.
"""

from __future__ import annotations

import importlib
import pkgutil
import struct
import uuid
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from protocol_strategies import message_strategy
from pylog.protocol.api import (
    MESSAGES,
    ApiKey,
    decode_body,
    decode_request,
    decode_response,
    encode_body,
    encode_request,
    encode_response,
)

with warnings.catch_warnings():
    # kafka-python 3.0 reads its JSON through a deprecated importlib.resources call when imported
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.protocol as kp
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.consumer import FetchRequest, FetchResponse
    from kafka.protocol.metadata import (
        ApiVersionsRequest,
        ApiVersionsResponse,
        MetadataRequest,
        MetadataResponse,
    )
    from kafka.protocol.producer import ProduceRequest, ProduceResponse


def _kafka_python_classes() -> dict[str, type[ApiMessage]]:
    out: dict[str, type[ApiMessage]] = {}
    for info in pkgutil.walk_packages(kp.__path__, "kafka.protocol."):
        if ".old" in info.name:
            continue
        mod = importlib.import_module(info.name)
        for attr in vars(mod).values():
            if (
                isinstance(attr, type)
                and issubclass(attr, ApiMessage)
                and attr is not ApiMessage
                and getattr(attr, "_json", None)
            ):
                out[attr.name] = attr
    return out


with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    _KP = _kafka_python_classes()
_CASES = [
    (name, v)
    for name in sorted(_KP)
    if name in MESSAGES and MESSAGES[name].valid_versions is not None
    for v in range(MESSAGES[name].valid_versions[0], MESSAGES[name].valid_versions[1] + 1)
]


def test_kafka_python_knows_most_messages() -> None:
    assert len(_KP) >= 100
    assert len(_CASES) > 400


@pytest.mark.parametrize(("name", "version"), _CASES, ids=[f"{n}-v{v}" for n, v in _CASES])
def test_bytes_identical_through_kafka_python(name: str, version: int) -> None:
    spec, theirs_cls = MESSAGES[name], _KP[name]

    @settings(max_examples=2, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(message_strategy(spec, version))
    def check(obj: Any) -> None:
        if name == "ApiVersionsResponse":
            obj.error_code = 0  # kafka-python reads any error as a v0 body (Kafka's fallback)
        ours = b"".join(encode_body(spec, version, obj))
        theirs = theirs_cls.decode(ours, version=version)
        theirs._header = None
        again = bytes(theirs.encode(version=version))
        assert again == ours
        assert decode_body(spec, version, memoryview(again))[0] == obj

    check()


@pytest.mark.parametrize("version", [0, 1, 4, 8, 9, 10, 12, 13])
def test_metadata_request_from_kafka_python(version: int) -> None:
    R = MetadataRequest[version]
    topics = [R.MetadataRequestTopic(name=t) for t in ("orders", "clicks")]
    kw: dict[str, Any] = {"topics": topics}
    if version >= 4:
        kw["allow_auto_topic_creation"] = False
    req = R(**kw)
    req.with_header(correlation_id=4242, client_id="kafka-python-3.0")
    frame = bytes(req.encode(header=True, framed=True))
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    got = decode_request(memoryview(frame)[4:])
    assert got.header.api_key == ApiKey.METADATA
    assert got.header.api_version == version
    assert got.header.correlation_id == 4242
    assert got.header.client_id == "kafka-python-3.0"
    assert got.header.header_version == (2 if version >= 9 else 1)
    assert [t.name for t in got.body.topics] == ["orders", "clicks"]
    assert got.trailing_bytes == 0
    if version >= 4:
        assert got.body.allow_auto_topic_creation is False


@pytest.mark.parametrize("version", [3, 7, 9, 10])
def test_produce_request_from_kafka_python(version: int) -> None:
    P = ProduceRequest[version]
    T = P.TopicProduceData
    batch = bytes(range(256)) * 3
    req = P(
        transactional_id="tx-1",
        acks=-1,
        timeout_ms=30000,
        topic_data=[T(name="orders", partition_data=[T.PartitionProduceData(index=2, records=batch)])],
    )
    req.with_header(correlation_id=9, client_id="producer-1")
    frame = memoryview(bytes(req.encode(header=True, framed=True)))[4:]
    got = decode_request(frame)
    body = got.body
    assert (body.transactional_id, body.acks, body.timeout_ms) == ("tx-1", -1, 30000)
    part = body.topic_data[0].partition_data[0]
    assert body.topic_data[0].name == "orders" and part.index == 2
    assert isinstance(part.records, memoryview)
    assert part.records.obj is frame.obj  # zero-copy: a view into the frame
    assert part.records == batch


@pytest.mark.parametrize("version", [3, 7, 9, 11])
def test_produce_response_to_kafka_python(version: int) -> None:
    body = {
        "responses": [
            {
                "name": "orders",
                "partition_responses": [
                    {"index": 2, "error_code": 0, "base_offset": 1234, "log_append_time_ms": -1},
                    {"index": 3, "error_code": 6, "base_offset": -1, "error_message": "not leader"},
                ],
            }
        ],
        "throttle_time_ms": 5,
    }
    raw = encode_response(ApiKey.PRODUCE, version, 77, body)
    resp = ProduceResponse.decode(raw, version=version, header=True, framed=True)
    assert resp.header.correlation_id == 77
    parts = resp.responses[0].partition_responses
    assert resp.responses[0].name == "orders"
    assert [(p.index, p.error_code, p.base_offset) for p in parts] == [(2, 0, 1234), (3, 6, -1)]
    assert resp.throttle_time_ms == 5
    if version >= 8:
        assert parts[1].error_message == "not leader"


@pytest.mark.parametrize("version", [4, 11, 12, 13])
def test_fetch_request_from_kafka_python(version: int) -> None:
    F = FetchRequest[version]
    T = F.FetchTopic
    topic = {"topic": "orders"} if version < 13 else {"topic_id": uuid.UUID(int=7)}
    req = F(
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=52428800,
        isolation_level=1,
        topics=[
            T(
                partitions=[T.FetchPartition(partition=0, fetch_offset=42, partition_max_bytes=1048576)],
                **topic,
            )
        ],
    )
    req.with_header(correlation_id=3, client_id="consumer")
    got = decode_request(memoryview(bytes(req.encode(header=True, framed=True)))[4:])
    t = got.body.topics[0]
    if version < 13:
        assert t.topic == "orders"
    else:
        assert t.topic_id == uuid.UUID(int=7)
    assert (t.partitions[0].partition, t.partitions[0].fetch_offset) == (0, 42)
    assert got.body.isolation_level == 1 and got.body.max_wait_ms == 500


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_fetch_response_to_kafka_python(version: int) -> None:
    records = [b"\x00" * 61, b"batch-two"]
    partition: dict[str, Any] = {
        "partition_index": 0,
        "high_watermark": 100,
        "last_stable_offset": 100,
        "log_start_offset": 0,
        "aborted_transactions": [],
        "records": records,
    }
    if version >= 12:
        partition["current_leader"] = {"leader_id": 1, "leader_epoch": 5}
    topic: dict[str, Any] = {"partitions": [partition]}
    if version >= 13:
        topic["topic_id"] = uuid.UUID(int=99)
    else:
        topic["topic"] = "orders"
    raw = encode_response(ApiKey.FETCH, version, 11, {"responses": [topic]})
    resp = FetchResponse.decode(raw, version=version, header=True, framed=True)
    assert resp.header.correlation_id == 11
    p = resp.responses[0].partitions[0]
    assert bytes(p.records) == b"".join(records)
    assert p.high_watermark == 100
    if version >= 12:
        assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, 5)
    # and back: kafka-python's bytes decode with ours
    corr, body = decode_response(ApiKey.FETCH, version, memoryview(raw)[4:])
    assert corr == 11 and body.responses[0].partitions[0].records == b"".join(records)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_exchange_with_kafka_python(version: int) -> None:
    req = ApiVersionsRequest[version](client_software_name="kafka-python", client_software_version="3.0.12")
    req.with_header(correlation_id=1, client_id="kp")
    got = decode_request(memoryview(bytes(req.encode(header=True, framed=True)))[4:])
    if version >= 3:
        assert got.body.client_software_name == "kafka-python"
    body = {"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 0, "max_version": 10}]}
    raw = encode_response(ApiKey.API_VERSIONS, version, 1, body)
    resp = ApiVersionsResponse.decode(raw, version=version, header=True, framed=True)
    assert resp.header.correlation_id == 1
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(0, 0, 10)]


def test_metadata_response_from_ours_and_request_to_kafka_python() -> None:
    body = {
        "brokers": [{"node_id": 1, "host": "localhost", "port": 9092, "rack": None}],
        "cluster_id": "pylog",
        "controller_id": 1,
        "topics": [
            {"name": "orders", "partitions": [{"partition_index": 0, "leader_id": 1, "replica_nodes": [1]}]}
        ],
    }
    raw = encode_response(ApiKey.METADATA, 12, 8, body)
    resp = MetadataResponse.decode(raw, version=12, header=True, framed=True)
    assert resp.brokers[0].host == "localhost" and resp.cluster_id == "pylog"
    assert resp.topics[0].partitions[0].replica_nodes == [1]
    frame = encode_request(ApiKey.METADATA, 12, 8, "pylog-sdk", {"topics": None})
    theirs = MetadataRequest.decode(frame, version=12, header=True, framed=True)
    assert theirs.topics is None and theirs.header.client_id == "pylog-sdk"
