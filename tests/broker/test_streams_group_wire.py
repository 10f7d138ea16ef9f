"""Streams groups (KIP-1071) over a real socket against a broker process: two members join with a
word-count topology, the broker creates its internal topics, the members get disjoint active tasks
covering all of them, StreamsGroupDescribe / ListGroups / DescribeGroups show the group, and when
one member leaves the other gets every task; a restarted broker brings the group back from
__consumer_offsets."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import BrokerThread, Client
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

import pylog
from pylog.client.blocking import BlockingClient

GROUP = "wordcount"
SOURCE = "words"
REPARTITION = "wordcount-agg-repartition"
CHANGELOG = "wordcount-store-changelog"
TOPOLOGY = {
    "epoch": 0,
    "subtopologies": [
        {
            "subtopology_id": "0",
            "source_topics": [SOURCE],
            "source_topic_regex": [],
            "state_changelog_topics": [],
            "repartition_sink_topics": [REPARTITION],
            "repartition_source_topics": [],
            "copartition_groups": [],
        },
        {
            "subtopology_id": "1",
            "source_topics": [],
            "source_topic_regex": [],
            "state_changelog_topics": [
                {
                    "name": CHANGELOG,
                    "partitions": 0,
                    "replication_factor": 0,
                    "topic_configs": [{"key": "cleanup.policy", "value": "compact"}],
                }
            ],
            "repartition_sink_topics": [],
            "repartition_source_topics": [
                {"name": REPARTITION, "partitions": 0, "replication_factor": 0, "topic_configs": []}
            ],
            "copartition_groups": [],
        },
    ],
}
EVERY = {(s, p) for s in "01" for p in range(3)}


@pytest.fixture(scope="module")
def client() -> Iterator[BlockingClient]:
    config = {"group.streams.initial.rebalance.delay.ms": "200"}
    with pylog.LocalBroker(config=config) as broker, BlockingClient(broker.bootstrap_servers) as c:
        yield c


def heartbeat(c: BlockingClient, member: str, epoch: int, owned: set | None = None, **kw: Any) -> Any:
    body: dict[str, Any] = {
        "group_id": GROUP,
        "member_id": member,
        "member_epoch": epoch,
        "endpoint_information_epoch": 0,
        "rebalance_timeout_ms": 30000 if epoch == 0 else -1,
        "topology": TOPOLOGY if epoch == 0 else None,
        "process_id": f"process-{member}" if epoch == 0 else None,
        **kw,
    }
    if owned is not None:
        by: dict[str, list[int]] = {}
        for s, p in sorted(owned):
            by.setdefault(s, []).append(p)
        body["active_tasks"] = [{"subtopology_id": s, "partitions": ps} for s, ps in by.items()]
        body["standby_tasks"] = body["warmup_tasks"] = []
    resp = c.request(ApiKey.STREAMS_GROUP_HEARTBEAT, body)
    assert resp.error_code == 0, resp
    return resp


def tasks(resp: Any) -> set[tuple[str, int]] | None:
    if resp.active_tasks is None:
        return None
    return {(t.subtopology_id, p) for t in resp.active_tasks for p in t.partitions}


def until(check: Any, what: str, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_two_members_then_one(client: BlockingClient) -> None:
    assert client.version(ApiKey.STREAMS_GROUP_HEARTBEAT) == 0
    assert client.version(ApiKey.STREAMS_GROUP_DESCRIBE) == 0
    created = client.request(
        ApiKey.CREATE_TOPICS,
        {
            "topics": [
                {
                    "name": SOURCE,
                    "num_partitions": 3,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout_ms": 10000,
        },
    )
    assert created.topics[0].error_code == 0
    client.coordinator(GROUP)  # creates __consumer_offsets, as Kafka Streams' first FindCoordinator does

    first = heartbeat(client, "a", 0)
    status = {s.status_code: s.status_detail for s in first.status}
    assert status.keys() == {3, 5}  # MISSING_INTERNAL_TOPICS, ASSIGNMENT_DELAYED (initial rebalance delay)
    assert REPARTITION in status[3] and CHANGELOG in status[3]
    epochs = {"a": first.member_epoch}
    owned: dict[str, set] = {"a": tasks(first) or set()}

    def beat(m: str) -> Any:
        r = heartbeat(client, m, epochs[m], owned[m])
        epochs[m] = r.member_epoch
        if (got := tasks(r)) is not None:
            owned[m] = got
        return r

    until(lambda: beat("a").status == [] and owned["a"] == EVERY, "a never got every task")
    md = client.metadata([REPARTITION, CHANGELOG])
    assert {t: len(md.topics[t].partitions) for t in (REPARTITION, CHANGELOG)} == {
        REPARTITION: 3,
        CHANGELOG: 3,
    }

    second = heartbeat(client, "b", 0)
    epochs["b"], owned["b"] = second.member_epoch, tasks(second) or set()
    until(
        lambda: (
            [beat(m) for m in ("a", "b")] and owned["a"] | owned["b"] == EVERY and owned["a"] and owned["b"]
        ),
        "tasks never spread over both members",
    )
    until(
        lambda: all(beat(m).member_epoch == epochs["a"] == epochs["b"] for m in ("a", "b")), "no stable epoch"
    )
    assert not owned["a"] & owned["b"]

    described = client.request(
        ApiKey.STREAMS_GROUP_DESCRIBE, {"group_ids": [GROUP, "nope"], "include_authorized_operations": False}
    )
    group, missing = described.groups
    assert (group.error_code, group.group_state, group.group_epoch) == (0, "Stable", epochs["a"])
    assert [s.subtopology_id for s in group.topology.subtopologies] == ["0", "1"]
    assert group.topology.subtopologies[1].state_changelog_topics[0].partitions == 3
    by_member = {m.member_id: m for m in group.members}
    assert by_member.keys() == {"a", "b"}
    for m in ("a", "b"):
        got = {(t.subtopology_id, p) for t in by_member[m].assignment.active_tasks for p in t.partitions}
        assert got == owned[m] and by_member[m].process_id == f"process-{m}"
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND

    listed = client.request(ApiKey.LIST_GROUPS, {"states_filter": [], "types_filter": ["streams"]})
    assert [(g.group_id, g.group_type, g.protocol_type) for g in listed.groups] == [
        (GROUP, "streams", "streams")
    ]
    classic = client.request(
        ApiKey.DESCRIBE_GROUPS, {"groups": [GROUP], "include_authorized_operations": False}
    )
    assert (classic.groups[0].protocol_type, len(classic.groups[0].members)) == ("streams", 2)

    left = heartbeat(client, "b", -1)
    assert left.member_epoch == -1
    until(lambda: beat("a") is not None and owned["a"] == EVERY, "a never took b's tasks back")
    only = client.request(
        ApiKey.STREAMS_GROUP_DESCRIBE, {"group_ids": [GROUP], "include_authorized_operations": False}
    )
    assert [m.member_id for m in only.groups[0].members] == ["a"]


def test_bad_topologies_get_kafkas_errors(client: BlockingClient) -> None:
    def join(topology: dict) -> Any:
        body = {
            "group_id": "bad",
            "member_id": "x",
            "member_epoch": 0,
            "endpoint_information_epoch": 0,
            "rebalance_timeout_ms": 1000,
            "topology": topology,
        }
        return client.request(ApiKey.STREAMS_GROUP_HEARTBEAT, body)

    internal = {
        **TOPOLOGY,
        "subtopologies": [{**TOPOLOGY["subtopologies"][0], "source_topics": ["__consumer_offsets"]}],
    }
    r = join(internal)
    assert r.error_code == ErrorCode.STREAMS_INVALID_TOPOLOGY and "__consumer_offsets" in r.error_message
    r = join({**TOPOLOGY, "subtopologies": [{**TOPOLOGY["subtopologies"][0], "source_topics": ["no good"]}]})
    assert r.error_code == ErrorCode.STREAMS_INVALID_TOPOLOGY
    r = join({**TOPOLOGY, "subtopologies": [{**TOPOLOGY["subtopologies"][0], "source_topics": ["absent"]}]})
    assert r.error_code == 0 and 1 in [s.status_code for s in r.status]  # MISSING_SOURCE_TOPICS


def test_the_group_survives_a_coordinator_restart(tmp_path: Path) -> None:
    """The group's records in __consumer_offsets bring it back: members, epochs and tasks."""
    config = {"group.streams.initial.rebalance.delay.ms": "0"}
    topology = {
        **TOPOLOGY,
        "subtopologies": [{**TOPOLOGY["subtopologies"][0], "repartition_sink_topics": []}],
    }
    body = {
        "group_id": GROUP,
        "member_id": "a",
        "member_epoch": 0,
        "endpoint_information_epoch": 0,
        "rebalance_timeout_ms": 30000,
        "topology": topology,
        "process_id": "p",
    }
    b = BrokerThread(tmp_path, config).start()
    c = Client(b.address)
    topics = [
        {"name": SOURCE, "num_partitions": 2, "replication_factor": 1, "assignments": [], "configs": []}
    ]
    assert (
        c.request(ApiKey.CREATE_TOPICS, 5, {"topics": topics, "timeout_ms": 5000}).topics[0].error_code == 0
    )
    assert c.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [GROUP]}).coordinators
    until(lambda: c.request(ApiKey.STREAMS_GROUP_HEARTBEAT, 0, body).error_code == 0, "no coordinator")
    joined = c.request(ApiKey.STREAMS_GROUP_HEARTBEAT, 0, body)
    assert tasks(joined) == {("0", 0), ("0", 1)}
    c.close()
    b.stop()

    b = BrokerThread(tmp_path, config).start()
    try:
        c = Client(b.address)
        ask = {"group_ids": [GROUP], "include_authorized_operations": False}
        until(
            lambda: c.request(ApiKey.STREAMS_GROUP_DESCRIBE, 0, ask).groups[0].error_code == 0, "not loaded"
        )
        (group,) = c.request(ApiKey.STREAMS_GROUP_DESCRIBE, 0, ask).groups
        (member,) = group.members
        assert (member.member_id, member.member_epoch, member.process_id) == ("a", joined.member_epoch, "p")
        assert {(t.subtopology_id, p) for t in member.assignment.active_tasks for p in t.partitions} == {
            ("0", 0),
            ("0", 1),
        }
        assert group.topology.subtopologies[0].source_topics == [SOURCE]
        again = {**body, "member_epoch": joined.member_epoch, "topology": None, "process_id": None}
        r = c.request(ApiKey.STREAMS_GROUP_HEARTBEAT, 0, again)
        assert (r.error_code, r.member_epoch) == (0, joined.member_epoch)
        c.close()
    finally:
        b.stop()
