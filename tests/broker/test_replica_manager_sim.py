"""A seeded simulation of one partition replicated by three brokers' ReplicaManagers in one
process: no sockets, no event loop, no clock but the simulation's. Followers fetch from the leader
through a simulated network (random latency, drops to an isolated broker), a simulated controller
elects leaders from the ISR and accepts ISR changes (AlterPartition), and every broker's delayed
produces and fetches are completed by ``ReplicaManager.tick(now)`` alone.

What happens: leader changes (the old leader holding batches nobody else has, which it truncates
when it follows), a follower cut off long enough to leave the ISR and then rejoining it, followers'
delayed fetches woken by the leader's appends, acks=all produces completed when the ISR has them,
consumers long-polling the high watermark. What must hold: no acknowledged record is lost (every
broker in the ISR ends with it, at its offset), a leader's high watermark never decreases, and an
acks=all produce completes only once every ISR member holds it.

Each run prints its seed; ``PYLOG_SIM_SEED=<seed>`` replays one.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import os
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pylog.protocol.errors import ErrorCode
from records_util import make_batch, offsets_of, values_of

from pylog.broker.datapath.delayed import DelayedOperation
from pylog.broker.datapath.partition import Partition, Role
from pylog.broker.datapath.replica_manager import (
    CONSUMER,
    AcksAllWait,
    FetchIsolation,
    FetchParams,
    FetchPartitionData,
    FetchPosition,
    FetchWait,
    ReplicaManager,
)
from pylog.config import BrokerConfig
from pylog.replication import truncation_offset, truncation_on_divergence

TOPIC = "t"
BROKERS = (1, 2, 3)
STEP_MS = 5
DURATION_MS = 3_000
LAG_TIME_MAX_MS = 120
FETCH_WAIT_MS = 40
REQUEST_TIMEOUT_MS = 150
PRODUCE_TIMEOUT_MS = 400


@dataclass
class Controller:
    """The partition's metadata as the quorum controller commits it."""

    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    isr: tuple[int, ...] = BROKERS


@dataclass
class Follower:
    """A broker's replica fetcher state for the partition (what ReplicaFetcher keeps)."""

    epoch: int = -1  # the leader epoch the partition was checked against (truncation)
    in_flight: int | None = None  # request id of the outstanding request
    deadline: int = 0


@dataclass
class Counters:
    acked: int = 0
    truncations: int = 0
    isr_shrinks: int = 0
    isr_expands: int = 0
    leader_changes: int = 0
    fetches_woken_by_append: int = 0
    consumer_fetches_woken: int = 0
    produce_timeouts: int = 0


