"""The fetch session cache core (KIP-227): contexts, epochs, adds/updates/forgets, what an
incremental answer carries, eviction. Random walks are seeded and print their seed."""

from __future__ import annotations

import os
import random

import pytest
from pylog.protocol.errors import ErrorCode

from pylog.broker.datapath.fetch_params import CONSUMER, FetchPartitionData, FetchPosition
from pylog.broker.datapath.fetch_session import CachedPartition, FetchKind, FetchSessionCache
from pylog.client.fetch_session import MAX_EPOCH, next_epoch


def pos(partition: int, offset: int, max_bytes: int = 1024) -> FetchPosition:
    return FetchPosition(partition, offset, max_bytes)


def data(hw: int = 10, records: bool = False, error: int = 0, lso: int | None = None,
         log_start: int = 0) -> FetchPartitionData:
    return FetchPartitionData(error, hw, hw if lso is None else lso, log_start,
                              records=[b"x"] if records else (), size=1 if records else 0)


def full_session(cache: FetchSessionCache, wanted: list, now: int = 0, replica: int = CONSUMER) -> int:
    ctx = cache.new_context(0, 0, replica, wanted, [], now)
    assert ctx.kind == FetchKind.FULL
    return cache.create(replica, ctx.wanted, [data() for _ in ctx.wanted], now)


def test_next_epoch_wraps_as_kafka() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(MAX_EPOCH) == 1
    assert next_epoch(-1) == -1


def test_sessionless_full_and_closing() -> None:
    cache = FetchSessionCache(10, rng=random.Random(1))
    wanted = [("t", pos(0, 0)), ("t", pos(1, 0))]
    assert cache.new_context(0, -1, CONSUMER, wanted, [], 0).kind == FetchKind.SESSIONLESS
    assert len(cache) == 0
    sid = full_session(cache, wanted)
    assert sid > 0 and len(cache) == 1
    # a full fetch naming a session closes it (epoch -1: and asks for none)
    assert cache.new_context(sid, -1, CONSUMER, wanted, [], 1).kind == FetchKind.SESSIONLESS
    assert len(cache) == 0
    sid = full_session(cache, wanted)
    ctx = cache.new_context(sid, 0, CONSUMER, wanted, [], 1)
    assert ctx.kind == FetchKind.FULL and len(cache) == 0


