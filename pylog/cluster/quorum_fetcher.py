"""``QuorumFetcher``: a controller that the leader does not push to follows the metadata log.

A controller outside the voter set (one about to be added, one removed, one on a replaced disk)
is an observer, as KIP-853 has it: it pulls committed entries from the leader with
PylogMetadataFetch and steps each answer into its Raft core as the leader's APPEND (or SNAPSHOT),
so its log, commit index and image advance as a follower's would, and the leader sees how far it
is (AddRaftVoter needs it caught up). A voter that knows no leader fetches too: a voter that a
change removed while it was away learns of it this way. The leader is found through the
voters' or bootstrap servers' answers, which name it and its endpoint.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pylog.cluster.channel import ChannelError
from pylog.cluster.metadata_fetch import MetadataFetches
from pylog.cluster.quorum import MetadataQuorum
from pylog.cluster.raft_transport import snapshot_from_wire, uuid_or_none
from pylog.cluster.raft_types import Entry, Message, MessageType
from pylog.protocol.errors import ErrorCode
from pylog.tasks import cancel_and_wait, keep_running

log = logging.getLogger(__name__)

IDLE_S = 0.1  # how often a voter in touch with its leader checks whether it still is
RETRY_S = 0.1


def fetch_answer_message(resp: Any, node_id: int, directory_id: Any) -> Message | None:
    """The leader's APPEND (or SNAPSHOT) that a PylogMetadataFetch v1 answer stands for."""
    common: dict[str, Any] = {
        "commit": resp.high_watermark,
        "src_dir": uuid_or_none(resp.leader_directory_id),
        "dst_dir": directory_id,
        "fetched": True,
    }
    if resp.snapshot is not None:
        snap = snapshot_from_wire(resp.snapshot)
        return Message(
            MessageType.SNAPSHOT,
            resp.leader_id,
            node_id,
            resp.leader_epoch,
            log_term=snap.term,
            index=snap.index,
            snapshot=snap,
            **common,
        )
    if resp.prev_index < 0:
        return None
    entries = tuple(Entry(e.term, e.index, bytes(e.data)) for e in resp.entries)
    return Message(
        MessageType.APPEND,
        resp.leader_id,
        node_id,
        resp.leader_epoch,
        log_term=resp.prev_term,
        index=resp.prev_index,
        entries=entries,
        **common,
    )


class QuorumFetcher:
    def __init__(self, quorum: MetadataQuorum, fetches: MetadataFetches) -> None:
        self.quorum = quorum
        self.addresses = fetches.addresses
        self.cluster_id = fetches.cluster_id
        self._fetches = fetches
        self._target: int | None = None
        self._task: asyncio.Task[None] | None = None
        self.fetches = 0

    def start(self) -> None:
        self._task = asyncio.create_task(
            keep_running("the quorum fetcher", self._run), name=f"quorum-fetcher-{self.quorum.node_id}"
        )

    def _needs_fetch(self) -> bool:
        q = self.quorum
        return not q.is_voter or q.leader_id is None

    async def _run(self) -> None:
        q = self.quorum
        while True:
            if not self._needs_fetch():
                self._target = None
                await asyncio.sleep(IDLE_S)
                continue
            if self._target is None or self.addresses.address(self._target) is None:
                hint = q.leader_id
                known = hint is not None and hint != q.node_id and self.addresses.address(hint) is not None
                self._target = hint if known else self.addresses.next_candidate()
            target = self._target
            address = self.addresses.address(target) if target is not None else None
            if target is None or address is None:
                await asyncio.sleep(RETRY_S)
                continue
            try:
                resp = await self._fetches.fetch(address, q.committed_offset + 1, q.directory_id)
            except ChannelError as exc:
                log.debug("metadata fetch from %s: %s", address, exc)
                self._target = None
                await asyncio.sleep(RETRY_S)
                continue
            if resp.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID:
                log.error("the controller at %s belongs to another cluster than %s", address, self.cluster_id)
                self._target = None
                await asyncio.sleep(1.0)
                continue
            if resp.error_code:
                leader = resp.leader_id
                self._target = leader if leader >= 0 and leader != target and leader != q.node_id else None
                if self._target is None:
                    await asyncio.sleep(RETRY_S)
                continue
            self._target = target
            message = fetch_answer_message(resp, q.node_id, q.directory_id)
            if message is not None and message.src != q.node_id:
                self.fetches += 1
                try:
                    q.receive(message)
                except Exception:
                    log.exception("a fetched metadata answer did not apply")
                    await asyncio.sleep(RETRY_S)

    async def close(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        self._fetches.close()
