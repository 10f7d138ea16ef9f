"""The controller listener as ``--bootstrap-controller`` tools use it (KIP-919), with requests
encoded by kafka-python's codec; and a kafka-python admin whose cached controller dies, which
keeps working because brokers name a live broker (that forwards) as the controller."""

from __future__ import annotations

import time
from typing import Any

import kp_wire
from cluster_support import wait_for
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafka.protocol.admin.cluster import DescribeClusterRequest, DescribeQuorumRequest
from kafka.protocol.admin.configs import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.admin.topics import CreateTopicsRequest
from kafka.protocol.metadata import ApiVersionsRequest

from pylog.local_cluster import LocalCluster

MISMATCHED_ENDPOINT_TYPE = 114
BROKERS, CONTROLLERS = 1, 2
TOPIC, BROKER = 2, 4


def describe_cluster(address: str, endpoint_type: int) -> Any:
    return kp_wire.call(
        address,
        DescribeClusterRequest,
        1,
        include_cluster_authorized_operations=False,
        endpoint_type=endpoint_type,
    )


def test_bootstrap_controller_apis(cluster_factory: Any) -> None:
    cluster: LocalCluster = cluster_factory(3)
    controllers = {n.node_id: n.controller_bootstrap for n in cluster.nodes.values()}

    # ApiVersions: what the controllers serve, with the finalized features
    av = kp_wire.call(
        controllers[1], ApiVersionsRequest, 3, client_software_name="t", client_software_version="1"
    )
    keys = {k.api_key for k in av.api_keys}
    assert {60, 55, 32, 44, 33, 19, 20, 37, 57, 29, 30, 31, 49, 50, 51} <= keys
    assert 3 not in keys and 0 not in keys  # no Metadata, no Produce: a controller is not a broker
    assert {f.name: f.max_version_level for f in av.finalized_features}["metadata.version"] == 29

    # DescribeCluster: the controllers and the active one, the same from each of them
    seen = [describe_cluster(address, CONTROLLERS) for address in controllers.values()]
    assert all(r.error_code == 0 and r.endpoint_type == CONTROLLERS for r in seen)
    leader = seen[0].controller_id
    assert {r.controller_id for r in seen} == {leader} and leader in controllers
    assert sorted((b.broker_id, f"{b.host}:{b.port}") for b in seen[0].brokers) == sorted(controllers.items())
    # each listener answers only its own endpoint type
    assert describe_cluster(controllers[1], BROKERS).error_code == MISMATCHED_ENDPOINT_TYPE
    assert describe_cluster(cluster.node(1).bootstrap, CONTROLLERS).error_code == MISMATCHED_ENDPOINT_TYPE

    # DescribeQuorum, asked of the active controller
    Q = DescribeQuorumRequest.TopicData
    q = kp_wire.call(
        controllers[leader],
        DescribeQuorumRequest,
        1,
        topics=[Q(topic_name="__cluster_metadata", partitions=[Q.PartitionData(partition_index=0)])],
    )
    [part] = q.topics[0].partitions
    assert q.error_code == 0 and part.leader_id == leader
    assert sorted(v.replica_id for v in part.current_voters) == [1, 2, 3]

    # DescribeConfigs of a controller's own node config
    R = DescribeConfigsRequest.DescribeConfigsResource
    dc = kp_wire.call(
        controllers[2],
        DescribeConfigsRequest,
        4,
        resources=[
            R(resource_type=BROKER, resource_name="2", configuration_keys=["node.id", "process.roles"])
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    [result] = dc.results
    assert result.error_code == 0
    assert {c.name: c.value for c in result.configs} == {"node.id": "2", "process.roles": "broker,controller"}

    # a topic created and re-configured through the controller listener, seen by every broker
    T = CreateTopicsRequest.CreatableTopic
    ct = kp_wire.call(
        controllers[leader],
        CreateTopicsRequest,
        7,
        topics=[T(name="via-controller", num_partitions=2, replication_factor=3, assignments=[], configs=[])],
        timeout_ms=15000,
        validate_only=False,
    )
    assert [t.error_code for t in ct.topics] == [0]
    A = IncrementalAlterConfigsRequest.AlterConfigsResource
    ia = kp_wire.call(
        controllers[leader],
        IncrementalAlterConfigsRequest,
        1,
        resources=[
            A(
                resource_type=TOPIC,
                resource_name="via-controller",
                configs=[A.AlterableConfig(name="retention.ms", config_operation=0, value="3600000")],
            )
        ],
        validate_only=False,
    )
    assert [r.error_code for r in ia.responses] == [0]
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=20000)
    try:
        from kafka.admin import ConfigResource, ConfigResourceType

        cfg = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "via-controller")])
        assert cfg["topic"]["via-controller"]["retention.ms"]["value"] == "3600000"
    finally:
        admin.close()

    # client quotas: set through the controller listener and through a broker that is not the
    # active controller (forwarded in an Envelope), then described by every broker
    E = AlterClientQuotasRequest.EntryData

    def set_quota(address: str, client_id: str) -> Any:
        entity = [E.EntityData(entity_type="client-id", entity_name=client_id)]
        ops = [E.OpData(key="producer_byte_rate", value=1048576.0, remove=False)]
        return kp_wire.call(
            address, AlterClientQuotasRequest, 1, entries=[E(entity=entity, ops=ops)], validate_only=False
        )

    follower = next(n for n in controllers if n != leader)
    assert [e.error_code for e in set_quota(controllers[leader], "via-controller").entries] == [0]
    assert [e.error_code for e in set_quota(cluster.node(follower).bootstrap, "via-broker").entries] == [0]

    def quotas_on(node: int) -> set[str] | None:
        address = cluster.node(node).bootstrap
        r = kp_wire.call(address, DescribeClientQuotasRequest, 1, components=[], strict=False)
        names = {e.entity[0].entity_name for e in r.entries or []}
        return names if names == {"via-controller", "via-broker"} else None

    for node in controllers:
        wait_for(lambda node=node: quotas_on(node), 15, f"the quotas on broker {node}")


def test_an_admin_whose_cached_controller_dies_keeps_working(cluster_factory: Any) -> None:
    """kafka-python caches the controller a broker named; Kafka's KRaft brokers name any live broker
    (which forwards), so killing the active controller does not strand the admin."""
    cluster: LocalCluster = cluster_factory(3)
    active = cluster.controller_id()
    for attempt in range(20):  # brokers name a random live broker: find an admin that cached another one
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=20000)
        admin.create_topics([NewTopic(f"warm-{attempt}", 1, 3)])
        if admin._controller_id not in (None, -1, active):
            break
        admin.close()
    else:
        raise AssertionError("20 admins all cached the active controller")
    try:
        cluster.kill(active)
        start = time.monotonic()
        admin.create_topics([NewTopic("after-failover", 3, 2)])  # forwarded to the new controller
        took = time.monotonic() - start
        assert admin._controller_id != active
        assert took < 20, took
        wait_for(lambda: "after-failover" in admin.list_topics(), 20, "the topic is listed")
    finally:
        admin.close()