def test_session_errors() -> None:
    cache = FetchSessionCache(10, rng=random.Random(2))
    sid = full_session(cache, [("t", pos(0, 0))])
    unknown = cache.new_context(sid + 1, 1, CONSUMER, [], [], 1)
    assert (unknown.kind, unknown.error) == (FetchKind.ERROR, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    wrong = cache.new_context(sid, 5, CONSUMER, [], [], 1)
    assert (wrong.kind, wrong.error) == (FetchKind.ERROR, ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    ok = cache.new_context(sid, 1, CONSUMER, [], [], 1)
    assert ok.kind == FetchKind.INCREMENTAL and ok.epoch == 2
    # the same epoch again (a duplicate) is refused; the next one is accepted
    assert cache.new_context(sid, 1, CONSUMER, [], [], 2).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert cache.new_context(sid, 2, CONSUMER, [], [], 2).kind == FetchKind.INCREMENTAL


def test_a_followers_session_is_its_own() -> None:
    cache = FetchSessionCache(10, rng=random.Random(3))
    sid = full_session(cache, [("t", pos(0, 0))], replica=2)
    assert cache.new_context(sid, 1, 3, [], [], 1).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert cache.new_context(sid, 1, CONSUMER, [], [], 1).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    cache.new_context(sid, -1, 3, [], [], 1)  # another replica cannot close it either
    assert cache.new_context(sid, 1, 2, [], [], 1).kind == FetchKind.INCREMENTAL
    # a consumer's session serves any consumer holding the id, no follower
    cid = full_session(cache, [("t", pos(0, 0))])
    assert cache.new_context(cid, 1, 2, [], [], 1).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert cache.new_context(cid, 1, CONSUMER, [], [], 1).kind == FetchKind.INCREMENTAL


def test_incremental_answer_carries_only_what_changed() -> None:
    cache = FetchSessionCache(10, rng=random.Random(4))
    sid = full_session(cache, [("a", pos(0, 5)), ("a", pos(1, 5)), ("b", pos(0, 5))])
    ctx = cache.new_context(sid, 1, CONSUMER, [], [], 1)
    positions = [(t, w.partition, w.fetch_offset) for t, w in ctx.wanted]
    assert positions == [("a", 0, 5), ("a", 1, 5), ("b", 0, 5)]
    answers = [data(), data(hw=11), data(records=True)]
    changed = cache.incremental_answer(ctx, answers)
    assert changed is not None
    assert [(t, p) for t, p, _ in changed] == [("a", 1), ("b", 0)]
    # unchanged now; an error is always sent, and sent again once it clears
    ctx = cache.new_context(sid, 2, CONSUMER, [], [], 2)
    changed = cache.incremental_answer(ctx, [data(), data(hw=11), data(error=6)])
    assert [(t, p) for t, p, _ in (changed or [])] == [("b", 0)]
    ctx = cache.new_context(sid, 3, CONSUMER, [], [], 3)
    changed = cache.incremental_answer(ctx, [data(), data(hw=11), data()])
    assert [(t, p) for t, p, _ in (changed or [])] == [("b", 0)]
    ctx = cache.new_context(sid, 4, CONSUMER, [], [], 4)
    assert cache.incremental_answer(ctx, [data(), data(hw=11), data()]) == []
    # last stable offset and log start moves are sent
    ctx = cache.new_context(sid, 5, CONSUMER, [], [], 5)
    changed = cache.incremental_answer(ctx, [data(lso=8), data(hw=11, log_start=3), data()])
    assert [(t, p) for t, p, _ in (changed or [])] == [("a", 0), ("a", 1)]


def test_records_move_a_partition_to_the_end() -> None:
    cache = FetchSessionCache(10, rng=random.Random(5))
    sid = full_session(cache, [("t", pos(i, 0)) for i in range(3)])
    ctx = cache.new_context(sid, 1, CONSUMER, [], [], 1)
    cache.incremental_answer(ctx, [data(records=True), data(), data()])
    ctx = cache.new_context(sid, 2, CONSUMER, [], [], 2)
    assert [w.partition for _, w in ctx.wanted] == [1, 2, 0]


def test_a_duplicate_in_flight_gets_invalid_epoch() -> None:
    cache = FetchSessionCache(10, rng=random.Random(6))
    sid = full_session(cache, [("t", pos(0, 0))])
    first = cache.new_context(sid, 1, CONSUMER, [], [], 1)
    cache.new_context(sid, 2, CONSUMER, [], [], 1)  # the session moved on before the answer
    assert cache.incremental_answer(first, [data(records=True)]) is None


def test_forgetting_everything_closes_the_session() -> None:
    cache = FetchSessionCache(10, rng=random.Random(7))
    sid = full_session(cache, [("t", pos(0, 0))])
    ctx = cache.new_context(sid, 1, CONSUMER, [], [("t", 0)], 1)
    assert ctx.kind == FetchKind.SESSIONLESS and len(cache) == 0


def test_no_room_answers_session_zero() -> None:
    cache = FetchSessionCache(0, rng=random.Random(8))
    assert full_session(cache, [("t", pos(0, 0))]) == 0


def test_eviction_rules() -> None:
    cache = FetchSessionCache(2, eviction_ms=100, rng=random.Random(9))
    small = full_session(cache, [("t", pos(0, 0))], now=0)
    big = full_session(cache, [("t", pos(i, 0)) for i in range(5)], now=0)
    # both young: a consumer cannot evict; a follower evicts the least valuable consumer session
    assert full_session(cache, [("t", pos(0, 0))], now=50) == 0
    follower = full_session(cache, [("t", pos(0, 0))], now=50, replica=1)
    assert follower and small not in cache.sessions and big in cache.sessions
    cache.new_context(big, 1, CONSUMER, [], [], 60)  # used at 60
    # old enough (created > 100 ms ago): a consumer session evicts a smaller one, not a bigger one;
    # the young follower's session is not evictable by a consumer
    assert full_session(cache, [("t", pos(i, 0)) for i in range(3)], now=120) == 0
    bigger = full_session(cache, [("t", pos(i, 0)) for i in range(9)], now=120)
    assert bigger and big not in cache.sessions and follower in cache.sessions
    # stale (unused > 100 ms): the least recently used goes first, whatever its value
    newest = full_session(cache, [("t", pos(0, 0))], now=200)
    assert newest and follower not in cache.sessions and bigger in cache.sessions
    assert cache.evictions == 3


def test_random_walk_matches_a_model() -> None:
    """Adds, updates, forgets and answers against a plain model of what a session holds."""
    seed = int(os.environ.get("PYLOG_SEED", random.randrange(2**32)))
    print(f"seed {seed}")
    rng = random.Random(seed)
    cache = FetchSessionCache(4, rng=random.Random(seed))
    model: dict[tuple[str, int], tuple[int, int]] = {}  # (topic, p) -> (fetch offset, last hw answered)
    wanted = [(rng.choice("ab"), pos(p, rng.randrange(100))) for p in range(rng.randrange(1, 6))]
    wanted = list({(t, w.partition): (t, w) for t, w in wanted}.values())
    sid = full_session(cache, wanted)
    for t, w in wanted:
        model[(t, w.partition)] = (w.fetch_offset, 10)
    epoch = 1
    for step in range(300):
        adds = [(rng.choice("abc"), pos(rng.randrange(6), rng.randrange(100)))
                for _ in range(rng.randrange(3))]
        adds = list({(t, w.partition): (t, w) for t, w in adds}.values())
        forget = [tp for tp in model if rng.random() < 0.1 and tp not in {(t, w.partition) for t, w in adds}]
        if rng.random() < 0.05:
            bad = cache.new_context(sid, epoch + 1 + rng.randrange(5), CONSUMER, adds, forget, step)
            assert bad.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH, seed
            continue
        ctx = cache.new_context(sid, epoch, CONSUMER, adds, forget, step)
        for t, w in adds:
            prev = model.get((t, w.partition))
            model[(t, w.partition)] = (w.fetch_offset, prev[1] if prev else -1)
        for tp in forget:
            model.pop(tp, None)
        if not model:
            assert ctx.kind == FetchKind.SESSIONLESS and sid not in cache.sessions, seed
            return
        assert ctx.kind == FetchKind.INCREMENTAL, seed
        seen = {(t, w.partition): w.fetch_offset for t, w in ctx.wanted}
        assert seen == {tp: v[0] for tp, v in model.items()}, seed
        answers = [data(hw=rng.choice([10, 11]), records=rng.random() < 0.2) for _ in ctx.wanted]
        changed = cache.incremental_answer(ctx, answers)
        assert changed is not None
        expected = [
            (t, w.partition) for (t, w), d in zip(ctx.wanted, answers)
            if d.records or d.high_watermark != model[(t, w.partition)][1]
        ]
        assert [(t, p) for t, p, _ in changed] == expected, seed
        for (t, w), d in zip(ctx.wanted, answers):
            model[(t, w.partition)] = (model[(t, w.partition)][0], d.high_watermark)
        epoch = next_epoch(epoch)


@pytest.mark.parametrize("field", ["fetch_offset", "partition_max_bytes", "log_start_offset"])
def test_update_takes_the_requests_position(field: str) -> None:
    cached = CachedPartition.of("t", pos(0, 0))
    new = FetchPosition(0, 7, 99, 3, 2, 5)
    cached.update_request(new)
    assert getattr(cached, field) == getattr(new, field)
    assert (cached.current_leader_epoch, cached.last_fetched_epoch) == (3, 2)
