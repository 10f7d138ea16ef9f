"""ReplicaManager as the one door into a partition: appends with their origin and acks, the fetch
plan and byte budget, and the one leader-epoch check; on real partition logs, no sockets."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pylog.protocol import records as rec
from pylog.protocol.errors import ErrorCode
from records_util import make_batch, offsets_of, values_of

from pylog.broker.datapath.partition import AppendOrigin, Partition
from pylog.broker.datapath.replica_manager import (
    CONSUMER,
    FetchIsolation,
    FetchParams,
    FetchPartitionData,
    FetchPosition,
    FetchWait,
    ReplicaManager,
)
from pylog.broker.datapath.transactions import marker_batch
from pylog.clock import ManualClock
from pylog.config import BrokerConfig
from pylog.replication import truncation_on_divergence

EPOCH = 3


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[ReplicaManager]:
    manager = ReplicaManager(BrokerConfig({}), tmp_path, lambda: 1_700_000_000_000)
    yield manager
    manager.close()


def lead(replicas: ReplicaManager, topic: str, index: int = 0, *, followers: tuple[int, ...] = ()) -> (
    Partition
):
    part = replicas.ensure_partition(topic, index, uuid.uuid4(), {})
    part.txn_verifier = lambda _part, _pid, _epoch: 0
    members = (1, *followers)
    part.become_leader(1, EPOCH, 0, members, members, now_ms=0)
    return part


def fetch(
    replicas: ReplicaManager,
    wanted: list[tuple[str, FetchPosition]],
    *,
    max_bytes: int = 1 << 20,
    replica_id: int = CONSUMER,
    isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK,
) -> list[FetchPartitionData]:
    params = FetchParams(replica_id, 0, 1, max_bytes, isolation)
    out = replicas.fetch_messages(params, wanted, expand_isr=lambda _p, _r: None, stopping=lambda: False)
    assert isinstance(out, list)  # max_wait_ms 0: answered at once
    return out


def test_clients_append_data_coordinators_also_internal_topics_and_markers(replicas: ReplicaManager) -> None:
    lead(replicas, "t")
    lead(replicas, "__consumer_offsets")
    ok = replicas.append_records([("t", 0, make_batch([b"a", b"b"]))], acks=1, timeout_ms=1000)
    assert [r.error for r in ok.results] == [0] and ok.delayed is None
    offsets = [("__consumer_offsets", 0, make_batch([b"x"]))]
    internal = replicas.append_records(offsets, acks=1, timeout_ms=1000)
    assert internal.results[0].error == ErrorCode.INVALID_TOPIC_EXCEPTION
    by_coordinator = replicas.append_records(offsets, acks=1, timeout_ms=0, origin=AppendOrigin.COORDINATOR)
    assert by_coordinator.results[0].error == 0
    marker = marker_batch(7, 0, False, 1, 1_700_000_000_000)
    refused = replicas.append_records([("t", 0, marker)], acks=1, timeout_ms=1000)
    assert refused.results[0].error == ErrorCode.INVALID_RECORD  # clients may not write markers
    assert replicas.append_records([("t", 0, b"")], acks=7, timeout_ms=0).results[0].error == (
        ErrorCode.INVALID_REQUIRED_ACKS
    )


def txn_batch(values: list[bytes], producer_id: int, base_sequence: int = 0) -> bytes:
    rows = rec.decode_batch(make_batch(values)).records
    return rec.encode_batch(
        rows, base_offset=0, producer_id=producer_id, producer_epoch=0, base_sequence=base_sequence,
        is_transactional=True,
    )


def test_markers_end_transactions_for_read_committed_fetches(replicas: ReplicaManager) -> None:
    part = lead(replicas, "t")
    entries = [("t", 0, txn_batch([b"t1", b"t2"], producer_id=7))]
    assert replicas.append_records(entries, acks=-1, timeout_ms=0).results[0].error == 0
    plain = [("t", 0, make_batch([b"p"]))]
    assert replicas.append_records(plain, acks=-1, timeout_ms=0).results[0].error == 0
    assert (part.last_stable_offset, part.high_watermark) == (0, 3)  # the open transaction holds it
    wanted = [("t", FetchPosition(0, 0, 1 << 20))]
    (committed,) = fetch(replicas, wanted, isolation=FetchIsolation.TXN_COMMITTED)
    assert committed.error == 0 and committed.records == () and committed.last_stable_offset == 0
    outcome: list[ErrorCode] = []
    replicas.append_txn_marker("t", 0, 7, 0, False, 1, outcome.append)
    assert outcome == [ErrorCode.NONE]  # the leader alone is its ISR: replicated at once
    assert part.last_stable_offset == part.high_watermark == 4
    (committed,) = fetch(replicas, wanted, isolation=FetchIsolation.TXN_COMMITTED)
    assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions or ()] == [(7, 0)]
    assert offsets_of(b"".join(bytes(b) for b in committed.records)) == [0, 1, 2, 3]
    (uncommitted,) = fetch(replicas, wanted)
    assert uncommitted.aborted_transactions is None
    replicas.append_txn_marker("t", 0, 7, 0, True, 1, outcome.append)  # nothing open: a no-op marker
    fenced: list[ErrorCode] = []
    entries = [("t", 0, txn_batch([b"t3"], producer_id=7, base_sequence=2))]
    replicas.append_records(entries, acks=1, timeout_ms=0)
    replicas.append_txn_marker("t", 0, 7, -1, True, 1, fenced.append)  # an older producer epoch
    assert fenced == [ErrorCode.INVALID_PRODUCER_EPOCH]


def test_the_byte_budget_spans_partitions_and_the_first_batch_always_comes(replicas: ReplicaManager) -> None:
    for i in range(2):
        lead(replicas, "t", i)
        for _ in range(3):
            replicas.append_records([("t", i, make_batch([b"x" * 400]))], acks=1, timeout_ms=0)
    wanted = [("t", FetchPosition(0, 0, 1 << 20)), ("t", FetchPosition(1, 0, 1 << 20))]
    first, second = fetch(replicas, wanted, max_bytes=10)
    assert len(first.records) == 1 and first.size > 10  # over the budget, but a consumer progresses
    assert second.records == () and second.error == 0  # nothing left of the budget
    one = first.size
    first, second = fetch(replicas, wanted, max_bytes=one * 4 + 10)
    assert len(first.records) == 3 and len(second.records) == 1
    first, second = fetch(replicas, wanted, max_bytes=one * 3 + 10)
    assert len(first.records) == 3 and second.records == ()  # a later first batch must fit
    capped = [("t", FetchPosition(0, 0, 10)), ("t", FetchPosition(1, 0, 10))]
    first, second = fetch(replicas, capped)
    assert len(first.records) == 1 and second.records == ()  # partition_max_bytes too


def test_one_leader_epoch_check_for_fetch_list_offsets_and_epoch_queries(replicas: ReplicaManager) -> None:
    lead(replicas, "t")
    replicas.append_records([("t", 0, make_batch([b"a"]))], acks=1, timeout_ms=0)
    assert replicas.leader_partition("t", 0, EPOCH)[1] == 0
    assert replicas.leader_partition("t", 0)[1] == 0
    assert replicas.leader_partition("t", 0, EPOCH - 1)[1] == ErrorCode.FENCED_LEADER_EPOCH
    assert replicas.leader_partition("t", 0, EPOCH + 1)[1] == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert replicas.leader_partition("nope", 0) == (None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    older = ("t", FetchPosition(0, 0, 1 << 20, EPOCH - 1))
    newer = ("t", FetchPosition(0, 0, 1 << 20, EPOCH + 1))
    fenced, unknown = fetch(replicas, [older, newer])
    assert (fenced.error, fenced.current_leader) == (ErrorCode.FENCED_LEADER_EPOCH, (1, EPOCH))
    assert (unknown.error, unknown.current_leader) == (ErrorCode.UNKNOWN_LEADER_EPOCH, None)
    follower = replicas.ensure_partition("f", 0, uuid.uuid4(), {})
    follower.become_follower(1, 2, EPOCH, 0, (1, 2), (1, 2))
    (answer,) = fetch(replicas, [("f", FetchPosition(0, 0, 1 << 20))])
    assert (answer.error, answer.current_leader) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, (2, EPOCH))


def test_a_follower_fetch_reads_to_the_log_end_and_moves_the_high_watermark(replicas: ReplicaManager) -> None:
    part = lead(replicas, "t", followers=(2,))
    replicas.append_records([("t", 0, make_batch([b"a", b"b"]))], acks=1, timeout_ms=0)
    assert part.high_watermark == 0  # follower 2 has not fetched it
    (consumer,) = fetch(replicas, [("t", FetchPosition(0, 0, 1 << 20))])
    assert consumer.records == () and consumer.high_watermark == 0
    (follower,) = fetch(replicas, [("t", FetchPosition(0, 0, 1 << 20, EPOCH))], replica_id=2,
                        isolation=FetchIsolation.LOG_END)
    assert values_of(b"".join(bytes(b) for b in follower.records)) == [b"a", b"b"]
    (follower,) = fetch(replicas, [("t", FetchPosition(0, 2, 1 << 20, EPOCH, EPOCH))], replica_id=2,
                        isolation=FetchIsolation.LOG_END)
    assert follower.high_watermark == part.high_watermark == 2
    (diverged,) = fetch(replicas, [("t", FetchPosition(0, 5, 1 << 20, EPOCH, EPOCH - 1))], replica_id=2,
                        isolation=FetchIsolation.LOG_END)
    # an epoch older than the leader's first: it ends where the leader's log begins (Kafka's answer)
    assert diverged.diverging_epoch == (EPOCH - 1, 0) and diverged.records == ()
    (stranger,) = fetch(replicas, [("t", FetchPosition(0, 0, 1 << 20))], replica_id=9,
                        isolation=FetchIsolation.LOG_END)
    assert stranger.error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_appends_are_stamped_by_the_injected_clock(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=1_800_000_000_000)
    replicas = ReplicaManager(BrokerConfig({}), tmp_path, clock.wall_ms)
    try:
        part = replicas.ensure_partition("t", 0, uuid.uuid4(), {"message.timestamp.type": "LogAppendTime"})
        part.become_leader(1, EPOCH, 0, (1,), (1,), now_ms=0)
        clock.advance(42)
        (res,) = replicas.append_records([("t", 0, make_batch([b"a"]))], acks=1, timeout_ms=0).results
        assert res.error == 0 and res.log_append_time == 1_800_000_000_042
    finally:
        replicas.close()


def test_a_leader_that_appended_nothing_follows_the_next_leader_without_diverging_forever(
    tmp_path: Path,
) -> None:
    """A replica that led an epoch without appending keeps that epoch at its log end; when it
    follows again the leader names a diverging epoch, and truncating there must drop the empty
    epoch (Kafka truncates the epoch cache even when no record goes), or every fetch diverges."""
    a = ReplicaManager(BrokerConfig({}), tmp_path / "a", lambda: 1_700_000_000_000)
    b = ReplicaManager(BrokerConfig({}), tmp_path / "b", lambda: 1_700_000_000_000)
    try:
        topic_id = uuid.uuid4()
        pa_, pb = a.ensure_partition("t", 0, topic_id, {}), b.ensure_partition("t", 0, topic_id, {})
        pa_.become_leader(1, 0, 0, (1, 2), (1, 2), now_ms=0)
        pb.become_follower(2, 1, 0, 0, (1, 2), (1, 2))
        a.append_records([("t", 0, make_batch([b"a", b"b", b"c"]))], acks=1, timeout_ms=0)

        def replicate() -> FetchPartitionData:
            want = FetchPosition(0, pb.log_end_offset, 1 << 20, pa_.leader_epoch, pb.latest_epoch)
            (d,) = fetch(a, [("t", want)], replica_id=2, isolation=FetchIsolation.LOG_END)
            if d.diverging_epoch is not None:
                epoch, end = d.diverging_epoch
                cut = truncation_on_divergence(pb.log_end_offset, epoch, end, pb.end_offset_for_epoch)
                pb.truncate_to(cut)
            elif d.records:
                pb.append_as_follower(b"".join(bytes(r) for r in d.records), 0)
            return d

        replicate()
        assert pb.log_end_offset == 3
        pa_.become_follower(1, 2, 1, 1, (1, 2), (1, 2))
        pb.become_leader(2, 1, 1, (1, 2), (1, 2), now_ms=0)  # leads epoch 1, appends nothing
        pb.become_follower(2, 1, 2, 2, (1, 2), (1, 2))
        pa_.become_leader(1, 2, 2, (1, 2), (1, 2), now_ms=0)
        a.append_records([("t", 0, make_batch([b"d", b"e"]))], acks=1, timeout_ms=0)
        assert pb.latest_epoch == 1
        assert replicate().diverging_epoch == (0, 3)
        assert pb.latest_epoch == 0 and pb.log_end_offset == 3  # nothing cut but the empty epoch
        assert replicate().diverging_epoch is None
        assert pb.log_end_offset == 5
    finally:
        a.close()
        b.close()


def test_a_refused_isr_proposal_releases_the_high_watermark_without_more_traffic(
    replicas: ReplicaManager,
) -> None:
    """The high watermark waits for a pending ISR addition too; when the controller refuses it,
    the watermark is recomputed at once: the produces waiting on it must not depend on another
    append or fetch (an idempotent producer whose batches all wait sends neither)."""
    part = lead(replicas, "t", followers=(2,))
    replicas.append_records([("t", 0, make_batch([b"a", b"b"]))], acks=1, timeout_ms=0)
    fetch(replicas, [("t", FetchPosition(0, 2, 1 << 20, EPOCH, EPOCH))], replica_id=2,
          isolation=FetchIsolation.LOG_END)
    assert part.high_watermark == 2
    part.become_leader(1, EPOCH, 1, (1, 2, 3), (1, 2), now_ms=0)  # 3 is being added
    assert part.propose_isr((1, 2, 3))  # as if 3 had caught up
    replicas.append_records([("t", 0, make_batch([b"c"]))], acks=1, timeout_ms=0)
    fetch(replicas, [("t", FetchPosition(0, 3, 1 << 20, EPOCH, EPOCH))], replica_id=2,
          isolation=FetchIsolation.LOG_END)
    assert part.high_watermark == 2  # waits for 3 too, which has not fetched offset 2
    part.isr_change_failed()  # the controller refused: 3 is fenced
    assert part.high_watermark == 3


def test_delayed_produces_and_fetches_complete_in_tick_only(replicas: ReplicaManager) -> None:
    """The core completes nothing by itself: an event (here a follower's fetch moving the high
    watermark) marks the waiting acks=all produce and consumer fetch ready, ``tick(now)`` answers
    them; a produce nobody replicates answers REQUEST_TIMED_OUT at the tick past its deadline."""
    now = 1_700_000_000_000
    lead(replicas, "t", followers=(2,))
    produced = replicas.append([("t", 0, make_batch([b"a"]))], acks=-1, timeout_ms=100, now_ms=now)
    assert produced.pending is not None and produced.results[0].error == 0
    consumer = FetchParams(CONSUMER, 500, 1, 1 << 20, FetchIsolation.HIGH_WATERMARK)
    waiting = replicas.fetch(consumer, [("t", FetchPosition(0, 0, 1 << 20))], now_ms=now,
                             expand_isr=lambda _p, _r: None)
    assert isinstance(waiting, FetchWait)
    follower = FetchParams(2, 0, 1, 1 << 20, FetchIsolation.LOG_END)
    replicas.fetch(follower, [("t", FetchPosition(0, 1, 1 << 20, EPOCH, EPOCH))], now_ms=now,
                   expand_isr=lambda _p, _r: None)  # 2 has offset 0: the high watermark moves to 1
    assert not produced.pending.done and not waiting.done
    assert replicas.tick(now + 1) == [produced.pending, waiting]
    assert produced.results[0].error == 0 and values_of(b"".join(waiting.result[0].records)) == [b"a"]
    late = replicas.append([("t", 0, make_batch([b"b"]))], acks=-1, timeout_ms=100, now_ms=now + 2)
    assert late.pending is not None
    assert replicas.tick(now + 101) == []
    assert replicas.tick(now + 102) == [late.pending]
    assert late.results[0].error == ErrorCode.REQUEST_TIMED_OUT


def test_the_shell_answers_an_acks_all_produce_once_the_follower_has_it(replicas: ReplicaManager) -> None:
    """The asyncio shell: ``append_records`` (called here outside an event loop) hands back an
    awaitable that the shell's own tick resolves after the follower's fetch moved the high
    watermark."""
    lead(replicas, "t", followers=(2,))
    produced = replicas.append_records([("t", 0, make_batch([b"a"]))], acks=-1, timeout_ms=5_000)
    delayed = produced.delayed
    assert delayed is not None

    async def replicate_and_wait() -> None:
        follower = FetchParams(2, 0, 1, 1 << 20, FetchIsolation.LOG_END)
        waiting = asyncio.ensure_future(delayed)
        await asyncio.sleep(0)
        replicas.fetch_messages(follower, [("t", FetchPosition(0, 1, 1 << 20, EPOCH, EPOCH))],
                                expand_isr=lambda _p, _r: None, stopping=lambda: False)
        await asyncio.wait_for(waiting, 5)

    asyncio.run(replicate_and_wait())
    assert produced.results[0].error == 0


def test_the_shell_times_a_wait_out_by_the_event_loop_even_if_the_clock_stands_still(
    tmp_path: Path,
) -> None:
    """The timeout is the event loop's timer: an injected clock that does not move (a manual one)
    still sees a long poll answered, empty, once its max wait passed."""
    clock = ManualClock(wall_ms=1_800_000_000_000)
    replicas = ReplicaManager(BrokerConfig({}), tmp_path, clock.wall_ms)
    try:
        lead(replicas, "t")
        params = FetchParams(CONSUMER, 20, 1, 1 << 20, FetchIsolation.HIGH_WATERMARK)

        async def long_poll() -> list[FetchPartitionData]:
            answer = replicas.fetch_messages(params, [("t", FetchPosition(0, 0, 1 << 20))],
                                             expand_isr=lambda _p, _r: None, stopping=lambda: False)
            assert not isinstance(answer, list)
            return await asyncio.wait_for(answer, 5)

        (data,) = asyncio.run(long_poll())
        assert data.error == 0 and data.records == ()
    finally:
        replicas.close()
