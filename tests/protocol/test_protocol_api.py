"""decode_request / encode_response and friends: versions, headers, defaults, wire details."""

from __future__ import annotations

import struct
import uuid

import pytest
from pylog.protocol.api import (
    MESSAGES,
    ApiKey,
    PylogApiKey,
    decode_body,
    decode_request,
    decode_response,
    encode_body,
    encode_request,
    encode_response,
    encode_response_parts,
    request_class,
    response_class,
    response_header_version,
    supported_versions,
)
from pylog.protocol.errors import ErrorCode, MalformedMessage, UnsupportedApi
from pylog.protocol.schema import snake_case


def _body(frame: bytes) -> memoryview:
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    return memoryview(frame)[4:]


def test_error_codes_use_kafkas_names() -> None:
    assert ErrorCode.UNKNOWN_SERVER_ERROR == -1 and ErrorCode.NONE == 0
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6
    assert ErrorCode.UNSUPPORTED_VERSION == 35
    assert ErrorCode.UNKNOWN_TOPIC_ID == 100
    assert ErrorCode.SHARE_SESSION_LIMIT_REACHED == 133
    assert sorted(ErrorCode) == list(range(-1, 134))
    assert ErrorCode.of(32000) is ErrorCode.UNKNOWN_SERVER_ERROR


def test_api_keys_use_kafkas_names() -> None:
    assert ApiKey.PRODUCE == 0 and ApiKey.FETCH == 1 and ApiKey.API_VERSIONS == 18
    assert ApiKey.DESCRIBE_CLUSTER == 60 and ApiKey.DESCRIBE_PRODUCERS == 61
    assert sorted(ApiKey) == list(range(93))
    for key in supported_versions():
        name = ApiKey(key).name if key in ApiKey._value2member_map_ else f"PYLOG_{PylogApiKey(key).name}"
        assert snake_case(MESSAGES[request_class(key).__name__].name).upper() == f"{name}_REQUEST"


def test_inter_node_messages_sit_outside_kafkas_key_range() -> None:
    assert all(k > max(ApiKey) for k in PylogApiKey)
    controller_apis = {ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT, ApiKey.ALTER_PARTITION}
    assert controller_apis <= set(supported_versions())


def test_supported_versions_are_the_json_ranges() -> None:
    sv = supported_versions()
    assert sv[ApiKey.PRODUCE] == (3, 13)
    assert sv[ApiKey.FETCH] == (4, 18)
    assert sv[ApiKey.API_VERSIONS] == (0, 4)
    assert sv[ApiKey.METADATA] == (0, 13)
    assert ApiKey.DESCRIBE_CLUSTER in sv


def test_snake_case() -> None:
    assert snake_case("TopicData") == "topic_data"
    assert snake_case("PartitionIndex") == "partition_index"
    assert snake_case("ThrottleTimeMs") == "throttle_time_ms"


