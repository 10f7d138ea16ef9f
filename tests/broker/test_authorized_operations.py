"""Authorized operations (KIP-430): the bitfield, and the handlers that report it when asked."""

from __future__ import annotations

from groups_helpers import commit, find
from harness import Client
from pylog.protocol.api import ApiKey
from test_produce_fetch import create

from pylog.security.acl_operations import (
    NOT_REQUESTED,
    AclOperation,
    ResourceType,
    authorized_operations,
    operations_if_requested,
    to_bitfield,
)

# READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11
TOPIC_BITS = (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11)
CLUSTER_BITS = (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12)
GROUP_BITS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)


def test_bitfields_without_an_authorizer() -> None:
    assert authorized_operations(ResourceType.TOPIC) == TOPIC_BITS
    assert authorized_operations(ResourceType.CLUSTER) == CLUSTER_BITS
    assert authorized_operations(ResourceType.GROUP) == GROUP_BITS
    assert operations_if_requested(False, ResourceType.TOPIC) == NOT_REQUESTED == -(2**31)


def test_an_authorizer_plugs_in_as_a_predicate() -> None:
    read_only = {AclOperation.READ, AclOperation.DESCRIBE}
    assert authorized_operations(ResourceType.TOPIC, read_only.__contains__) == to_bitfield(read_only)
    assert authorized_operations(ResourceType.GROUP, lambda op: False) == 0


def test_metadata(client: Client) -> None:
    create(client, "ops")

    def ask(version: int, topic: bool, cluster: bool) -> tuple[int, int]:
        body = {
            "topics": [{"name": "ops"}],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": cluster,
            "include_topic_authorized_operations": topic,
        }
        resp = client.request(ApiKey.METADATA, version, body)
        cluster = getattr(resp, "cluster_authorized_operations", None)
        return resp.topics[0].topic_authorized_operations, cluster

    assert ask(10, True, True) == (TOPIC_BITS, CLUSTER_BITS)
    assert ask(10, False, False) == (NOT_REQUESTED, NOT_REQUESTED)
    assert ask(12, True, True)[0] == TOPIC_BITS  # v11+ carries no cluster field: DescribeCluster has it
    assert ask(12, False, False)[0] == NOT_REQUESTED


def test_describe_cluster(client: Client) -> None:
    def ask(include: bool) -> int:
        body = {"include_cluster_authorized_operations": include, "endpoint_type": 1}
        return client.request(ApiKey.DESCRIBE_CLUSTER, 1, body).cluster_authorized_operations

    assert (ask(True), ask(False)) == (CLUSTER_BITS, NOT_REQUESTED)


def test_describe_groups(client: Client) -> None:
    create(client, "t")
    find(client, "g")
    assert commit(client, "g", {("t", 0): 1}) == {("t", 0): 0}

    def ask(include: bool) -> int:
        body = {"groups": ["g"], "include_authorized_operations": include}
        [group] = client.request(ApiKey.DESCRIBE_GROUPS, 5, body).groups
        assert group.error_code == 0, group
        return group.authorized_operations

    assert (ask(True), ask(False)) == (GROUP_BITS, NOT_REQUESTED)
