"""``RaftTransport``: carries the Raft core's messages between controller voters.

Each peer has an outbox and one sender task that drains it into a single ``PylogRaft`` request
(pipelined behind nothing: the receiver steps the messages synchronously and answers at once).
Messages are fire-and-forget as Raft expects: a peer that is down or partitioned loses what was
queued for it (the leader resends from its Progress, candidates time out and retry), and the
outbox is bounded so a dead peer costs nothing. Answers to a message travel as messages of
their own, on the receiver's connection to us.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import Mapping
from typing import Any

from pylog.client.protocol import Channel
from pylog.cluster.channel import ChannelError, node_channel
from pylog.cluster.raft_types import Entry, Message, MessageType, Snapshot
from pylog.cluster.voters import ControlBatch, decode_control, encode_control
from pylog.protocol.api import PylogApiKey
from pylog.security.client import PLAINTEXT, ClientSecurity
from pylog.tasks import cancel_and_wait

log = logging.getLogger(__name__)

MAX_QUEUED = 4096
MAX_BATCH = 256
BACKOFF_MIN_S = 0.05
BACKOFF_MAX_S = 1.0
FAILING_WARN_S = 10.0  # a peer unreachable this long is worth a warning (then one per interval)

_TYPE_CODES: dict[MessageType, int] = {t: i for i, t in enumerate(MessageType)}
_TYPES: dict[int, MessageType] = {i: t for t, i in _TYPE_CODES.items()}


RAFT_VERSION = 1  # PylogRaft v1: directory ids and snapshot voters (KIP-853)
ZERO_UUID = uuid.UUID(int=0)


def uuid_or_none(u: uuid.UUID | None) -> uuid.UUID | None:
    """The wire's zero UUID means none."""
    return None if u is None or u == ZERO_UUID else u


def snapshot_control(snap: Snapshot) -> bytes:
    """The snapshot's control records (kraft.version and voters), empty when it has none."""
    if snap.voters is not None or snap.kraft_version:
        return encode_control(ControlBatch(snap.kraft_version, snap.voters))
    return b""


def snapshot_to_wire(snap: Snapshot) -> dict[str, Any]:
    return {"index": snap.index, "term": snap.term, "data": snap.data, "control": snapshot_control(snap)}


def snapshot_from_wire(w: Any) -> Snapshot:
    """A snapshot from its wire struct; raises ValueError when its control records do not decode."""
    batch = decode_control(bytes(getattr(w, "control", b"") or b""))
    return Snapshot(w.index, w.term, bytes(w.data), batch.voters, batch.kraft_version or 0)


def message_to_wire(m: Message) -> dict[str, Any]:
    snap = m.snapshot
    return {
        "type": _TYPE_CODES[m.type],
        "src": m.src,
        "dst": m.dst,
        "src_directory_id": m.src_dir,
        "dst_directory_id": m.dst_dir,
        "term": m.term,
        "log_term": m.log_term,
        "index": m.index,
        "commit": m.commit,
        "reject": m.reject,
        "reject_hint": m.reject_hint,
        "entries": [{"term": e.term, "index": e.index, "data": e.data} for e in m.entries],
        "snapshot": None if snap is None else snapshot_to_wire(snap),
    }


def message_from_wire(w: Any) -> Message:
    """A Raft message from a decoded ``PylogRaft`` entry; raises ValueError for unknown types."""
    kind = _TYPES.get(w.type)
    if kind is None:
        raise ValueError(f"unknown raft message type {w.type}")
    fields: dict[str, Any] = {
        "log_term": w.log_term,
        "index": w.index,
        "entries": tuple(Entry(e.term, e.index, bytes(e.data)) for e in w.entries),
        "commit": w.commit,
        "reject": w.reject,
        "reject_hint": w.reject_hint,
        "src_dir": uuid_or_none(getattr(w, "src_directory_id", None)),
        "dst_dir": uuid_or_none(getattr(w, "dst_directory_id", None)),
    }
    if w.snapshot is not None:
        fields["snapshot"] = snapshot_from_wire(w.snapshot)
    return Message(kind, w.src, w.dst, w.term, **fields)


