"""FindCoordinator, JoinGroup, SyncGroup, Heartbeat and LeaveGroup over a real socket."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from groups_helpers import (
    describe,
    find,
    heartbeat,
    join,
    join_new,
    send_join,
    stable_member,
    sync,
    sync_body,
    wait_until,
)
from harness import BrokerThread, Client
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

E = ErrorCode


def test_api_versions_advertise_the_group_apis(client: Client) -> None:
    resp = client.request(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert {k: got[k] for k in (8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47)} == {
        ApiKey.OFFSET_COMMIT: (0, 9),
        ApiKey.OFFSET_FETCH: (0, 9),
        ApiKey.FIND_COORDINATOR: (0, 6),
        ApiKey.JOIN_GROUP: (0, 7),
        ApiKey.HEARTBEAT: (0, 4),
        ApiKey.LEAVE_GROUP: (0, 5),
        ApiKey.SYNC_GROUP: (0, 5),
        ApiKey.DESCRIBE_GROUPS: (0, 5),
        ApiKey.LIST_GROUPS: (0, 5),
        ApiKey.DELETE_GROUPS: (0, 2),
        ApiKey.OFFSET_DELETE: (0, 0),
    }


def test_find_coordinator_creates_the_offsets_topic(client: Client, broker: BrokerThread) -> None:
    host, port = broker.address
    me = broker.broker.node_id
    for v in range(4):
        r = client.request(ApiKey.FIND_COORDINATOR, v, {"key": "g", "key_type": 0})
        assert (r.error_code, r.node_id, r.host, r.port) == (0, me, host, port)
    for v in (4, 5, 6):
        r = client.request(ApiKey.FIND_COORDINATOR, v, {"key_type": 0, "coordinator_keys": ["a", "b"]})
        assert [(c.key, c.error_code, c.node_id, c.port) for c in r.coordinators] == [
            ("a", 0, me, port),
            ("b", 0, me, port),
        ]
    # Transactional ids are found too (tests/broker/test_txn_broker.py covers them).
    r = client.request(ApiKey.FIND_COORDINATOR, 3, {"key": "txn", "key_type": 1})
    assert (r.error_code, r.node_id) == (0, me)
    r = client.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 7, "coordinator_keys": ["x"]})
    assert r.coordinators[0].error_code == E.INVALID_REQUEST

    meta = client.request(ApiKey.METADATA, 12, {"topics": [{"name": "__consumer_offsets"}]})
    (topic,) = meta.topics
    assert topic.error_code == 0 and topic.is_internal and len(topic.partitions) == 10


def test_one_member_lifecycle(client: Client) -> None:
    find(client, "solo")
    first = join(client, "solo")
    assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id.startswith("pylog-test-")
    r = join(client, "solo", first.member_id)
    assert (r.error_code, r.generation_id, r.leader, r.member_id) == (0, 1, first.member_id, first.member_id)
    assert r.protocol_name == "range" and [m.member_id for m in r.members] == [first.member_id]
    mid = r.member_id

    s = sync(client, "solo", 1, mid, {mid: b"plan"})
    assert (s.error_code, s.assignment) == (0, b"plan")
    assert heartbeat(client, "solo", 1, mid) == 0
    assert heartbeat(client, "solo", 2, mid) == E.ILLEGAL_GENERATION
    assert heartbeat(client, "solo", 1, "nobody") == E.UNKNOWN_MEMBER_ID

    (g,) = describe(client, "solo")
    assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (
        0,
        "Stable",
        "consumer",
        "range",
    )
    (m,) = g.members
    assert (m.member_id, m.client_id, m.member_assignment) == (mid, "pylog-test", b"plan")
    assert m.client_host == "/127.0.0.1"

    resp = client.request(
        ApiKey.LEAVE_GROUP,
        5,
        {"group_id": "solo", "members": [{"member_id": mid, "group_instance_id": None}]},
    )
    assert resp.error_code == 0 and [(x.member_id, x.error_code) for x in resp.members] == [(mid, 0)]
    (g,) = describe(client, "solo")
    assert g.group_state == "Empty" and list(g.members) == []
    assert heartbeat(client, "solo", 1, mid) == E.UNKNOWN_MEMBER_ID


def test_version_zero_requests(client: Client) -> None:
    find(client, "old")
    r = join(client, "old", version=0)  # no MEMBER_ID_REQUIRED before v4
    assert r.error_code == 0 and r.generation_id == 1 and r.protocol_name == "range"
    mid = r.member_id
    s = client.request(ApiKey.SYNC_GROUP, 0, sync_body("old", 1, mid, {mid: b"x"}))
    assert (s.error_code, s.assignment) == (0, b"x")
    assert heartbeat(client, "old", 1, mid, version=0) == 0
    # v0-2 carry one member; its error is the top-level error.
    r0 = client.request(ApiKey.LEAVE_GROUP, 0, {"group_id": "old", "member_id": "stranger"})
    assert r0.error_code == E.UNKNOWN_MEMBER_ID
    r0 = client.request(ApiKey.LEAVE_GROUP, 1, {"group_id": "old", "member_id": mid})
    assert r0.error_code == 0
    assert join(client, "", version=0).error_code == E.INVALID_GROUP_ID


def test_second_member_triggers_a_rebalance(broker: BrokerThread, client: Client) -> None:
    a_id, gen = stable_member(client, "pair")
    b = Client(broker.address, client_id="second")
    try:
        r = join(b, "pair")
        assert r.error_code == E.MEMBER_ID_REQUIRED
        b_corr = send_join(b, "pair", r.member_id)  # parked until the leader rejoins
        assert heartbeat(client, "pair", gen, a_id) == E.REBALANCE_IN_PROGRESS
        ra = join(client, "pair", a_id)
        _, rb = b.recv()
        assert b_corr is not None
        assert ra.generation_id == rb.generation_id == gen + 1
        assert ra.leader == a_id and rb.leader == a_id
        assert sorted(m.member_id for m in ra.members) == sorted([a_id, rb.member_id])
        assert list(rb.members) == []

        # The follower's SyncGroup waits for the leader's assignment.
        b.send(ApiKey.SYNC_GROUP, 3, sync_body("pair", ra.generation_id, rb.member_id))
        s = sync(client, "pair", ra.generation_id, a_id, {a_id: b"A", rb.member_id: b"B"})
        assert s.assignment == b"A"
        _, sb = b.recv()
        assert (sb.error_code, sb.assignment) == (0, b"B")
        (g,) = describe(client, "pair")
        assert g.group_state == "Stable" and len(g.members) == 2
    finally:
        b.close()


def test_batched_leave_and_static_members(broker: BrokerThread, client: Client) -> None:
    a_id, gen = stable_member(client, "statics", instance="inst-a")
    b = Client(broker.address, client_id="restarted")
    try:
        # The same instance id rejoining (a restarted consumer) takes over without a rebalance.
        r = join(b, "statics", instance="inst-a")
        assert r.error_code == 0 and r.generation_id == gen and r.member_id != a_id
        assert heartbeat(client, "statics", gen, a_id, instance="inst-a") == E.FENCED_INSTANCE_ID
        assert heartbeat(b, "statics", gen, r.member_id, instance="inst-a") == 0
        s = sync(b, "statics", gen, r.member_id, instance="inst-a")
        assert (s.error_code, s.assignment) == (0, b"a")  # the old member's assignment
    finally:
        b.close()
    resp = client.request(
        ApiKey.LEAVE_GROUP,
        4,
        {
            "group_id": "statics",
            "members": [
                {"member_id": "", "group_instance_id": "inst-a"},
                {"member_id": "ghost", "group_instance_id": None},
            ],
        },
    )
    assert resp.error_code == 0
    assert [(m.group_instance_id, m.error_code) for m in resp.members] == [
        ("inst-a", 0),
        (None, E.UNKNOWN_MEMBER_ID),
    ]
    (g,) = describe(client, "statics")
    assert g.group_state == "Empty"


@pytest.fixture
def fast_broker(tmp_path: Path) -> Iterator[BrokerThread]:
    b = BrokerThread(tmp_path / "data", {"group.min.session.timeout.ms": "100"}).start()
    yield b
    b.stop()


def test_session_expiry_removes_a_silent_member(fast_broker: BrokerThread) -> None:
    a, b = Client(fast_broker.address), Client(fast_broker.address)
    try:
        a_id, gen = stable_member(a, "expiry", session_ms=1000)
        r = join(b, "expiry")
        b_corr = send_join(b, "expiry", r.member_id, session_ms=300)
        ra = join(a, "expiry", a_id, session_ms=1000)
        _, rb = b.recv()
        assert b_corr and ra.generation_id == rb.generation_id == gen + 1
        sync_corr = b.send(ApiKey.SYNC_GROUP, 3, sync_body("expiry", ra.generation_id, rb.member_id))
        sync(a, "expiry", ra.generation_id, a_id, {a_id: b"A", rb.member_id: b"B"})
        assert sync_corr and b.recv()[1].error_code == 0
        # b goes silent; a keeps heartbeating until it is told to rejoin.
        wait_until(
            lambda: heartbeat(a, "expiry", ra.generation_id, a_id) == E.REBALANCE_IN_PROGRESS,
            "the coordinator to expire the silent member",
        )
        r2 = join(a, "expiry", a_id, session_ms=1000)
        assert r2.generation_id == ra.generation_id + 1 and [m.member_id for m in r2.members] == [a_id]
    finally:
        a.close()
        b.close()


def test_parked_join_of_a_closed_connection_is_dropped(broker: BrokerThread, client: Client) -> None:
    a_id, gen = stable_member(client, "gone")
    b = Client(broker.address)
    r = join(b, "gone")
    send_join(b, "gone", r.member_id)
    b.close()  # its JoinGroup is still parked
    ra = join(client, "gone", a_id)
    assert ra.error_code == 0 and ra.generation_id == gen + 1 and len(ra.members) == 2
    # The broker carries on serving.
    s = sync(client, "gone", ra.generation_id, a_id, {a_id: b"A"})
    assert s.error_code == 0
    assert join_new(Client(broker.address), "other").error_code == 0