def test_api_versions_unsupported_version_still_has_a_header() -> None:
    frame = encode_request(ApiKey.API_VERSIONS, 4, 77, "future-client", {"client_software_name": "x"})
    raw = bytearray(frame[4:])
    raw[2:4] = struct.pack(">h", 9)  # a version from the future, flexible header
    with pytest.raises(UnsupportedApi) as info:
        decode_request(memoryview(bytes(raw)))
    header = info.value.header
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 9, 77)
    assert header.client_id == "future-client"
    # the broker's answer: error 35 in a v0 body, v0 header
    reply = encode_response(
        ApiKey.API_VERSIONS,
        0,
        header.correlation_id,
        {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": [{"api_key": 18, "max_version": 4}]},
    )
    assert reply[4:8] == struct.pack(">i", 77)
    assert reply[8:10] == struct.pack(">h", 35)
    # a client that asked with v4 understands it (Kafka's fallback to v0)
    corr, body = decode_response(ApiKey.API_VERSIONS, 4, _body(reply))
    assert corr == 77 and body.error_code == 35 and body.api_keys[0].max_version == 4


def test_api_versions_response_header_is_always_v0() -> None:
    assert response_header_version(ApiKey.API_VERSIONS, 4) == 0
    assert response_header_version(ApiKey.METADATA, 9) == 1
    assert response_header_version(ApiKey.METADATA, 8) == 0
    raw = encode_response(ApiKey.API_VERSIONS, 3, 5, {})
    # size, correlation id, then directly the body (error code) - no header tagged fields byte
    assert raw[4:10] == struct.pack(">ih", 5, 0)
    assert decode_response(ApiKey.API_VERSIONS, 3, _body(raw)) == (5, response_class(ApiKey.API_VERSIONS)())


def test_unknown_api_key_and_old_versions_raise_unsupported() -> None:
    raw = struct.pack(">hhih", 999, 0, 1, 2) + b"id"
    with pytest.raises(UnsupportedApi) as info:
        decode_request(memoryview(raw))
    assert info.value.api_key == 999 and info.value.header.client_id == "id"
    old_produce = struct.pack(">hhih", 0, 2, 1, -1) + b"\x00" * 20
    with pytest.raises(UnsupportedApi) as info:
        decode_request(memoryview(old_produce))
    assert info.value.header.api_version == 2 and info.value.header.client_id is None
    with pytest.raises(UnsupportedApi):
        encode_response(ApiKey.PRODUCE, 2, 1, {})


def test_trailing_bytes_are_tolerated_and_counted() -> None:
    frame = encode_request(
        ApiKey.HEARTBEAT, 4, 1, "c", {"group_id": "g", "generation_id": 3, "member_id": "m"}
    )
    req = decode_request(memoryview(frame[4:] + b"junk"))
    assert req.trailing_bytes == 4 and req.body.generation_id == 3


def test_missing_fields_take_schema_defaults() -> None:
    frame = encode_request(ApiKey.FETCH, 12, 1, None, {"topics": [{"topic": "t", "partitions": [{}]}]})
    req = decode_request(_body(frame))
    body = req.body
    assert body.replica_id == -1  # schema default "-1"
    assert body.max_bytes == 0x7FFFFFFF  # schema default "0x7fffffff"
    assert body.isolation_level == 0 and body.session_epoch == -1
    assert body.cluster_id is None  # tagged, default null
    part = body.topics[0].partitions[0]
    assert part.current_leader_epoch == -1 and part.last_fetched_epoch == -1 and part.log_start_offset == -1
    assert req.header.client_id is None


def test_unknown_keys_and_bad_nulls_are_rejected_on_encode() -> None:
    with pytest.raises(ValueError, match="no_such_field"):
        encode_response(ApiKey.HEARTBEAT, 4, 1, {"no_such_field": 1})
    with pytest.raises(ValueError, match="not nullable"):
        encode_response(ApiKey.METADATA, 12, 1, {"brokers": [{"host": None}]})
    with pytest.raises(ValueError, match="not nullable"):
        encode_response(ApiKey.METADATA, 12, 1, {"brokers": None})


def test_objects_dicts_and_mixed_encode_the_same() -> None:
    R = response_class(ApiKey.PRODUCE)
    obj = R(
        responses=[
            R.TopicProduceResponse(
                name="t", partition_responses=[R.TopicProduceResponse.PartitionProduceResponse(index=1)]
            )
        ]
    )
    as_dict = {"responses": [{"name": "t", "partition_responses": [{"index": 1}]}]}
    mixed = {"responses": [R.TopicProduceResponse(name="t", partition_responses=[{"index": 1}])]}
    out = {encode_response(ApiKey.PRODUCE, 9, 1, b) for b in (obj, as_dict, mixed)}
    assert len(out) == 1


def test_records_zero_copy_and_list_of_parts() -> None:
    batch1, batch2 = b"A" * 100, memoryview(b"B" * 50)
    frame = encode_request(
        ApiKey.PRODUCE,
        9,
        1,
        "p",
        {
            "acks": 1,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": [batch1, batch2]}]}],
        },
    )
    body = _body(frame)
    req = decode_request(body)
    records = req.body.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is body.obj
    assert records == batch1 + bytes(batch2)
    parts = encode_response_parts(ApiKey.FETCH, 12, 1, {"responses": [{"partitions": [{"records": batch2}]}]})
    assert any(p is batch2 for p in parts)  # handed through for writelines, never copied


def test_null_records() -> None:
    frame = encode_request(ApiKey.PRODUCE, 3, 1, "p", {"topic_data": [{"name": "t", "partition_data": [{}]}]})
    assert decode_request(_body(frame)).body.topic_data[0].partition_data[0].records is None


def _path_to_records(st: object, version: int) -> list[tuple[str, bool]] | None:
    """The fields (name, is an array) leading from struct `st` to a `records` field at `version`."""
    for f in st.fields:  # type: ignore[attr-defined]
        if not f.present(version):
            continue
        if f.type == "records":
            return [(f.name, False)]
        if f.struct is not None and (rest := _path_to_records(f.struct, version)) is not None:
            return [(f.name, f.type == "array"), *rest]
    return None


def test_no_response_carries_null_records() -> None:
    """Kafka answers "nothing here" with an empty record set; librdkafka reads a null one as a
    corrupt response and drops it whole (ShareFetch: "invalid MessageSetSize -1")."""
    checked = 0
    for spec in MESSAGES.values():
        if spec.kind != "response" or spec.valid_versions is None:
            continue
        for version in range(spec.valid_versions[0], spec.valid_versions[1] + 1):
            path = _path_to_records(spec.root, version)
            if path is None:
                continue
            body: object = None
            for name, is_array in reversed(path):
                body = {name: [body] if is_array else body}
            wire = b"".join(bytes(p) for p in encode_body(spec, version, body))
            node, _ = decode_body(spec, version, memoryview(wire))
            for name, is_array in path:
                node = getattr(node, name)[0] if is_array else getattr(node, name)
            assert node is not None and bytes(node) == b"", (spec.name, version)
            checked += 1
    assert checked >= 10  # Fetch and ShareFetch across their versions at least


def test_compact_nullable_string_is_length_plus_one() -> None:
    spec = MESSAGES["ApiVersionsRequest"]
    assert b"".join(encode_body(spec, 3, {"client_software_name": "ab", "client_software_version": ""})) == (
        b"\x03ab\x01\x00"
    )
    spec = MESSAGES["FindCoordinatorResponse"]
    raw = b"".join(encode_body(spec, 3, {"error_message": None, "host": "h"}))
    assert (
        raw
        == struct.pack(">ih", 0, 0)
        + b"\x00"
        + struct.pack(">i", 0)
        + b"\x02h"
        + struct.pack(">i", 0)
        + b"\x00"
    )


def test_uuid_is_16_bytes_and_accepts_several_spellings() -> None:
    spec = MESSAGES["DeleteTopicsRequest"]
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    for given in (u, str(u), u.bytes):
        raw = b"".join(encode_body(spec, 6, {"topics": [{"name": None, "topic_id": given}], "timeout_ms": 5}))
        assert raw == b"\x02" + b"\x00" + u.bytes + b"\x00" + struct.pack(">i", 5) + b"\x00"
        assert decode_body(spec, 6, memoryview(raw))[0].topics[0].topic_id == u


def test_float64_is_big_endian() -> None:
    spec = MESSAGES["AlterClientQuotasRequest"]
    entry = {"entity": [{"entity_type": "user", "entity_name": "u"}], "ops": [{"key": "k", "value": 1.5}]}
    raw = b"".join(encode_body(spec, 0, {"entries": [entry]}))
    assert struct.pack(">d", 1.5) in raw
    assert decode_body(spec, 0, memoryview(raw))[0].entries[0].ops[0].value == 1.5


def test_tagged_fields_known_and_unknown() -> None:
    spec = MESSAGES["FetchRequest"]
    raw = b"".join(encode_body(spec, 12, {"cluster_id": "c1"}))
    # tagged section at the end: 1 field, tag 0, size 3, compact string "c1"
    assert raw.endswith(b"\x01\x00\x03\x03c1")
    assert decode_body(spec, 12, memoryview(raw))[0].cluster_id == "c1"
    # an unknown tag (7) is skipped, the known one still read
    patched = raw[: -len(b"\x01\x00\x03\x03c1")] + b"\x02\x00\x03\x03c1\x07\x02zz"
    body, end = decode_body(spec, 12, memoryview(patched))
    assert body.cluster_id == "c1" and end == len(patched)


def test_nested_struct_in_tagged_field_has_its_own_tagged_section() -> None:
    spec = MESSAGES["FetchResponse"]
    body = {
        "responses": [{"topic": "t", "partitions": [{"current_leader": {"leader_id": 3, "leader_epoch": 4}}]}]
    }
    raw = b"".join(encode_body(spec, 12, body))
    assert b"\x01\x01\x09" + struct.pack(">ii", 3, 4) + b"\x00" in raw
    assert (
        decode_body(spec, 12, memoryview(raw))[0].responses[0].partitions[0].current_leader.leader_epoch == 4
    )


def test_nullable_struct_marker() -> None:
    spec = MESSAGES["DescribeTopicPartitionsRequest"]
    raw = b"".join(encode_body(spec, 0, {"topics": [], "response_partition_limit": 10, "cursor": None}))
    assert raw == b"\x01" + struct.pack(">i", 10) + b"\xff" + b"\x00"
    raw = b"".join(encode_body(spec, 0, {"cursor": {"topic_name": "t", "partition_index": 2}}))
    assert b"\x01\x02t" + struct.pack(">i", 2) + b"\x00" in raw
    assert decode_body(spec, 0, memoryview(raw))[0].cursor.topic_name == "t"


def test_repr_is_readable() -> None:
    frame = encode_request(
        ApiKey.PRODUCE,
        9,
        1,
        "p",
        {"topic_data": [{"name": "t", "partition_data": [{"records": b"x" * 300}]}]},
    )
    text = repr(decode_request(_body(frame)).body)
    assert text.startswith("ProduceRequest(transactional_id=None, acks=0")
    assert "PartitionProduceData(index=0, records=<300 bytes>)" in text


def test_to_dict_round_trips() -> None:
    frame = encode_request(
        ApiKey.METADATA, 12, 1, "c", {"topics": [{"name": "a"}], "allow_auto_topic_creation": True}
    )
    body = decode_request(_body(frame)).body
    again = encode_request(ApiKey.METADATA, 12, 1, "c", body.to_dict())
    assert again == frame


def test_non_nullable_null_on_the_wire_is_malformed() -> None:
    # Heartbeat v0: group_id string with length -1 (null) where the field is not nullable
    raw = (
        struct.pack(">hhih", 12, 0, 1, 1) + b"c" + struct.pack(">h", -1) + struct.pack(">i", 1) + b"\x00\x01m"
    )
    with pytest.raises(MalformedMessage, match="non-nullable"):
        decode_request(memoryview(raw))
