"""Fetch sessions (KIP-227) over a real socket with our own codec: a full fetch that asks for a
session gets one; an incremental fetch naming nothing is answered only the partitions with new
data (at once, or when a long poll wakes); session errors are top-level codes."""

from __future__ import annotations

from typing import Any

from harness import BrokerThread, Client
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from records_util import make_batch, values_of
from test_produce_fetch import create, produce

PARTITIONS = 6


def session_fetch(
    client: Client,
    session_id: int,
    epoch: int,
    partitions: dict[int, int] | None = None,
    *,
    topic: str,
    forgotten: list[int] | None = None,
    max_wait_ms: int = 0,
) -> Any:
    body = {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": p, "fetch_offset": o, "partition_max_bytes": 1 << 16}
                    for p, o in (partitions or {}).items()
                ],
            }
        ]
        if partitions
        else [],
        "forgotten_topics_data": [{"topic": topic, "partitions": forgotten}] if forgotten else [],
        "rack_id": "",
    }
    return client.request(ApiKey.FETCH, 12, body)


def answered(resp: Any) -> dict[int, list[bytes]]:
    return {p.partition_index: values_of(p.records) for t in resp.responses for p in t.partitions}


def seed(client: Client, topic: str) -> None:
    create(client, topic, partitions=PARTITIONS)
    for p in range(PARTITIONS):
        assert produce(client, topic, make_batch([f"old{p}".encode()]), partition=p).error_code == 0


def test_incremental_fetch_answers_only_partitions_with_new_data(client: Client) -> None:
    seed(client, "s1")
    full = session_fetch(client, 0, 0, {p: 1 for p in range(PARTITIONS)}, topic="s1")
    assert full.error_code == 0 and full.session_id != 0
    assert sorted(answered(full)) == list(range(PARTITIONS))  # a full answer names every partition
    sid = full.session_id
    # nothing new since: an incremental fetch naming nothing is answered nothing
    empty = session_fetch(client, sid, 1, topic="s1")
    assert (empty.error_code, empty.session_id, answered(empty)) == (0, sid, {})
    assert produce(client, "s1", make_batch([b"new1"]), partition=1).error_code == 0
    assert produce(client, "s1", make_batch([b"new4"]), partition=4).error_code == 0
    got = session_fetch(client, sid, 2, topic="s1")
    assert got.error_code == 0 and answered(got) == {1: [b"new1"], 4: [b"new4"]}
    # the client moves its offsets for the two partitions it read; then nothing is new again
    moved = session_fetch(client, sid, 3, {1: 2, 4: 2}, topic="s1")
    assert answered(moved) == {}
    # a partition forgotten is no longer fetched
    assert produce(client, "s1", make_batch([b"new0"]), partition=0).error_code == 0
    assert produce(client, "s1", make_batch([b"new5"]), partition=5).error_code == 0
    got = session_fetch(client, sid, 4, topic="s1", forgotten=[0])
    assert answered(got) == {5: [b"new5"]}


def test_a_long_poll_covers_the_whole_session(broker: BrokerThread, client: Client) -> None:
    seed(client, "s2")
    full = session_fetch(client, 0, 0, {p: 1 for p in range(PARTITIONS)}, topic="s2")
    sid = full.session_id
    assert sid != 0
    body = {
        "replica_id": -1, "max_wait_ms": 20000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": sid, "session_epoch": 1, "topics": [], "forgotten_topics_data": [], "rack_id": "",
    }
    corr = client.send(ApiKey.FETCH, 12, body)  # waits: nothing new in any partition
    other = Client(broker.address)
    try:
        assert produce(other, "s2", make_batch([b"wake3"]), partition=3).error_code == 0
    finally:
        other.close()
    got, resp = client.recv()
    assert got == corr and resp.error_code == 0 and answered(resp) == {3: [b"wake3"]}


