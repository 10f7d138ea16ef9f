"""Admin APIs through the controller: topics, partitions, configs, records, cluster."""

from __future__ import annotations

from harness import BrokerThread, Client
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from records_util import make_batch, values_of
from test_produce_fetch import create, fetch, produce

TOPIC, BROKER = 2, 4


def configs_of(client: Client, rtype: int, name: str, synonyms: bool = False) -> dict[str, object]:
    resp = client.request(
        ApiKey.DESCRIBE_CONFIGS,
        4,
        {
            "resources": [{"resource_type": rtype, "resource_name": name, "configuration_keys": None}],
            "include_synonyms": synonyms,
            "include_documentation": False,
        },
    )
    (res,) = resp.results
    assert res.error_code == 0, res
    return {c.name: c for c in res.configs}


def test_create_topics_validation(client: Client) -> None:
    resp = client.request(
        ApiKey.CREATE_TOPICS,
        7,
        {
            "topics": [
                {
                    "name": "ok",
                    "num_partitions": 3,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": "cleanup.policy", "value": "compact"}],
                },
                {
                    "name": "bad name",
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                },
                {
                    "name": "rf",
                    "num_partitions": 1,
                    "replication_factor": 3,
                    "assignments": [],
                    "configs": [],
                },
                {
                    "name": "cfg",
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": "retention.ms", "value": "soon"}],
                },
                {
                    "name": "dflt",
                    "num_partitions": -1,
                    "replication_factor": -1,
                    "assignments": [],
                    "configs": [],
                },
            ],
            "timeout_ms": 5000,
            "validate_only": False,
        },
    )
    codes = {t.name: t.error_code for t in resp.topics}
    assert codes == {
        "ok": 0,
        "bad name": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "rf": ErrorCode.INVALID_REPLICATION_FACTOR,
        "cfg": ErrorCode.INVALID_CONFIG,
        "dflt": 0,
    }
    ok = next(t for t in resp.topics if t.name == "ok")
    assert ok.num_partitions == 3 and {c.name: c.value for c in ok.configs}["cleanup.policy"] == "compact"
    again = client.request(
        ApiKey.CREATE_TOPICS,
        7,
        {
            "topics": [
                {"name": "ok", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
            ],
            "timeout_ms": 5000,
        },
    )
    assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    dry = client.request(
        ApiKey.CREATE_TOPICS,
        7,
        {
            "topics": [
                {
                    "name": "dry",
                    "num_partitions": 2,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout_ms": 5000,
            "validate_only": True,
        },
    )
    assert dry.topics[0].error_code == 0
    meta = client.request(
        ApiKey.METADATA, 12, {"topics": [{"name": "dry"}], "allow_auto_topic_creation": False}
    )
    assert meta.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_create_partitions_then_delete_topic(broker: BrokerThread, client: Client) -> None:
    create(client, "grow")
    resp = client.request(
        ApiKey.CREATE_PARTITIONS,
        3,
        {
            "topics": [{"name": "grow", "count": 3, "assignments": None}],
            "timeout_ms": 5000,
            "validate_only": False,
        },
    )
    assert resp.results[0].error_code == 0
    assert produce(client, "grow", make_batch([b"p2"]), partition=2).base_offset == 0
    shrink = client.request(
        ApiKey.CREATE_PARTITIONS,
        3,
        {
            "topics": [{"name": "grow", "count": 2, "assignments": None}],
            "timeout_ms": 5000,
            "validate_only": False,
        },
    )
    assert shrink.results[0].error_code == ErrorCode.INVALID_PARTITIONS
    path = broker.broker.replicas.get("grow", 2).path
    resp = client.request(ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": "grow"}], "timeout_ms": 5000})
    assert resp.responses[0].error_code == 0
    assert not path.exists()
    assert fetch(client, "grow", 0).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    resp = client.request(ApiKey.DELETE_TOPICS, 3, {"topic_names": ["grow"], "timeout_ms": 5000})
    assert resp.responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # a new topic of the same name starts empty
    create(client, "grow")
    assert produce(client, "grow", make_batch([b"new"])).base_offset == 0


def test_describe_and_alter_topic_configs(broker: BrokerThread, client: Client) -> None:
    create(client, "conf", configs={"retention.ms": "1000000"})
    cfg = configs_of(client, TOPIC, "conf", synonyms=True)
    assert cfg["retention.ms"].value == "1000000" and cfg["retention.ms"].config_source == 1
    assert cfg["segment.bytes"].value == "1073741824" and cfg["segment.bytes"].config_source == 5
    assert [s.name for s in cfg["retention.ms"].synonyms][:2] == ["retention.ms", "log.retention.hours"]
    resp = client.request(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        {
            "resources": [
                {
                    "resource_type": TOPIC,
                    "resource_name": "conf",
                    "configs": [
                        {"name": "message.timestamp.type", "config_operation": 0, "value": "LogAppendTime"},
                        {"name": "retention.ms", "config_operation": 1, "value": None},
                    ],
                }
            ],
            "validate_only": False,
        },
    )
    assert resp.responses[0].error_code == 0
    cfg = configs_of(client, TOPIC, "conf")
    assert cfg["message.timestamp.type"].value == "LogAppendTime"
    assert cfg["retention.ms"].value == "604800000"
    # LogAppendTime now applies to appends
    res = produce(client, "conf", make_batch([b"t"], timestamp=1000))
    assert res.log_append_time_ms > 1000
    resp = client.request(
        ApiKey.ALTER_CONFIGS,
        2,
        {
            "resources": [
                {
                    "resource_type": TOPIC,
                    "resource_name": "conf",
                    "configs": [{"name": "cleanup.policy", "value": "sometimes"}],
                }
            ],
            "validate_only": False,
        },
    )
    assert resp.responses[0].error_code == ErrorCode.INVALID_CONFIG
    resp = client.request(
        ApiKey.ALTER_CONFIGS,
        2,
        {
            "resources": [{"resource_type": TOPIC, "resource_name": "missing", "configs": []}],
            "validate_only": False,
        },
    )
    assert resp.responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_describe_broker_configs(broker: BrokerThread, client: Client) -> None:
    cfg = configs_of(client, BROKER, str(broker.broker.node_id))
    assert cfg["num.partitions"].value == "1"
    assert cfg["message.max.bytes"].value == "1048588"
    assert cfg["log.retention.hours"].value == "168"


def test_delete_records(client: Client) -> None:
    create(client, "trim")
    for v in (b"a", b"b", b"c"):
        produce(client, "trim", make_batch([v]))
    resp = client.request(
        ApiKey.DELETE_RECORDS,
        2,
        {
            "topics": [{"name": "trim", "partitions": [{"partition_index": 0, "offset": 2}]}],
            "timeout_ms": 5000,
        },
    )
    assert resp.topics[0].partitions[0].low_watermark == 2
    assert fetch(client, "trim", 0).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert values_of(fetch(client, "trim", 2).records) == [b"c"]
    resp = client.request(
        ApiKey.DELETE_RECORDS,
        2,
        {
            "topics": [{"name": "trim", "partitions": [{"partition_index": 0, "offset": 10}]}],
            "timeout_ms": 5000,
        },
    )
    assert resp.topics[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_describe_cluster(broker: BrokerThread, client: Client) -> None:
    resp = client.request(
        ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 1}
    )
    assert resp.error_code == 0 and resp.cluster_id
    assert [(b.broker_id, b.port) for b in resp.brokers] == [(broker.broker.node_id, broker.address[1])]
    assert resp.controller_id == broker.broker.node_id


def test_topic_compression_type_recompresses(client: Client) -> None:
    create(client, "zs", configs={"compression.type": "zstd"})
    produce(client, "zs", make_batch([b"plain"] * 3))
    part = fetch(client, "zs", 0)
    from pylog.protocol import records as rec

    ((header, _),) = list(rec.iter_batches(part.records))
    assert header.compression == 4
    assert values_of(part.records) == [b"plain"] * 3