@dataclass
class Sim:
    seed: int
    root: Path
    rng: random.Random = field(init=False)
    now: int = 1_700_000_000_000  # the batches' timestamps are near it
    managers: dict[int, ReplicaManager] = field(default_factory=dict)
    followers: dict[int, Follower] = field(default_factory=dict)
    isolated: set[int] = field(default_factory=set)
    controller: Controller = field(default_factory=lambda: Controller(leader=1))
    events: list[tuple[int, int, Callable[[], None]]] = field(default_factory=list)
    acked: dict[int, bytes] = field(default_factory=dict)  # offset -> value, acks=all answered 0
    produced: dict[AcksAllWait, tuple[int, bytes]] = field(default_factory=dict)
    leader_hw: dict[tuple[int, int], int] = field(default_factory=dict)  # (broker, epoch) -> hw
    counters: Counters = field(default_factory=Counters)
    seq: itertools.count[int] = field(default_factory=itertools.count)
    values: itertools.count[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        topic_id = uuid.UUID(int=self.seed)
        for b in BROKERS:
            m = ReplicaManager(BrokerConfig({"node.id": str(b)}), self.root / f"b{b}", lambda: self.now,
                               lambda: self.now)
            m.ensure_partition(TOPIC, 0, topic_id, {"min.insync.replicas": "2"})
            self.managers[b] = m
            self.followers[b] = Follower()
        for b in BROKERS:
            self.apply_metadata(b)

    def part(self, broker: int) -> Partition:
        part = self.managers[broker].get(TOPIC, 0)
        assert part is not None
        return part

    # --- the network -------------------------------------------------------------------------

    def send(self, src: int, dst: int, deliver: Callable[[], None]) -> None:
        """Deliver after a random latency, unless either end is isolated (then it is lost)."""
        if src in self.isolated or dst in self.isolated:
            return
        at = self.now + self.rng.randint(1, 15)
        heapq.heappush(self.events, (at, next(self.seq), lambda: self._deliver(src, dst, deliver)))

    def _deliver(self, src: int, dst: int, deliver: Callable[[], None]) -> None:
        if src not in self.isolated and dst not in self.isolated:
            deliver()

    # --- the controller ----------------------------------------------------------------------

    def apply_metadata(self, broker: int) -> None:
        """A broker applies the controller's current partition record (the metadata publisher)."""
        c = self.controller
        part = self.part(broker)
        if c.leader == broker:
            part.become_leader(broker, c.leader_epoch, c.partition_epoch, BROKERS, c.isr, self.now)
        else:
            part.become_follower(broker, c.leader, c.leader_epoch, c.partition_epoch, BROKERS, c.isr)

    def publish(self) -> None:
        """Every broker applies the new record (an isolated one when it rejoins)."""
        for b in BROKERS:
            self.send(0, b, functools.partial(self.apply_metadata, b))

    def elect(self) -> None:
        """A leader change (a preferred-leader election, a controlled shutdown): another ISR
        member leads at the next epoch; the old leader may hold batches nobody else has."""
        c = self.controller
        candidates = [b for b in c.isr if b != c.leader and b not in self.isolated]
        if not candidates:
            return
        old = c.leader
        self.managers[old].append(  # written to the old leader only: acks=1, may be lost
            [(TOPIC, 0, make_batch([b"unreplicated"]))], acks=1, timeout_ms=0, now_ms=self.now
        )
        c.leader = self.rng.choice(candidates)
        c.leader_epoch += 1
        c.partition_epoch += 1
        self.counters.leader_changes += 1
        self.publish()

    def alter_partition(self, leader: int, leader_epoch: int, partition_epoch: int,
                        isr: tuple[int, ...]) -> None:
        c = self.controller
        part = self.part(leader)
        if leader != c.leader or leader_epoch != c.leader_epoch or partition_epoch != c.partition_epoch:
            self.send(0, leader, lambda: part.isr_change_failed(stale=True))
            return
        if len(isr) < len(c.isr):
            self.counters.isr_shrinks += 1
        else:
            self.counters.isr_expands += 1
        c.isr = isr
        c.partition_epoch += 1
        epoch, pepoch = c.leader_epoch, c.partition_epoch
        self.send(0, leader, lambda: part.isr_changed(epoch, isr, pepoch))
        self.publish()

    def propose(self, part: Partition, isr: tuple[int, ...] | None) -> None:
        """The leader's IsrManager: propose an ISR change to the controller (AlterPartition)."""
        epochs = part.leader_epochs()
        if isr is None or epochs is None or not part.propose_isr(isr):
            return
        leader = part.local_id
        self.send(leader, 0, lambda: self.alter_partition(leader, epochs[0], epochs[1], isr))

    # --- the follower side (what ReplicaFetcher does) ------------------------------------------

    def follow(self, broker: int) -> None:
        part, f = self.part(broker), self.followers[broker]
        if part.role is not Role.FOLLOWER or broker in self.isolated:
            return
        if f.in_flight is not None and self.now < f.deadline:
            return
        request = next(self.seq)
        f.in_flight, f.deadline = request, self.now + REQUEST_TIMEOUT_MS
        leader, epoch = part.leader_id, part.leader_epoch
        if f.epoch != epoch:  # OffsetForLeaderEpoch first
            requested = part.latest_epoch
            self.send(broker, leader, lambda: self.answer_epoch(broker, leader, request, epoch, requested))
            return
        want = FetchPosition(0, part.log_end_offset, 1 << 20, epoch, part.latest_epoch, part.log_start_offset)
        params = FetchParams(broker, FETCH_WAIT_MS, 1, 1 << 20, FetchIsolation.LOG_END)
        self.send(broker, leader, lambda: self.serve_fetch(broker, leader, request, epoch, params, want))

    def answer_epoch(self, broker: int, leader: int, request: int, epoch: int, requested: int) -> None:
        part, error = self.managers[leader].leader_partition(TOPIC, 0, epoch)
        answer = (error, -1, -1) if error or part is None else (0, *part.end_offset_for_epoch(requested))
        self.send(leader, broker, lambda: self.on_epoch(broker, request, epoch, requested, answer))

    def on_epoch(self, broker: int, request: int, epoch: int, requested: int,
                 answer: tuple[int, int, int]) -> None:
        part, f = self.part(broker), self.followers[broker]
        if f.in_flight != request:
            return
        f.in_flight = None
        error, leader_epoch, end_offset = answer
        if error or part.leader_epoch != epoch or part.role is not Role.FOLLOWER:
            return
        offset = truncation_offset(part.log_end_offset, leader_epoch, end_offset, part.end_offset_for_epoch,
                                   requested)
        self.truncate(part, offset)
        f.epoch = epoch

    def serve_fetch(self, broker: int, leader: int, request: int, epoch: int, params: FetchParams,
                    want: FetchPosition) -> None:
        m = self.managers[leader]
        expand = lambda part, replica: self.propose(part, part.isr_to_expand(replica))  # noqa: E731
        answer = m.fetch(params, [(TOPIC, want)], now_ms=self.now, expand_isr=expand)

        def reply(data: list[FetchPartitionData]) -> None:
            self.send(leader, broker, lambda: self.on_fetch(broker, request, epoch, data[0]))

        if isinstance(answer, FetchWait):
            deadline = self.now + params.max_wait_ms

            def woken(op: DelayedOperation) -> None:
                assert isinstance(op, FetchWait)
                if self.now < deadline and op.result[0].records:
                    self.counters.fetches_woken_by_append += 1
                reply(op.result)

            answer.on_complete = woken
        else:
            reply(answer)

    def on_fetch(self, broker: int, request: int, epoch: int, d: FetchPartitionData) -> None:
        part, f = self.part(broker), self.followers[broker]
        if f.in_flight != request:
            return
        f.in_flight = None
        if part.leader_epoch != epoch or part.role is not Role.FOLLOWER:
            return
        if d.error == ErrorCode.OFFSET_OUT_OF_RANGE:
            f.epoch = -1  # find where the logs part again
            return
        if d.error:
            return
        if d.diverging_epoch is not None:
            div_epoch, end = d.diverging_epoch
            self.truncate(part, truncation_on_divergence(part.log_end_offset, div_epoch, end,
                                                         part.end_offset_for_epoch))
            return
        if d.records:
            part.append_as_follower(b"".join(bytes(r) for r in d.records), self.now)
        part.follower_high_watermark(d.high_watermark)

    def truncate(self, part: Partition, offset: int) -> None:
        if offset < part.log_end_offset:
            self.counters.truncations += 1
        part.truncate_to(offset)

    # --- clients -----------------------------------------------------------------------------

    def produce(self) -> None:
        leader = self.controller.leader
        value = f"v{next(self.values)}".encode()
        result = self.managers[leader].append(
            [(TOPIC, 0, make_batch([value]))], acks=-1, timeout_ms=PRODUCE_TIMEOUT_MS, now_ms=self.now
        )
        (res,) = result.results
        if result.pending is not None:
            self.produced[result.pending] = (leader, value)
            result.pending.on_complete = self.on_produced
        elif res.error == 0:
            self.ack(leader, res.base_offset, res.last_offset, value)

    def on_produced(self, op: DelayedOperation) -> None:
        assert isinstance(op, AcksAllWait)
        leader, value = self.produced.pop(op)
        (res,) = op.results
        if res.error == 0:
            self.ack(leader, res.base_offset, res.last_offset, value)
        elif res.error == ErrorCode.REQUEST_TIMED_OUT:
            self.counters.produce_timeouts += 1

    def ack(self, leader: int, base: int, last: int, value: bytes) -> None:
        """An acks=all produce answered 0: every member of the leader's ISR holds the batch."""
        part = self.part(leader)
        for member in part.isr:
            assert self.part(member).log_end_offset > last, (self.seed, member, part.isr, last)
        assert base not in self.acked, (self.seed, base)
        self.acked[base] = value
        self.counters.acked += 1

    def consume(self) -> None:
        """A consumer long-polls the leader's high watermark (woken when it moves)."""
        leader = self.controller.leader
        part = self.part(leader)
        if not part.is_leader:
            return
        want = FetchPosition(0, part.high_watermark, 1 << 20, part.leader_epoch)
        params = FetchParams(CONSUMER, 200, 1, 1 << 20, FetchIsolation.HIGH_WATERMARK)
        answer = self.managers[leader].fetch(params, [(TOPIC, want)], now_ms=self.now,
                                             expand_isr=lambda _p, _r: None)
        if isinstance(answer, FetchWait):
            deadline = self.now + 200

            def woken(op: DelayedOperation) -> None:
                assert isinstance(op, FetchWait)
                if self.now < deadline and op.result[0].records:
                    self.counters.consumer_fetches_woken += 1

            answer.on_complete = woken

    # --- the run -----------------------------------------------------------------------------

    def step(self) -> None:
        """One STEP_MS: deliver what arrived, then every broker's shell: tick, ISR check, fetch."""
        until = self.now + STEP_MS
        while self.events and self.events[0][0] <= until:
            at, _, deliver = heapq.heappop(self.events)
            self.now = max(self.now, at)
            deliver()
        self.now = until
        for b in BROKERS:
            self.managers[b].tick(self.now)
            part = self.part(b)
            if part.is_leader:
                self.propose(part, part.isr_to_shrink(self.now, LAG_TIME_MAX_MS))
                key = (b, part.leader_epoch)
                assert part.high_watermark >= self.leader_hw.get(key, 0), (self.seed, key)
                self.leader_hw[key] = part.high_watermark
            self.follow(b)

    def run(self) -> None:
        cut_off = 0
        isolate_at = self.now + self.rng.randint(600, 900)
        rejoin_at = isolate_at + self.rng.randint(400, 600)
        elections = sorted(self.now + self.rng.randint(300, DURATION_MS - 600) for _ in range(3))
        end = self.now + DURATION_MS
        while self.now < end:
            if self.now >= isolate_at and not cut_off:
                # a follower leaves: it fetches nothing and hears nothing until it rejoins
                cut_off = self.rng.choice([b for b in BROKERS if b != self.controller.leader])
                self.isolated.add(cut_off)
            if self.now >= rejoin_at and cut_off in self.isolated:
                self.isolated.discard(cut_off)
                self.followers[cut_off].in_flight = None
                self.apply_metadata(cut_off)  # it catches up with the metadata it missed
            if elections and self.now >= elections[0]:
                elections.pop(0)
                self.elect()
            if self.now < end - 800 and self.rng.random() < 0.5:
                self.produce()
            if self.rng.random() < 0.1:
                self.consume()
            self.step()
        for _ in range(200):  # quiet: let the followers catch up and the ISR settle
            self.step()

    def check(self) -> None:
        """No acknowledged record is lost: the leader and every ISR member hold each at its offset."""
        c = self.controller
        for member in c.isr:
            held = read_log(self.managers[member])
            for offset, value in self.acked.items():
                assert held.get(offset) == value, (self.seed, member, offset, value, held.get(offset))
        leader = self.part(c.leader)
        assert leader.is_leader and leader.high_watermark > max(self.acked, default=-1)

    def close(self) -> None:
        for m in self.managers.values():
            m.close()


def read_log(m: ReplicaManager) -> dict[int, bytes]:
    """offset -> value of every record of the replica's log, read as a follower reads (to its end)."""
    part = m.get(TOPIC, 0)
    assert part is not None
    out: dict[int, bytes] = {}
    offset = part.log_start_offset
    while offset < part.log_end_offset:  # one read may stop at a segment's or the cache's edge
        wire = b"".join(bytes(b) for b in part.read_wire(offset, 1 << 30, part.log_end_offset))
        offsets = offsets_of(wire)
        assert offsets and offsets[0] <= offset, (offset, part.log_end_offset)
        out.update(zip(offsets, values_of(wire), strict=True))
        offset = offsets[-1] + 1
    return out


def seeds() -> list[int]:
    replay = os.environ.get("PYLOG_SIM_SEED")
    if replay:
        return [int(replay)]
    return [random.randrange(1 << 30) for _ in range(4)]


def simulate(seed: int, root: Path) -> Sim:
    sim = Sim(seed, root)
    try:
        sim.run()
        sim.check()
    finally:
        sim.close()
    return sim


def test_replica_managers_replicate_through_leader_changes_and_isr_changes(tmp_path: Path) -> None:
    totals = Counters()
    for seed in seeds():
        print(f"replica manager simulation: PYLOG_SIM_SEED={seed}")
        sim = simulate(seed, tmp_path / str(seed))
        print(f"  {sim.counters}")
        c = sim.counters
        assert c.acked > 0 and c.leader_changes > 0, (seed, c)
        assert c.isr_shrinks > 0 and c.isr_expands > 0, (seed, c)  # the cut-off follower left, came back
        for name, value in vars(c).items():
            setattr(totals, name, getattr(totals, name) + value)
    assert totals.truncations > 0, totals
    assert totals.fetches_woken_by_append > 0 and totals.consumer_fetches_woken > 0, totals


def test_a_seed_replays_the_same_run(tmp_path: Path) -> None:
    """The core reads no clock and completes nothing outside ``tick``: one seed, one history."""
    seed = seeds()[0]
    print(f"replica manager simulation: PYLOG_SIM_SEED={seed}")
    first, again = simulate(seed, tmp_path / "a"), simulate(seed, tmp_path / "b")
    assert (first.counters, first.acked, first.leader_hw) == (again.counters, again.acked, again.leader_hw)