class RaftTransport:
    def __init__(
        self,
        node_id: int,
        cluster_id: str,
        peers: Mapping[int, tuple[str, int]],
        *,
        request_timeout_s: float,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.request_timeout_s = request_timeout_s
        self.security = security
        self._addresses: dict[int, tuple[str, int]] = {}
        self._channels: dict[int, Channel] = {}
        self._outbox: dict[int, deque[Message]] = {}
        self._wake: dict[int, asyncio.Event] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._started = False
        self.dropped = 0
        self.set_peers(peers)

    def set_peers(self, peers: Mapping[int, tuple[str, int]]) -> None:
        """The voters to talk to (they change with the voter set): new ones get a channel and a
        sender, departed ones lose theirs, a moved one is reconnected."""
        wanted = {p: a for p, a in peers.items() if p != self.node_id}
        for peer in [p for p in self._addresses if wanted.get(p) != self._addresses[p]]:
            self._drop_peer(peer)
        for peer, (host, port) in wanted.items():
            if peer in self._addresses:
                continue
            self._addresses[peer] = (host, port)
            self._channels[peer] = node_channel(
                host, port, client_id=f"pylog-raft-{self.node_id}", security=self.security
            )
            self._outbox[peer] = deque()
            if self._started:
                self._start_sender(peer)

    def _drop_peer(self, peer: int) -> None:
        self._addresses.pop(peer, None)
        task = self._tasks.pop(peer, None)
        if task is not None:
            task.cancel()
        ch = self._channels.pop(peer, None)
        if ch is not None:
            ch.close()
        self._outbox.pop(peer, None)
        self._wake.pop(peer, None)

    @property
    def peers(self) -> dict[int, tuple[str, int]]:
        return dict(self._addresses)

    def start(self) -> None:
        self._started = True
        for peer in self._channels:
            self._start_sender(peer)

    def _start_sender(self, peer: int) -> None:
        self._wake[peer] = asyncio.Event()
        self._tasks[peer] = asyncio.create_task(self._sender(peer), name=f"raft-send-{peer}")

    def send(self, m: Message) -> None:
        box = self._outbox.get(m.dst)
        if box is None:
            return
        if len(box) >= MAX_QUEUED:
            box.popleft()
            self.dropped += 1
        box.append(m)
        wake = self._wake.get(m.dst)
        if wake is not None:
            wake.set()

    async def _sender(self, peer: int) -> None:
        """Drain ``peer``'s outbox for as long as the peer is ours: no failure ends it (a sender
        that died would leave the peer hearing nothing from us while we still hear it)."""
        box, wake, channel = self._outbox[peer], self._wake[peer], self._channels[peer]
        backoff = BACKOFF_MIN_S
        loop = asyncio.get_running_loop()
        failing_since: float | None = None
        warned = 0.0
        while True:
            if not box:
                wake.clear()
                await wake.wait()
            batch = [box.popleft() for _ in range(min(len(box), MAX_BATCH))]
            try:
                body = {"cluster_id": self.cluster_id, "messages": [message_to_wire(m) for m in batch]}
                resp = await channel.request(PylogApiKey.RAFT, RAFT_VERSION, body, self.request_timeout_s)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.dropped += len(batch)
                if not isinstance(exc, ChannelError):
                    log.exception("sending raft messages to voter %d failed", peer)
                now = loop.time()
                failing_since = now if failing_since is None else failing_since
                if now - failing_since >= FAILING_WARN_S and now - warned >= FAILING_WARN_S:
                    warned = now
                    lost_s = now - failing_since
                    log.warning("raft messages to voter %d lost for %.0fs: %s", peer, lost_s, exc)
                else:
                    log.debug("raft messages to %d lost: %s", peer, exc)
                box.clear()  # stale by the time the peer is back; Raft resends what matters
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
                continue
            failing_since = None
            backoff = BACKOFF_MIN_S
            if resp.error_code:
                log.warning("voter %d refused raft messages: error %d", peer, resp.error_code)
                await asyncio.sleep(BACKOFF_MAX_S)

    async def close(self) -> None:
        self._started = False
        await cancel_and_wait(list(self._tasks.values()))
        self._tasks.clear()
        for ch in self._channels.values():
            ch.close()
