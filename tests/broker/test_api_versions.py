"""ApiVersions over a real socket, including versions the broker does not know."""

from __future__ import annotations

import struct

import pytest
from harness import Client
from pylog.protocol import api
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.network.handler_table import FIRST_EXACT_FLOOR_API
from pylog.cluster import features

EXPECTED_MAX = {
    ApiKey.PRODUCE: 10,
    ApiKey.FETCH: 12,
    ApiKey.LIST_OFFSETS: 9,  # v8: EARLIEST_LOCAL (-4), v9: LATEST_TIERED (-5)
    ApiKey.METADATA: 12,
    ApiKey.API_VERSIONS: 4,
    ApiKey.CREATE_TOPICS: 7,
    ApiKey.DELETE_TOPICS: 6,
    ApiKey.DELETE_RECORDS: 2,
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.DESCRIBE_CONFIGS: 4,
    ApiKey.ALTER_CONFIGS: 2,
    ApiKey.CREATE_PARTITIONS: 3,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
    ApiKey.DESCRIBE_CLUSTER: 2,
}


def test_every_version_of_api_versions_lists_min_zero(client: Client) -> None:
    for version in range(5):
        resp = client.request(
            ApiKey.API_VERSIONS,
            version,
            {"client_software_name": "pylog-test", "client_software_version": "1.0"},
        )
        assert resp.error_code == 0
        table = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        for key, hi in EXPECTED_MAX.items():
            assert table[key] == (0, hi), key
        # APIs older clients check exactly start at 0; newer ones at their lowest served version.
        assert all(lo == 0 for key, (lo, _) in table.items() if key < FIRST_EXACT_FLOOR_API)
        for key in (ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE):
            assert table[key] == (1, 1), key
        for key in (ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE):  # v2: KIP-1206 / KIP-1222
            assert table[key] == (1, 2), key
        assert table[ApiKey.CONSUMER_GROUP_HEARTBEAT][0] == 0


def test_share_group_apis_work_at_the_lowest_advertised_version(client: Client) -> None:
    """A client that takes the lowest advertised version gets an answer, not UNSUPPORTED_VERSION."""
    table = {k.api_key: k.min_version for k in client.request(ApiKey.API_VERSIONS, 3, {}).api_keys}
    body = {"group_id": "", "member_id": "m", "member_epoch": 0, "subscribed_topic_names": ["t"]}
    resp = client.request(ApiKey.SHARE_GROUP_HEARTBEAT, table[ApiKey.SHARE_GROUP_HEARTBEAT], body)
    assert resp.error_code == ErrorCode.INVALID_REQUEST  # an empty group id, judged by the handler


def test_api_versions_carries_supported_and_finalized_features(client: Client) -> None:
    v4 = client.request(ApiKey.API_VERSIONS, 4, {"client_software_name": "t", "client_software_version": "1"})
    supported = {f.name: (f.min_version, f.max_version) for f in v4.supported_features}
    assert supported == dict(features.SUPPORTED)
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in v4.finalized_features}
    assert finalized == {name: (level, level) for name, level in features.BOOTSTRAP.items()}
    assert v4.finalized_features_epoch > 0
    # Before v4, supported ranges starting at 0 are left out (older clients cannot read them).
    v3 = client.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert {f.name for f in v3.supported_features} == {features.METADATA_VERSION}
    assert {f.name for f in v3.finalized_features} == set(features.BOOTSTRAP)


def test_unknown_api_versions_version_gets_35_in_a_v0_body(client: Client) -> None:
    # ApiVersions v9: a flexible header (tagged fields) and a body we cannot know.
    head = struct.pack(">hhih", ApiKey.API_VERSIONS, 9, 77, 4) + b"test" + b"\x00"
    client.send_raw(struct.pack(">i", len(head) + 3) + head + b"\x01\x01\x00")
    frame = client.read_frame()
    corr, body = api.decode_response(ApiKey.API_VERSIONS, 0, frame)
    assert corr == 77
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    table = {k.api_key: k.max_version for k in body.api_keys}
    assert table[ApiKey.PRODUCE] == 10
    # the connection stays usable
    assert client.request(ApiKey.API_VERSIONS, 3, {}).error_code == 0


def test_obsolete_produce_version_is_answered_unsupported(client: Client) -> None:
    body = {
        "acks": 1,
        "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b""}]}],
    }
    spec = next(m for m in api.MESSAGES.values() if m.api_key == 0 and m.kind == "request")
    parts = api.encode_body(spec, 2, body)
    head = struct.pack(">hhih", ApiKey.PRODUCE, 2, 5, 1) + b"x"
    payload = head + b"".join(bytes(p) for p in parts)
    client.send_raw(struct.pack(">i", len(payload)) + payload)
    frame = client.read_frame()
    resp_spec = next(m for m in api.MESSAGES.values() if m.api_key == 0 and m.kind == "response")
    assert struct.unpack(">i", frame[:4])[0] == 5
    resp, _ = api.decode_body(resp_spec, 2, memoryview(frame), 4)
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert client.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0


def _legacy_request(api_key: int, version: int, corr: int, body: dict) -> bytes:
    spec = next(m for m in api.MESSAGES.values() if m.api_key == api_key and m.kind == "request")
    payload = struct.pack(">hhih", api_key, version, corr, 1) + b"x"
    payload += b"".join(bytes(p) for p in api.encode_body(spec, version, body))
    return struct.pack(">i", len(payload)) + payload


def _legacy_response(api_key: int, version: int, frame: bytes) -> tuple[int, object]:
    spec = next(m for m in api.MESSAGES.values() if m.api_key == api_key and m.kind == "response")
    return struct.unpack(">i", frame[:4])[0], api.decode_body(spec, version, memoryview(frame), 4)[0]


@pytest.mark.parametrize(
    ("api_key", "version", "body", "codes"),
    [
        (
            ApiKey.FETCH,
            3,
            {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 1,
                "max_bytes": 100,
                "topics": [
                    {
                        "topic": "t",
                        "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 100}],
                    }
                ],
            },
            lambda r: [p.error_code for t in r.responses for p in t.partitions],
        ),
        (
            ApiKey.LIST_OFFSETS,
            0,
            {
                "replica_id": -1,
                "topics": [
                    {
                        "name": "t",
                        "partitions": [{"partition_index": 0, "timestamp": -1, "max_num_offsets": 1}],
                    }
                ],
            },
            lambda r: [p.error_code for t in r.topics for p in t.partitions],
        ),
        (
            ApiKey.CREATE_TOPICS,
            1,
            {
                "topics": [
                    {
                        "name": "t",
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 1000,
            },
            lambda r: [t.error_code for t in r.topics],
        ),
        (
            ApiKey.DELETE_TOPICS,
            0,
            {"topic_names": ["t"], "timeout_ms": 1000},
            lambda r: [t.error_code for t in r.responses],
        ),
        (
            ApiKey.DESCRIBE_CONFIGS,
            0,
            {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}]},
            lambda r: [x.error_code for x in r.results],
        ),
    ],
)
def test_obsolete_versions_of_other_apis(
    client: Client, api_key: int, version: int, body: dict, codes: object
) -> None:
    client.send_raw(_legacy_request(api_key, version, 9, body))
    corr, resp = _legacy_response(api_key, version, client.read_frame())
    assert corr == 9
    assert codes(resp) == [ErrorCode.UNSUPPORTED_VERSION]  # type: ignore[operator]
    assert client.request(ApiKey.API_VERSIONS, 3, {}).error_code == 0
