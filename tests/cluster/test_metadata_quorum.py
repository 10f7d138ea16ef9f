"""MetadataQuorum on disk: commit and apply, replay after restart, torn-tail recovery."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from pylog.protocol.errors import ErrorCode

from pylog.cluster import features
from pylog.cluster.controller import (
    AlterableConfig,
    AlterConfigOp,
    IncrementalAlterConfigsResource,
    NewPartitions,
    NewTopic,
)
from pylog.cluster.image_feed import MetadataChange
from pylog.cluster.metadata_log import LOG_FILE, METADATA_DIR, STATE_FILE, MetadataLogStore
from pylog.cluster.quorum import MetadataQuorum, NotController
from pylog.cluster.records import (
    BrokerEndpoint,
    ConfigResourceType,
    RemoveTopicRecord,
    TopicRecord,
)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def image_state(q: MetadataQuorum) -> dict[str, Any]:
    state = q.image.to_dict()
    state.pop("offset")  # a restart appends the new leader's no-op
    return state


async def populate(q: MetadataQuorum) -> None:
    reg = await q.execute(
        lambda c: c.register_broker(1, uuid.UUID(int=1), [BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9092)])
    )
    assert reg.error_code == 0
    hb = await q.execute(
        lambda c: c.broker_heartbeat(
            1, reg.broker_epoch, 10**9, want_fence=False, want_shutdown=False, now_ms=0
        )
    )
    assert hb.error_code == 0 and not hb.is_fenced
    created = await q.execute(
        lambda c: c.create_topics(
            [
                NewTopic("orders", 3, 1, configs={"retention.ms": "1000"}),
                NewTopic("gone"),
                NewTopic("bad name"),
            ]
        )
    )
    assert [r.error_code for r in created] == [0, 0, ErrorCode.INVALID_TOPIC_EXCEPTION]
    assert (await q.execute(lambda c: c.create_partitions([NewPartitions("orders", 5)])))[0].error_code == 0
    ops = [AlterableConfig("cleanup.policy", AlterConfigOp.SET, "compact")]
    res = await q.execute(
        lambda c: c.incremental_alter_configs(
            [IncrementalAlterConfigsResource(ConfigResourceType.TOPIC, "orders", ops)]
        )
    )
    assert res[0].error_code == 0
    assert (await q.execute(lambda c: c.delete_topics(["gone"])))[0].error_code == 0
    pids = await q.execute(lambda c: c.allocate_producer_ids(1, count=1000))
    assert (pids.first_producer_id, pids.count) == (0, 1000)


def test_single_voter_commits_applies_and_replays(tmp_path: Path) -> None:
    seen: list[MetadataChange] = []

    async def first() -> dict[str, Any]:
        q = MetadataQuorum(tmp_path, 1, seed=1, fsync=False)
        q.add_listener(seen.append)
        await q.start()
        assert q.is_leader and q.controller.active and q.term == 1
        await populate(q)
        assert q.image.topic_configs("orders") == {"retention.ms": "1000", "cleanup.policy": "compact"}
        assert len(q.image.partitions("orders")) == 5 and q.image.topic("gone") is None
        assert q.image.next_producer_id == 1000
        working = q.controller.image.to_dict()
        working.pop("offset")
        assert working == image_state(q)  # the controller's working image matches the committed one
        state = image_state(q)
        await q.close()
        return state

    before = run(first())
    # The first leader finalizes the feature levels before anything else is written.
    assert before["features"] == dict(features.BOOTSTRAP)
    kinds = [type(c.record).__name__ for c in seen]
    n = len(features.BOOTSTRAP)
    assert kinds[:n] == ["FeatureLevelRecord"] * n
    assert kinds[n : n + 3] == ["RegisterBrokerRecord", "BrokerRegistrationChangeRecord", "TopicRecord"]
    removed = [c for c in seen if isinstance(c.record, RemoveTopicRecord)]
    assert len(removed) == 1 and removed[0].topic is not None and removed[0].topic.name == "gone"
    assert all(c.topic is not None and c.topic.name == "orders" for c in seen[6:10])
    first_run = [(type(c.record), c.offset) for c in seen]
    seen.clear()

    async def second() -> dict[str, Any]:
        q = MetadataQuorum(tmp_path, 1, seed=2, fsync=False)
        q.add_listener(seen.append)
        await q.start()
        assert q.term == 2 and q.controller.active
        state = image_state(q)
        # The restarted controller continues from the replayed image.
        pids = await q.execute(lambda c: c.allocate_producer_ids(1, count=10))
        assert pids.first_producer_id == 1000
        again = await q.execute(lambda c: c.create_topics([NewTopic("orders")]))
        assert again[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        await q.close()
        return state

    assert run(second()) == before
    assert [(type(c.record), c.offset) for c in seen][: len(first_run)] == first_run


def test_torn_tail_is_truncated_on_open(tmp_path: Path) -> None:
    async def write(n: int) -> int:
        q = MetadataQuorum(tmp_path, 1, seed=3, fsync=False)
        await q.start()
        for i in range(n):
            await q.submit([TopicRecord(f"t{i}", uuid.UUID(int=i + 1))])
        offset = q.committed_offset
        await q.close()
        return offset

    last = run(write(3))
    path = tmp_path / METADATA_DIR / LOG_FILE
    good = path.read_bytes()
    # A crash in the middle of appending the next frame leaves half of it behind.
    store = MetadataLogStore(tmp_path, fsync=False)
    frame_start = store._positions[-1]
    store.close()
    last_frame = good[frame_start:]
    path.write_bytes(good + last_frame[: len(last_frame) // 2])

    store = MetadataLogStore(tmp_path, fsync=False)
    assert store.truncated_bytes == len(last_frame) // 2 and store.last_index == last
    store.close()
    assert path.read_bytes() == good

    async def reopen() -> None:
        q = MetadataQuorum(tmp_path, 1, seed=4, fsync=False)
        await q.start()
        assert sorted(q.image.topics) == ["t0", "t1", "t2"]
        await q.submit([TopicRecord("t3", uuid.UUID(int=99))])
        await q.close()
        q = MetadataQuorum(tmp_path, 1, seed=5, fsync=False)
        await q.start()
        assert sorted(q.image.topics) == ["t0", "t1", "t2", "t3"]
        await q.close()

    run(reopen())


def test_corrupt_frame_truncates_from_there(tmp_path: Path) -> None:
    async def write() -> None:
        q = MetadataQuorum(tmp_path, 1, seed=6, fsync=False)
        await q.start()
        for i in range(4):
            await q.submit([TopicRecord(f"t{i}", uuid.UUID(int=i + 1))])
        await q.close()

    run(write())
    store = MetadataLogStore(tmp_path, fsync=False)
    positions = list(store._positions)
    store.close()
    path = tmp_path / METADATA_DIR / LOG_FILE
    data = bytearray(path.read_bytes())
    # entries: the leader's empty entry, the finalized features, then t0, t1, t2, t3
    data[positions[4] + 30] ^= 0xFF  # flip a byte inside the 5th entry (topic t2)
    path.write_bytes(bytes(data))
    store = MetadataLogStore(tmp_path, fsync=False)
    assert store.last_index == 4 and path.stat().st_size == positions[4]
    store.close()

    async def reopen() -> list[str]:
        q = MetadataQuorum(tmp_path, 1, seed=7, fsync=False)
        await q.start()
        names = sorted(q.image.topics)
        await q.close()
        return names

    assert run(reopen()) == ["t0", "t1"]


def test_quorum_state_file(tmp_path: Path) -> None:
    async def go() -> None:
        q = MetadataQuorum(tmp_path, 7, seed=8, fsync=True)
        await q.start()
        await q.submit([TopicRecord("a", uuid.UUID(int=1))])
        await q.close()

    run(go())
    state = json.loads((tmp_path / METADATA_DIR / STATE_FILE).read_text())
    assert state == {"term": 1, "vote": 7, "commit": 3, "node_id": 7, "voters": [7]}  # noop, features, a
    assert not (tmp_path / METADATA_DIR / (STATE_FILE + ".tmp")).exists()


def test_non_leader_reports_not_controller(tmp_path: Path) -> None:
    sent: list[Any] = []

    async def go() -> None:
        q = MetadataQuorum(tmp_path, 1, voters=[1, 2, 3], seed=9, tick_ms=1, fsync=False, send=sent.append)
        await q.start()
        assert not q.is_leader
        res = await q.execute(lambda c: c.create_topics([NewTopic("t")]))
        assert res[0].error_code == ErrorCode.NOT_CONTROLLER
        with pytest.raises(NotController):
            await q.submit([TopicRecord("t", uuid.UUID(int=1))])
        while not sent:  # its election timer fires and it asks its peers for (pre-)votes
            await asyncio.sleep(0.005)
        await q.close()

    run(go())
    assert {m.dst for m in sent} <= {2, 3} and sent[0].src == 1


def test_the_quorum_ticks_on_after_a_failed_tick(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A tick that raises is logged and the timer goes on: a leader whose timer died would stop
    heartbeating and never step down, a follower would never campaign."""

    async def main() -> None:
        q = MetadataQuorum(tmp_path, 1, seed=5, fsync=False, tick_ms=5)
        await q.start()
        node = q._require_node()
        real_tick, failed = node.tick, []

        def tick_failing_once() -> None:
            if not failed:
                failed.append(node._ticks)
                raise OSError("injected: the tick failed")
            real_tick()

        node.tick = tick_failing_once  # type: ignore[method-assign]
        for _ in range(200):
            await asyncio.sleep(0.005)
            if failed and node._ticks > failed[0] + 5:
                break
        assert failed and node._ticks > failed[0] + 5, "the timer stopped after the failed tick"
        pids = await q.execute(lambda c: c.allocate_producer_ids(1, count=10))
        assert pids.error_code == 0
        await q.close()

    run(main())
    assert "metadata quorum tick failed (1 so far)" in caplog.text
