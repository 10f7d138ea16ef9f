"""ListGroups, DescribeGroups, DeleteGroups and OffsetDelete over a real socket."""

from __future__ import annotations

from groups_helpers import commit, create, describe, fetch_offsets, find, stable_member
from harness import Client
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

E = ErrorCode


def listed(
    c: Client, version: int = 5, states: list[str] | None = None, types: list[str] | None = None
) -> dict:
    resp = c.request(
        ApiKey.LIST_GROUPS, version, {"states_filter": states or [], "types_filter": types or []}
    )
    assert resp.error_code == 0
    return {g.group_id: g for g in resp.groups}


def test_list_and_describe(client: Client) -> None:
    create(client, "t")
    find(client, "standalone")
    assert commit(client, "standalone", {("t", 0): 1}) == {("t", 0): 0}
    mid, _ = stable_member(client, "active", topics=("t",))

    for v in range(6):
        got = listed(client, v)
        assert {k: g.protocol_type for k, g in got.items()} == {"standalone": "", "active": "consumer"}
    got = listed(client, 4)
    assert {k: g.group_state for k, g in got.items()} == {"standalone": "Empty", "active": "Stable"}
    assert list(listed(client, 4, states=["stable"])) == ["active"]
    assert list(listed(client, 4, states=["Empty"])) == ["standalone"]
    assert listed(client, 5)["active"].group_type == "classic"
    assert listed(client, 5, types=["consumer"]) == {}
    assert set(listed(client, 5, types=["Classic"])) == {"standalone", "active"}

    for v in range(6):
        active, unknown = describe(client, "active", "unknown", version=v)
        assert (active.error_code, active.group_state, active.protocol_data) == (0, "Stable", "range")
        assert [m.member_id for m in active.members] == [mid]
        assert (unknown.error_code, unknown.group_state, list(unknown.members)) == (0, "Dead", [])


def test_delete_groups(client: Client) -> None:
    create(client, "t")
    find(client, "empty")
    assert commit(client, "empty", {("t", 0): 3}) == {("t", 0): 0}
    stable_member(client, "busy")
    for v in range(3):
        resp = client.request(ApiKey.DELETE_GROUPS, v, {"groups_names": ["busy", "nothing"]})
        assert [(r.group_id, r.error_code) for r in resp.results] == [
            ("busy", E.NON_EMPTY_GROUP),
            ("nothing", E.GROUP_ID_NOT_FOUND),
        ]
    resp = client.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["empty"]})
    assert [(r.group_id, r.error_code) for r in resp.results] == [("empty", 0)]
    assert fetch_offsets(client, "empty", {"t": [0]}) == (0, {("t", 0): (-1, 0)})
    assert "empty" not in listed(client)


def test_offset_delete(client: Client) -> None:
    create(client, "t", partitions=2)
    create(client, "other")
    find(client, "g")
    assert commit(client, "g", {("t", 0): 1, ("t", 1): 2}) == {("t", 0): 0, ("t", 1): 0}

    def delete(group: str, topics: dict[str, list[int]]) -> tuple[int, dict[tuple[str, int], int]]:
        body = {
            "group_id": group,
            "topics": [
                {"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in topics.items()
            ],
        }
        resp = client.request(ApiKey.OFFSET_DELETE, 0, body)
        return resp.error_code, {
            (t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions
        }

    assert delete("g", {"t": [0], "nope": [0]}) == (
        0,
        {("t", 0): 0, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION},
    )
    assert fetch_offsets(client, "g", None) == (0, {("t", 1): (2, 0)})
    assert delete("missing", {"t": [0]}) == (E.GROUP_ID_NOT_FOUND, {})

    # A Stable consumer group keeps the offsets of topics it subscribes to.
    mid, gen = stable_member(client, "live", topics=("t",))
    assert commit(client, "live", {("t", 0): 5, ("other", 0): 6}, generation=gen, member_id=mid) == {
        ("t", 0): 0,
        ("other", 0): 0,
    }
    assert delete("live", {"t": [0], "other": [0]}) == (
        0,
        {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): 0},
    )
    assert fetch_offsets(client, "live", None) == (0, {("t", 0): (5, 0)})