def test_session_errors_are_top_level(client: Client) -> None:
    seed(client, "s3")
    full = session_fetch(client, 0, 0, {0: 0}, topic="s3")
    sid = full.session_id
    wrong = session_fetch(client, sid, 7, topic="s3")
    assert (wrong.error_code, wrong.responses) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, [])
    unknown = session_fetch(client, sid + 1 if sid < 2**31 - 2 else 1, 1, topic="s3")
    assert (unknown.error_code, unknown.responses) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, [])
    # the session is intact after both: epoch 1 is still the next
    assert session_fetch(client, sid, 1, topic="s3").error_code == 0
    # epoch -1 closes it and answers sessionless; using it afterwards: not found
    closed = session_fetch(client, sid, -1, {0: 0}, topic="s3")
    assert (closed.error_code, closed.session_id, answered(closed)) == (0, 0, {0: [b"old0"]})
    assert session_fetch(client, sid, 2, topic="s3").error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_sessionless_fetches_are_full_each_time(client: Client) -> None:
    seed(client, "s4")
    for _ in range(2):
        resp = session_fetch(client, 0, -1, {p: 1 for p in range(PARTITIONS)}, topic="s4")
        assert resp.session_id == 0 and sorted(answered(resp)) == list(range(PARTITIONS))


def test_a_session_rechecks_read_on_the_topics_it_holds(tmp_path: Any) -> None:
    """An incremental fetch names only what changed, so the topics the session already holds are
    authorized again on every fetch: once READ is revoked they answer TOPIC_AUTHORIZATION_FAILED."""
    from test_authorization import JAAS, call

    broker = BrokerThread(
        tmp_path / "data",
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:root",
        },
    ).start()
    binding = {"resource_type": 2, "resource_name": "guarded", "resource_pattern_type": 3,
               "principal": "User:eve", "host": "*", "operation": 3, "permission_type": 3}
    acl_filter = {"resource_type_filter": 2, "resource_name_filter": "guarded", "pattern_type_filter": 3,
                  "principal_filter": "User:eve", "host_filter": "*", "operation": 3, "permission_type": 3}
    new_topic = {"name": "guarded", "num_partitions": 1, "replication_factor": 1}
    produce_body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": "guarded", "partition_data": [{"index": 0, "records": make_batch([b"a"])}]}]}

    def eve_fetch(session_id: int, epoch: int, partitions: dict[int, int] | None = None) -> Any:
        body = {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": session_id, "session_epoch": epoch, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": "guarded", "partitions": [
                {"partition": p, "fetch_offset": o, "partition_max_bytes": 1 << 16}
                for p, o in partitions.items()]}] if partitions else [],
        }
        return call(broker, "eve", [(ApiKey.FETCH, 12, body)])[0]

    try:
        call(broker, "root", [
            (ApiKey.CREATE_TOPICS, 5, {"topics": [new_topic], "timeout_ms": 5000}),
            (ApiKey.PRODUCE, 9, produce_body),
            (ApiKey.CREATE_ACLS, 2, {"creations": [binding]}),
        ])
        epoch, full = 1, None
        for _ in range(100):  # until the ACL is applied
            full = eve_fetch(0, 0, {0: 1})
            if answered_codes(full) == {0: 0}:
                break
        assert full is not None and answered_codes(full) == {0: 0} and full.session_id != 0
        sid = full.session_id
        assert answered_codes(eve_fetch(sid, epoch)) == {}
        epoch += 1
        call(broker, "root", [(ApiKey.DELETE_ACLS, 2, {"filters": [acl_filter]})])
        for _ in range(100):  # until the deletion is applied
            got = eve_fetch(sid, epoch)
            assert got.error_code == 0
            epoch += 1
            if got.responses:
                break
        assert answered_codes(got) == {0: ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    finally:
        broker.stop()


def answered_codes(resp: Any) -> dict[int, int]:
    return {p.partition_index: p.error_code for t in resp.responses for p in t.partitions}
