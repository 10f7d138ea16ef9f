"""Every API a client can send, with a body a user without ACLs may not have served, and the
authorization error Kafka answers it with (the table ``test_authorization.py`` drives)."""

from __future__ import annotations

import uuid
from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

E = ErrorCode
TOPIC, GROUP, CLUSTER, TXN = (
    E.TOPIC_AUTHORIZATION_FAILED,
    E.GROUP_AUTHORIZATION_FAILED,
    E.CLUSTER_AUTHORIZATION_FAILED,
    E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
)
ZERO = uuid.UUID(int=0)

T = "orders"
PARTS = [{"partition_index": 0}]


def _fetch(*, replica_id: int) -> dict[str, Any]:
    """A Fetch of partition 0 of T (replica_id -1: a consumer; a broker id: a follower)."""
    return {
        "replica_id": replica_id,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1000,
        "topics": [
            {"topic": T, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 100}]}
        ],
    }


CASES: list[tuple[str, int, int, dict, int]] = [
    (
        "Produce",
        ApiKey.PRODUCE,
        8,
        {
            "acks": -1,
            "timeout_ms": 1000,
            "topic_data": [{"name": T, "partition_data": [{"index": 0, "records": None}]}],
        },
        TOPIC,
    ),
    (
        "Produce transactional",
        ApiKey.PRODUCE,
        8,
        {
            "transactional_id": "tx",
            "acks": -1,
            "timeout_ms": 1000,
            "topic_data": [{"name": T, "partition_data": [{"index": 0, "records": None}]}],
        },
        TXN,
    ),
    (
        "Fetch",
        ApiKey.FETCH,
        11,
        _fetch(replica_id=-1),
        TOPIC,
    ),
    (
        "Fetch as a follower",
        ApiKey.FETCH,
        11,
        _fetch(replica_id=7),
        TOPIC,
    ),
    (
        "ListOffsets",
        ApiKey.LIST_OFFSETS,
        5,
        {"replica_id": -1, "topics": [{"name": T, "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
        TOPIC,
    ),
    (
        "OffsetForLeaderEpoch",
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        3,
        {"replica_id": -1, "topics": [{"topic": T, "partitions": [{"partition": 0, "leader_epoch": 0}]}]},
        TOPIC,
    ),
    ("Metadata", ApiKey.METADATA, 9, {"topics": [{"name": T}], "allow_auto_topic_creation": False}, TOPIC),
    (
        "OffsetCommit",
        ApiKey.OFFSET_COMMIT,
        7,
        {
            "group_id": "g",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [{"name": T, "partitions": [{"partition_index": 0, "committed_offset": 1}]}],
        },
        GROUP,
    ),
    (
        "OffsetFetch",
        ApiKey.OFFSET_FETCH,
        7,
        {"group_id": "g", "topics": [{"name": T, "partition_indexes": [0]}]},
        GROUP,
    ),
    ("FindCoordinator group", ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0}, GROUP),
    ("FindCoordinator transaction", ApiKey.FIND_COORDINATOR, 3, {"key": "tx", "key_type": 1}, TXN),
    (
        "JoinGroup",
        ApiKey.JOIN_GROUP,
        5,
        {
            "group_id": "g",
            "session_timeout_ms": 10000,
            "rebalance_timeout_ms": 10000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
        GROUP,
    ),
    (
        "SyncGroup",
        ApiKey.SYNC_GROUP,
        3,
        {"group_id": "g", "generation_id": 1, "member_id": "m", "assignments": []},
        GROUP,
    ),
    ("Heartbeat", ApiKey.HEARTBEAT, 3, {"group_id": "g", "generation_id": 1, "member_id": "m"}, GROUP),
    ("LeaveGroup", ApiKey.LEAVE_GROUP, 3, {"group_id": "g", "members": [{"member_id": "m"}]}, GROUP),
    ("DescribeGroups", ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g"]}, GROUP),
    ("DeleteGroups", ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]}, GROUP),
    (
        "OffsetDelete",
        ApiKey.OFFSET_DELETE,
        0,
        {"group_id": "g", "topics": [{"name": T, "partitions": PARTS}]},
        GROUP,
    ),
    (
        "CreateTopics",
        ApiKey.CREATE_TOPICS,
        5,
        {
            "topics": [
                {
                    "name": "new-one",
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout_ms": 5000,
        },
        TOPIC,
    ),
    ("DeleteTopics", ApiKey.DELETE_TOPICS, 5, {"topic_names": [T], "timeout_ms": 5000}, TOPIC),
    (
        "CreatePartitions",
        ApiKey.CREATE_PARTITIONS,
        2,
        {
            "topics": [{"name": T, "count": 2, "assignments": None}],
            "timeout_ms": 5000,
            "validate_only": False,
        },
        TOPIC,
    ),
    (
        "DescribeConfigs topic",
        ApiKey.DESCRIBE_CONFIGS,
        3,
        {"resources": [{"resource_type": 2, "resource_name": T, "configuration_keys": None}]},
        TOPIC,
    ),
    (
        "DescribeConfigs broker",
        ApiKey.DESCRIBE_CONFIGS,
        3,
        {"resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": None}]},
        CLUSTER,
    ),
    (
        "AlterConfigs topic",
        ApiKey.ALTER_CONFIGS,
        1,
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": T,
                    "configs": [{"name": "retention.ms", "value": "1000"}],
                }
            ],
            "validate_only": False,
        },
        TOPIC,
    ),
    (
        "IncrementalAlterConfigs broker",
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        {
            "resources": [
                {
                    "resource_type": 4,
                    "resource_name": "",
                    "configs": [{"name": "log.retention.ms", "config_operation": 0, "value": "1000"}],
                }
            ],
            "validate_only": False,
        },
        CLUSTER,
    ),
    (
        "DeleteRecords",
        ApiKey.DELETE_RECORDS,
        1,
        {"topics": [{"name": T, "partitions": [{"partition_index": 0, "offset": 0}]}], "timeout_ms": 1000},
        TOPIC,
    ),
    (
        "InitProducerId idempotent",
        ApiKey.INIT_PRODUCER_ID,
        3,
        {"transactional_id": None, "transaction_timeout_ms": 60000},
        CLUSTER,
    ),
    (
        "InitProducerId transactional",
        ApiKey.INIT_PRODUCER_ID,
        3,
        {"transactional_id": "tx", "transaction_timeout_ms": 60000},
        TXN,
    ),
    (
        "AddPartitionsToTxn",
        ApiKey.ADD_PARTITIONS_TO_TXN,
        3,
        {
            "v3_and_below_transactional_id": "tx",
            "v3_and_below_producer_id": 1,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": T, "partitions": [0]}],
        },
        TXN,
    ),
    (
        "AddOffsetsToTxn",
        ApiKey.ADD_OFFSETS_TO_TXN,
        3,
        {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "group_id": "g"},
        TXN,
    ),
    (
        "EndTxn",
        ApiKey.END_TXN,
        3,
        {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "committed": True},
        TXN,
    ),
    (
        "TxnOffsetCommit",
        ApiKey.TXN_OFFSET_COMMIT,
        3,
        {
            "transactional_id": "tx",
            "group_id": "g",
            "producer_id": 1,
            "producer_epoch": 0,
            "topics": [{"name": T, "partitions": [{"partition_index": 0, "committed_offset": 1}]}],
        },
        TXN,
    ),
    (
        "DescribeAcls",
        ApiKey.DESCRIBE_ACLS,
        2,
        {"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1, "permission_type": 1},
        CLUSTER,
    ),
    (
        "CreateAcls",
        ApiKey.CREATE_ACLS,
        2,
        {
            "creations": [
                {
                    "resource_type": 2,
                    "resource_name": T,
                    "resource_pattern_type": 3,
                    "principal": "User:eve",
                    "host": "*",
                    "operation": 2,
                    "permission_type": 3,
                }
            ]
        },
        CLUSTER,
    ),
    (
        "DeleteAcls",
        ApiKey.DELETE_ACLS,
        2,
        {
            "filters": [
                {"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1, "permission_type": 1}
            ]
        },
        CLUSTER,
    ),
    ("DescribeUserScramCredentials", ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None}, CLUSTER),
    (
        "AlterUserScramCredentials",
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        0,
        {
            "deletions": [],
            "upsertions": [
                {"name": "eve", "mechanism": 1, "iterations": 4096, "salt": b"s", "salted_password": b"p"}
            ],
        },
        CLUSTER,
    ),
    (
        "ElectLeaders",
        ApiKey.ELECT_LEADERS,
        2,
        {"election_type": 0, "topic_partitions": None, "timeout_ms": 1000},
        CLUSTER,
    ),
    (
        "DescribeQuorum",
        ApiKey.DESCRIBE_QUORUM,
        1,
        {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]},
        CLUSTER,
    ),
    (
        "DescribeProducers",
        ApiKey.DESCRIBE_PRODUCERS,
        0,
        {"topics": [{"name": T, "partition_indexes": [0]}]},
        TOPIC,
    ),
    ("DescribeTransactions", ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx"]}, TXN),
    (
        "WriteTxnMarkers",
        ApiKey.WRITE_TXN_MARKERS,
        1,
        {
            "markers": [
                {
                    "producer_id": 1,
                    "producer_epoch": 0,
                    "transaction_result": True,
                    "topics": [{"name": T, "partition_indexes": [0]}],
                    "coordinator_epoch": 0,
                }
            ]
        },
        CLUSTER,
    ),
    (
        "ConsumerGroupHeartbeat",
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        0,
        {
            "group_id": "g",
            "member_id": "m",
            "member_epoch": 0,
            "rebalance_timeout_ms": 10000,
            "subscribed_topic_names": [T],
        },
        GROUP,
    ),
    ("ConsumerGroupDescribe", ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": ["g"]}, GROUP),
    (
        "ShareGroupHeartbeat",
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        {"group_id": "g", "member_id": "m", "member_epoch": 0, "subscribed_topic_names": [T]},
        GROUP,
    ),
    ("ShareGroupDescribe", ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": ["g"]}, GROUP),
    (
        "StreamsGroupHeartbeat",
        ApiKey.STREAMS_GROUP_HEARTBEAT,
        0,
        {"group_id": "g", "member_id": "m", "member_epoch": 5, "endpoint_information_epoch": 0},
        GROUP,
    ),
    ("StreamsGroupDescribe", ApiKey.STREAMS_GROUP_DESCRIBE, 0, {"group_ids": ["g"]}, GROUP),
    (
        "ShareFetch",
        ApiKey.SHARE_FETCH,
        1,
        {
            "group_id": "g",
            "member_id": "m",
            "share_session_epoch": 0,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 1000,
            "topics": [],
            "forgotten_topics_data": [],
        },
        GROUP,
    ),
    (
        "ShareAcknowledge",
        ApiKey.SHARE_ACKNOWLEDGE,
        1,
        {"group_id": "g", "member_id": "m", "share_session_epoch": 1, "topics": []},
        GROUP,
    ),
    (
        "DescribeShareGroupOffsets",
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        0,
        {"groups": [{"group_id": "g", "topics": None}]},
        GROUP,
    ),
    ("AlterShareGroupOffsets", ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": "g", "topics": []}, GROUP),
    ("DeleteShareGroupOffsets", ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": "g", "topics": []}, GROUP),
    (
        "DescribeTopicPartitions",
        ApiKey.DESCRIBE_TOPIC_PARTITIONS,
        0,
        {"topics": [{"name": T}], "response_partition_limit": 10, "cursor": None},
        TOPIC,
    ),
    (
        "UpdateFeatures",
        ApiKey.UPDATE_FEATURES,
        1,
        {
            "timeout_ms": 5000,
            "feature_updates": [{"feature": "group.version", "max_version_level": 1, "upgrade_type": 1}],
            "validate_only": True,
        },
        CLUSTER,
    ),
    (
        "DescribeConfigs of a group",
        ApiKey.DESCRIBE_CONFIGS,
        4,
        {"resources": [{"resource_type": 32, "resource_name": "g", "configuration_keys": None}]},
        GROUP,
    ),
    (
        "DescribeConfigs of a broker's loggers",
        ApiKey.DESCRIBE_CONFIGS,
        4,
        {"resources": [{"resource_type": 8, "resource_name": "1", "configuration_keys": None}]},
        CLUSTER,
    ),
    (
        "IncrementalAlterConfigs of a broker's loggers",
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        {
            "resources": [
                {
                    "resource_type": 8,
                    "resource_name": "1",
                    "configs": [{"name": "root", "config_operation": 0, "value": "INFO"}],
                }
            ],
            "validate_only": True,
        },
        CLUSTER,
    ),
    (
        "IncrementalAlterConfigs of a group",
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        {
            "resources": [
                {
                    "resource_type": 32,
                    "resource_name": "g",
                    "configs": [
                        {"name": "consumer.session.timeout.ms", "config_operation": 0, "value": "50000"}
                    ],
                }
            ],
            "validate_only": False,
        },
        GROUP,
    ),
    (
        "IncrementalAlterConfigs of a client metrics subscription",
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        {
            "resources": [
                {
                    "resource_type": 16,
                    "resource_name": "sub",
                    "configs": [{"name": "interval.ms", "config_operation": 0, "value": "1000"}],
                }
            ],
            "validate_only": False,
        },
        CLUSTER,
    ),
    ("DescribeClientQuotas", ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False}, CLUSTER),
    (
        "AlterClientQuotas",
        ApiKey.ALTER_CLIENT_QUOTAS,
        1,
        {
            "entries": [
                {
                    "entity": [{"entity_type": "user", "entity_name": "eve"}],
                    "ops": [{"key": "producer_byte_rate", "value": 1e9, "remove": False}],
                }
            ],
            "validate_only": False,
        },
        CLUSTER,
    ),
    ("ListConfigResources", ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": []}, CLUSTER),
    ("DescribeLogDirs", ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None}, CLUSTER),
    (
        "AlterReplicaLogDirs",
        ApiKey.ALTER_REPLICA_LOG_DIRS,
        2,
        {"dirs": [{"path": "/nowhere", "topics": [{"name": T, "partitions": [0]}]}]},
        CLUSTER,
    ),
    ("PylogClientMetrics", 32002, 0, {"client_instance_ids": None, "include_metrics": True}, CLUSTER),
]
