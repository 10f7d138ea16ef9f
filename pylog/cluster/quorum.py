"""``MetadataQuorum``: the asyncio shell around the Raft core, the metadata log and the image.

It drives a ``RaftNode`` with a real timer, persists its entries and hard state
(``MetadataLogStore``), applies committed record batches to the committed
``MetadataImage``, calls listeners for every applied record, and resolves
``submit`` futures once their entry is committed *and* applied. It also runs the
``QuorumController`` while this node leads: the controller is activated with a copy
of the committed image once the node has applied everything up to the first entry
of its term, and deactivated when leadership is lost.

Every input (tick, peer message, proposal) is followed by one synchronous pass over
``ready()``: write entries, then the hard state, then send messages, then apply. File
writes are synchronous: metadata writes are rare and small.

The voters are static (``voters``, kraft.version 0) or come from the log (``dynamic``,
kraft.version 1, KIP-853); with one voter (the single-node install, or a controller formatted
standalone) ``start()`` elects this node at once and returns with the image caught up and the
controller active. With more voters, messages leave through ``send`` (a ``RaftTransport``) and
arrive through ``receive`` (the controller listener's ``PylogRaft`` handler). A controller
outside the voter set is an observer: ``QuorumFetcher`` pulls committed entries for it from the
leader and steps them in as the leader's APPENDs. ``add_voter`` / ``remove_voter`` /
``update_voter`` run a voter change on the leader and wait until it commits; listeners of
voters (``add_voters_listener``) hear of every change of the voter set in force.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.cluster import features
from pylog.cluster.bootstrap import log_is_empty
from pylog.cluster.controller import ControllerResult, QuorumController
from pylog.cluster.feature_control import bootstrap_feature_records
from pylog.cluster.image import MetadataImage
from pylog.cluster.image_feed import ImageFeed, MetadataListener
from pylog.cluster.metadata_log import MetadataLogStore
from pylog.cluster.raft import Message, NotLeader, RaftNode, Role, VoterChangeRefused
from pylog.cluster.raft_types import Snapshot
from pylog.cluster.records import (
    MetadataRecord,
    encode_records,
)
from pylog.cluster.snapshot import encode_image
from pylog.cluster.voters import VoterNode, VoterSet
from pylog.protocol.errors import ErrorCode
from pylog.tasks import cancel_and_wait

log = logging.getLogger(__name__)
TIMER_FAILURE_LOG_S = 10.0  # a tick that keeps failing is logged at most this often
T = TypeVar("T")


class NotController(Exception):
    """This node cannot commit the records: it is not (or no longer) the leader."""

    def __init__(self, leader_hint: int | None = None) -> None:
        super().__init__(f"not the active controller (leader: {leader_hint})")
        self.leader_hint = leader_hint




class MetadataQuorum:
    def __init__(
        self,
        data_dir: Path | str,
        node_id: int,
        *,
        voters: Iterable[int] | VoterSet | None = None,
        dynamic: bool = False,
        directory_id: uuid.UUID | None = None,
        seed: int | None = None,
        tick_ms: int = 50,
        election_timeout_ticks: int = 10,
        heartbeat_ticks: int = 1,
        send: Callable[[Message], None] | None = None,
        fsync: bool = True,
        default_num_partitions: int = 1,
        default_replication_factor: int = 1,
        delete_topic_enable: bool = True,
        unclean_leader_election: bool = False,
        session_timeout_ms: int = 9000,
        clock: Clock = SYSTEM_CLOCK,
        snapshot_bytes: int = 20 * 1024 * 1024,
        bootstrap: Sequence[MetadataRecord] = (),
        broker_settings: Callable[[str], str | None] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.node_id = node_id
        self.directory_id = directory_id
        self.dynamic = dynamic
        self._static: VoterSet | None = None
        if not dynamic:
            if isinstance(voters, VoterSet):
                self._static = voters
            else:
                self._static = VoterSet.of_ids(voters if voters is not None else (node_id,))
        self._rng = random.Random(seed)
        self._tick_s = tick_ms / 1000
        self._election_ticks = election_timeout_ticks
        self._heartbeat_ticks = heartbeat_ticks
        self._send = send
        self._fsync = fsync
        self.clock = clock
        self.now_ms: Callable[[], int] = clock.monotonic_ms  # broker sessions (the controller's)
        self.feed = ImageFeed()
        self.controller = QuorumController(
            rng=random.Random(self._rng.getrandbits(64)),
            default_num_partitions=default_num_partitions,
            default_replication_factor=default_replication_factor,
            delete_topic_enable=delete_topic_enable,
            unclean_leader_election=unclean_leader_election,
            session_timeout_ms=session_timeout_ms,
            active=False,
            broker_settings=broker_settings,
        )
        self.snapshot_bytes = snapshot_bytes
        self._commit_waiters: list[asyncio.Future[None]] = []
        self.bootstrap = tuple(bootstrap)  # committed by the first controller of an empty log
        self._pending: dict[int, tuple[int, asyncio.Future[int]]] = {}
        self._store: MetadataLogStore | None = None
        self._node: RaftNode | None = None
        self._timer: asyncio.Task[None] | None = None
        self._leader_start = 0  # first index of our current term as leader
        self._leader_term = 0  # the term that index opened
        self._controller_ready: asyncio.Event | None = None
        self._processing = False
        self.snapshots_taken = 0
        self._last_heard: dict[int, int] = {}  # voter -> wall ms of its last message
        # observer -> (directory id, fetch offset, wall ms of its last fetch)
        self._observers: dict[int, tuple[uuid.UUID | None, int, int]] = {}
        self._voters_listeners: list[Callable[[VoterSet | None], None]] = []
        self._last_voters: VoterSet | None = None
        self._voter_change: asyncio.Lock | None = None  # made on start (needs a loop)

    # ------------------------------------------------------------------ lifecycle

    def add_listener(self, listener: MetadataListener) -> None:
        """Called on the event loop for each applied record, replayed ones included
        (add listeners before ``start()`` to see the whole log)."""
        self.feed.add_listener(listener)

    def add_image_listener(self, listener: Callable[[MetadataImage], None]) -> None:
        """Called when a snapshot from the leader replaced the whole image."""
        self.feed.add_image_listener(listener)

    async def start(self) -> None:
        self._controller_ready = asyncio.Event()
        self._voter_change = asyncio.Lock()
        self._store = MetadataLogStore(self.data_dir, fsync=self._fsync)
        self._store.extra_state = {"node_id": self.node_id}
        if self._static is not None:
            self._store.extra_state["voters"] = list(self._static.ids)
        if self.directory_id is not None:
            self._store.extra_state["directory_id"] = str(self.directory_id)
        if self._store.truncated_bytes:
            log.warning(
                "truncated a torn tail of %d bytes from the metadata log", self._store.truncated_bytes
            )
        snap = self._store.snapshot()
        if snap is not None:
            self.feed.restore(
                snap.index, snap.data, notify=False, voters=snap.voters, kraft_version=snap.kraft_version
            )
        self._node = RaftNode(
            self.node_id,
            self._static,
            self._store,
            random.Random(self._rng.getrandbits(64)),
            self._election_ticks,
            self._heartbeat_ticks,
            directory_id=self.directory_id,
        )
        self._process_ready()  # replays what is known to be committed
        if self._node.is_voter and self._node.voters == (self.node_id,):
            self._node.campaign()
            self._process_ready()
        self._timer = asyncio.create_task(self._run_timer(), name=f"metadata-quorum-{self.node_id}")

    async def close(self) -> None:
        if self._timer is not None:
            await cancel_and_wait(self._timer)
            self._timer = None
        self._fail_pending(None)
        self.controller.deactivate()
        if self._store is not None:
            self._store.close()

    async def wait_for_controller(self) -> None:
        """Wait until this node is the leader with an active controller."""
        assert self._controller_ready is not None, "start() first"
        await self._controller_ready.wait()

    # ------------------------------------------------------------------ status

    @property
    def is_leader(self) -> bool:
        return self._node is not None and self._node.role is Role.LEADER

    @property
    def leader_id(self) -> int | None:
        return None if self._node is None else self._node.leader_id

    @property
    def term(self) -> int:
        """The current Raft term, i.e. the metadata log's leader epoch."""
        return 0 if self._node is None else self._node.term

    @property
    def committed_offset(self) -> int:
        return 0 if self._node is None else self._node.committed

    @property
    def log_end_offset(self) -> int:
        """Index of the last entry in this node's log (committed or not)."""
        return 0 if self._node is None else self._node.last_index

    @property
    def applied_offset(self) -> int:
        return self.image.offset

    def voter_progress(self) -> dict[int, int]:
        """The leader's view of each voter's log end (its match index); empty on a follower."""
        node = self._node
        if node is None or node.role is not Role.LEADER:
            return {}
        out = {}
        for v in node.voters:
            pr = node.progress(v)
            out[v] = node.last_index if v == self.node_id else (pr.match if pr is not None else 0)
        return out

    # ------------------------------------------------------------------ voters

    @property
    def voter_set(self) -> VoterSet | None:
        """The voters in force (the latest set in this node's log, or the static set)."""
        return None if self._node is None else self._node.voter_set

    @property
    def voters(self) -> tuple[int, ...]:
        vs = self.voter_set
        if vs is not None:
            return vs.ids
        return self._static.ids if self._static is not None else ()

    @property
    def is_voter(self) -> bool:
        return self._node is not None and self._node.is_voter

    @property
    def kraft_version(self) -> int:
        return 0 if self._node is None else self._node.kraft_version

    def add_voters_listener(self, listener: Callable[[VoterSet | None], None]) -> None:
        """Called with the voter set in force whenever it changes (and once when added)."""
        self._voters_listeners.append(listener)
        listener(self.voter_set)

    def replicated_voters(self) -> list[VoterSet]:
        """The voter sets whose members the leader replicates to: the latest and the committed one."""
        node = self._node
        if node is None:
            return []
        return [vs for vs in (node.voter_set, node.committed_voter_set) if vs is not None]

    async def add_voter(
        self, voter: VoterNode, timeout_s: float, *, wait: bool = True
    ) -> tuple[int, str | None]:
        """AddRaftVoter on the leader: (error code, message) once the change commits (or is
        appended, without ``wait``) or fails."""
        return await self._change(lambda n: n.add_voter(voter), timeout_s, wait=wait)

    async def remove_voter(
        self, node_id: int, directory_id: uuid.UUID | None, timeout_s: float
    ) -> tuple[int, str | None]:
        return await self._change(lambda n: n.remove_voter(node_id, directory_id), timeout_s)

    async def update_voter(self, voter: VoterNode, timeout_s: float) -> tuple[int, str | None]:
        """UpdateRaftVoter answers once the change is appended (Kafka does not wait for the commit)."""
        return await self._change(lambda n: n.update_voter(voter), timeout_s, wait=False)

    async def _change(
        self,
        op: Callable[[RaftNode], int | VoterChangeRefused | NotLeader],
        timeout_s: float,
        *,
        wait: bool = True,
    ) -> tuple[int, str | None]:
        node = self._require_node()
        assert self._voter_change is not None
        if self._voter_change.locked():
            return ErrorCode.REQUEST_TIMED_OUT, "another voter change is in progress on the leader"
        async with self._voter_change:
            result = op(node)
            if isinstance(result, NotLeader):
                return ErrorCode.NOT_LEADER_OR_FOLLOWER, f"not the leader (leader: {result.leader_hint})"
            if isinstance(result, VoterChangeRefused):
                return result.error, result.message
            term = node.term
            self._process_ready()
            if not wait:
                return ErrorCode.NONE, None
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            while node.committed < result:
                if node.term != term or node.log.term(result) != term:
                    return ErrorCode.NOT_LEADER_OR_FOLLOWER, "leadership changed before the change committed"
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return ErrorCode.REQUEST_TIMED_OUT, f"the voter change at {result} did not commit in time"
                await self.wait_for_commit(self.image.offset, min(remaining, 0.5))
            return ErrorCode.NONE, None

    # ------------------------------------------------------------------ writes

    async def submit(self, records: Sequence[MetadataRecord]) -> int:
        """Append ``records`` as one atomic batch; returns its offset once committed and applied.

        For records made outside the controller (they are applied to its working image
        too); commands should go through ``execute``. Raises NotController when this
        node is not the leader or loses leadership before the batch commits.
        """
        if self.controller.active:
            for r in records:
                self.controller.image.apply(r)
        return await self._propose(records)

    async def _propose(self, records: Sequence[MetadataRecord]) -> int:
        # The proposal happens before the first suspension, so records generated and
        # proposed without an await in between keep their order in the log.
        return await self._propose_now(records)

    def _propose_now(self, records: Sequence[MetadataRecord]) -> asyncio.Future[int]:
        """Propose at once; the future resolves once the batch is committed and applied."""
        node = self._require_node()
        result = node.propose(encode_records(records))
        if isinstance(result, NotLeader):
            raise NotController(result.leader_hint)
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending[result] = (node.term, fut)
        self._process_ready()
        return fut

    async def execute(self, op: Callable[[QuorumController], ControllerResult[T]]) -> T:
        """Run a controller command and commit its records; returns the command's response.

        ``await quorum.execute(lambda c: c.create_topics([NewTopic("t", 3, 1)]))``
        """
        result = op(self.controller)
        if not result.records:
            return result.response
        try:
            await self._propose(result.records)
        except NotController as e:
            return result.failed(ErrorCode.NOT_CONTROLLER, str(e))
        return result.response

    def receive(self, message: Message) -> None:
        """A message from a peer voter (the transport calls this)."""
        self._last_heard[message.src] = self.clock.wall_ms()
        self._require_node().step(message)
        self._process_ready()

    def last_heard_ms(self) -> dict[int, int]:
        """Wall-clock ms of the last message from each voter."""
        return dict(self._last_heard)

    def observer_fetch(
        self, replica_id: int, directory_id: uuid.UUID | None, fetch_offset: int, max_bytes: int
    ) -> Message | None:
        """The leader's answer to a fetch of committed entries (see ``RaftNode.observer_fetch``),
        cut to ``max_bytes`` (at least one entry); notes the replica for DescribeQuorum."""
        node = self._require_node()
        if not node.is_voter or replica_id not in node.voters:
            self._observers[replica_id] = (directory_id, fetch_offset - 1, self.clock.wall_ms())
        m = node.observer_fetch(replica_id, directory_id, fetch_offset, 4096)
        if m is None or not m.entries:
            return m
        size, keep = 0, 0
        for e in m.entries:
            if keep and size + len(e.data) > max_bytes:
                break
            size += len(e.data)
            keep += 1
        return dataclasses.replace(m, entries=m.entries[:keep]) if keep < len(m.entries) else m

    def observers(self) -> dict[int, tuple[uuid.UUID | None, int, int]]:
        """Replicas outside the voter set that fetched from this leader: (directory id, log end, ms)."""
        voters = self.voters
        return {n: o for n, o in self._observers.items() if n not in voters}

    # ------------------------------------------------------------------ the loop

    async def _run_timer(self) -> None:
        """Tick for as long as the quorum runs: no failure ends it (a leader whose timer died
        would stop heartbeating and never step down, a follower would never campaign)."""
        node = self._require_node()
        failures, logged_at = 0, -TIMER_FAILURE_LOG_S
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self._tick_s)
            try:
                node.tick()
                self._process_ready()
            except Exception:
                failures += 1
                if loop.time() - logged_at >= TIMER_FAILURE_LOG_S:
                    logged_at = loop.time()
                    log.exception("metadata quorum tick failed (%d so far); ticking on", failures)

    def _process_ready(self) -> None:
        if self._processing:  # a listener fed the node: the running pass picks it up
            return
        self._processing = True
        try:
            self._drain_ready()
        finally:
            self._processing = False

    def _drain_ready(self) -> None:
        node, store = self._require_node(), self._store
        assert store is not None
        while True:
            while node.has_ready():
                rd = node.ready()
                store.save(rd)
                if rd.messages and self._send is not None:
                    for m in rd.messages:
                        self._send(m)
                if rd.snapshot is not None:
                    self._restore(rd.snapshot)
                for e in rd.committed_entries:
                    self._apply(e.index, e.term, e.data)
                node.advance(rd)
                if not node.has_ready():
                    self._maybe_snapshot(node, store)
            self._track_leadership(node)
            if node.voter_set != self._last_voters:
                self._last_voters = node.voter_set
                log.info("controller voters now %s (kraft.version %d)", node.voter_set, node.kraft_version)
                for listener in self._voters_listeners:
                    try:
                        listener(node.voter_set)
                    except Exception:
                        log.exception("voters listener failed")
            if not node.has_ready():  # else activation proposed bootstrap records
                break

    def _restore(self, snap: Snapshot) -> None:
        """A snapshot from the leader replaces the image (this node was behind its log start)."""
        index = snap.index
        self.feed.restore(index, snap.data, voters=snap.voters, kraft_version=snap.kraft_version)
        log.info("metadata image restored from a snapshot at offset %d", index)
        self._committed_changed()

    @property
    def image(self) -> MetadataImage:
        return self.feed.image

    def _committed_changed(self) -> None:
        waiters, self._commit_waiters = self._commit_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def wait_for_commit(self, after: int, timeout_s: float) -> None:
        """Return once more than ``after`` entries are applied, or after ``timeout_s``."""
        if self.image.offset > after:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._commit_waiters.append(fut)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(fut, timeout_s)

    @property
    def apply_errors(self) -> int:
        return self.feed.apply_errors

    def _maybe_snapshot(self, node: RaftNode, store: MetadataLogStore) -> None:
        """Every metadata.log.max.record.bytes.between.snapshots bytes: snapshot the image as of
        the last applied entry and let the store cut the log before it."""
        if store.bytes_since_snapshot < self.snapshot_bytes:
            return
        snap = node.snapshot
        if node.applied <= (snap.index if snap is not None else 0) or self.image.offset != node.applied:
            return
        node.compact(node.applied, encode_image(self.image))
        self.snapshots_taken += 1
        log.info("metadata snapshot at offset %d", node.applied)

    def _apply(self, index: int, term: int, data: bytes) -> None:
        self.feed.apply(index, data)
        pending = self._pending.pop(index, None)
        if pending is not None:
            proposed_term, fut = pending
            if not fut.done():
                if proposed_term == term:
                    fut.set_result(index)
                else:
                    fut.set_exception(NotController(self.leader_id))
        self._committed_changed()

    def _track_leadership(self, node: RaftNode) -> None:
        if node.role is Role.LEADER and self._leader_start and self._leader_term != node.term:
            self._resign_controller(node)  # leadership lost and won again unseen: start afresh
        if node.role is Role.LEADER:
            if self._leader_start == 0:
                self._leader_start = node.last_index
                self._leader_term = node.term
            if not self.controller.active and node.applied >= self._leader_start:
                self.controller.activate(self.image.copy(), self.now_ms())
                log.info("node %d is the active controller (term %d)", self.node_id, node.term)
                self._commit_bootstrap()
                if self._controller_ready is not None:
                    self._controller_ready.set()
        elif self._leader_start:
            self._resign_controller(node)

    def _resign_controller(self, node: RaftNode) -> None:
        """Leadership is gone: the working image (with records that may never commit) goes too."""
        if self.controller.active:
            log.info("node %d is no longer the active controller (term %d, leader %s)",
                     self.node_id, node.term, node.leader_id)
        self._leader_start = 0
        self.controller.deactivate()
        if self._controller_ready is not None:
            self._controller_ready.clear()
        self._fail_pending(node.leader_id)

    def _commit_bootstrap(self) -> None:
        """A new cluster's bootstrap records (while the log is empty) and its finalized feature
        levels (while the log has none, as in logs written before pylog recorded them)."""
        records = list(self.bootstrap) if self.bootstrap and log_is_empty(self.image) else []
        records += bootstrap_feature_records(self.image, features.BOOTSTRAP)
        if not records:
            return

        def done(fut: asyncio.Future[int]) -> None:
            if not fut.cancelled() and fut.exception() is not None:
                log.warning("bootstrap records not committed: %s", fut.exception())

        for r in records:  # first in the new leader's log: no command can come before them
            self.controller.image.apply(r)
        self._propose_now(records).add_done_callback(done)

    def _fail_pending(self, leader_hint: int | None) -> None:
        pending, self._pending = self._pending, {}
        for _, fut in pending.values():
            if not fut.done():
                fut.set_exception(NotController(leader_hint))

    def _require_node(self) -> RaftNode:
        if self._node is None:
            raise RuntimeError("MetadataQuorum.start() has not been called")
        return self._node
