"""OffsetCommit / OffsetFetch over a real socket: versions, validation, restarts and retention."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

from groups_helpers import commit, create, describe, fetch_offsets, find, heartbeat, stable_member, wait_until
from harness import BrokerThread, Client
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.clock import SYSTEM_CLOCK

E = ErrorCode


def test_commit_and_fetch_every_version(client: Client) -> None:
    create(client, "t", partitions=2)
    find(client, "g")
    for v in range(2, 10):
        assert commit(client, "g", {("t", 0): 10 + v, ("t", 1): 20 + v}, version=v, metadata=f"v{v}") == {
            ("t", 0): 0,
            ("t", 1): 0,
        }
        for fv in range(1, 8):
            error, got = fetch_offsets(client, "g", {"t": [0, 1]}, version=fv)
            assert error == 0 and got == {("t", 0): (10 + v, 0), ("t", 1): (20 + v, 0)}, (v, fv)
    resp = client.request(
        ApiKey.OFFSET_FETCH, 5, {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]}
    )
    p = resp.topics[0].partitions[0]
    assert (p.committed_offset, p.committed_leader_epoch, p.metadata) == (19, 3, "v9")


def test_fetch_all_unknown_and_multi_group(client: Client) -> None:
    create(client, "t", partitions=3)
    find(client, "a")
    find(client, "b")
    assert commit(client, "a", {("t", 0): 5, ("t", 2): 7}) == {("t", 0): 0, ("t", 2): 0}
    # topics null: everything the group committed.
    assert fetch_offsets(client, "a", None, version=2) == (0, {("t", 0): (5, 0), ("t", 2): (7, 0)})
    # Never committed, unknown group: offset -1 and no error.
    assert fetch_offsets(client, "a", {"t": [1]}) == (0, {("t", 1): (-1, 0)})
    assert fetch_offsets(client, "nobody", {"t": [0]}) == (0, {("t", 0): (-1, 0)})
    for v in (8, 9):
        resp = client.request(
            ApiKey.OFFSET_FETCH,
            v,
            {
                "groups": [
                    {"group_id": "a", "member_id": None, "member_epoch": -1, "topics": None},
                    {
                        "group_id": "b",
                        "member_id": None,
                        "member_epoch": -1,
                        "topics": [{"name": "t", "partition_indexes": [0]}],
                    },
                ],
                "require_stable": True,
            },
        )
        got = {
            g.group_id: (
                g.error_code,
                {(t.name, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions},
            )
            for g in resp.groups
        }
        assert got == {"a": (0, {("t", 0): 5, ("t", 2): 7}), "b": (0, {("t", 0): -1})}


def test_commit_validation(client: Client) -> None:
    create(client, "t")
    assert commit(client, "v", {("t", 0): 1, ("nope", 0): 1, ("t", 9): 1}) == {
        ("t", 0): E.COORDINATOR_NOT_AVAILABLE,  # no FindCoordinator yet: no __consumer_offsets
        ("nope", 0): E.COORDINATOR_NOT_AVAILABLE,
        ("t", 9): E.COORDINATOR_NOT_AVAILABLE,
    }
    find(client, "v")
    assert commit(client, "v", {("t", 0): 1, ("nope", 0): 1, ("t", 9): 1}) == {
        ("t", 0): 0,
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert commit(client, "", {("t", 0): 1}) == {("t", 0): E.INVALID_GROUP_ID}
    mid, gen = stable_member(client, "members")
    assert commit(client, "members", {("t", 0): 3}, generation=gen, member_id=mid) == {("t", 0): 0}
    assert commit(client, "members", {("t", 0): 3}, generation=gen + 1, member_id=mid) == {
        ("t", 0): E.ILLEGAL_GENERATION
    }
    assert commit(client, "members", {("t", 0): 3}, generation=gen, member_id="x") == {
        ("t", 0): E.UNKNOWN_MEMBER_ID
    }
    # A standalone commit into a group that has members.
    assert commit(client, "members", {("t", 0): 3}) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # v9 tells an unknown group from a stale generation.
    assert commit(client, "fresh", {("t", 0): 3}, generation=1, member_id="m", version=9) == {
        ("t", 0): E.GROUP_ID_NOT_FOUND
    }
    assert commit(client, "fresh", {("t", 0): 3}, generation=1, member_id="m", version=8) == {
        ("t", 0): E.ILLEGAL_GENERATION
    }
    assert commit(client, "meta", {("t", 0): 3}, metadata="x" * 5000) == {
        ("t", 0): E.OFFSET_METADATA_TOO_LARGE
    }


def test_offset_commit_v1_is_answered_unsupported(broker: BrokerThread) -> None:
    def s16(s: str) -> bytes:
        return struct.pack(">h", len(s)) + s.encode()

    body = (
        s16("g")
        + struct.pack(">i", -1)
        + s16("")
        + struct.pack(">i", 1)
        + s16("t")
        + struct.pack(">i", 1)
        + struct.pack(">iqq", 0, 5, -1)
        + s16("")
    )
    msg = struct.pack(">hhi", ApiKey.OFFSET_COMMIT, 1, 42) + s16("raw") + body
    with socket.create_connection(broker.address, timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(msg)) + msg)
        head = sock.recv(4)
        size = struct.unpack(">i", head)[0]
        data = b""
        while len(data) < size:
            data += sock.recv(size - len(data))
    corr, n_topics = struct.unpack(">ii", data[:8])
    assert corr == 42 and n_topics == 1
    assert struct.unpack(">h", data[-2:])[0] == E.UNSUPPORTED_VERSION


def test_offsets_and_groups_survive_a_restart(tmp_path: Path) -> None:
    b = BrokerThread(tmp_path).start()
    try:
        c = Client(b.address)
        create(c, "t", partitions=2)
        find(c, "kept")
        assert commit(c, "kept", {("t", 0): 11, ("t", 1): 22}) == {("t", 0): 0, ("t", 1): 0}
        mid, gen = stable_member(c, "live", assignment=b"plan")
        assert commit(c, "live", {("t", 0): 5}, generation=gen, member_id=mid) == {("t", 0): 0}
        assert commit(c, "kept", {("t", 1): 23}) == {("t", 1): 0}
        c.close()
    finally:
        b.stop()

    b = BrokerThread(tmp_path).start()
    try:
        c = Client(b.address)
        assert fetch_offsets(c, "kept", {"t": [0, 1]}) == (0, {("t", 0): (11, 0), ("t", 1): (23, 0)})
        assert fetch_offsets(c, "live", None) == (0, {("t", 0): (5, 0)})
        # The group comes back Stable with its member, generation and assignment.
        (g,) = describe(c, "live")
        assert g.group_state == "Stable" and [(m.member_id, m.member_assignment) for m in g.members] == [
            (mid, b"plan")
        ]
        assert heartbeat(c, "live", gen, mid) == 0
        c.close()
    finally:
        b.stop()


def test_offsets_retention(tmp_path: Path) -> None:
    config = {"offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "50"}
    b = BrokerThread(tmp_path, config).start()
    try:
        c = Client(b.address)
        create(c, "t")
        find(c, "old")
        assert commit(c, "old", {("t", 0): 9}) == {("t", 0): 0}
        assert fetch_offsets(c, "old", {"t": [0]}) == (0, {("t", 0): (9, 0)})

        # Two minutes pass on the coordinator's clock: the standalone group's offsets are due.
        shell = b.broker.groups
        assert shell is not None
        b.call(setattr, shell, "clock", lambda: SYSTEM_CLOCK.wall_ms() + 120_000)
        wait_until(lambda: fetch_offsets(c, "old", {"t": [0]})[1] == {("t", 0): (-1, 0)}, "offsets to expire")
        c.close()
    finally:
        b.stop()

    b = BrokerThread(tmp_path).start()
    try:
        c = Client(b.address)
        # The expiry is durable, and the emptied standalone group is gone.
        assert fetch_offsets(c, "old", {"t": [0]}) == (0, {("t", 0): (-1, 0)})
        listed = c.request(ApiKey.LIST_GROUPS, 4, {"states_filter": []})
        assert "old" not in {g.group_id for g in listed.groups}
        c.close()
    finally:
        b.stop()
