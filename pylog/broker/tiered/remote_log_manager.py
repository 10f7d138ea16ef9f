"""``RemoteLogManager`` (Kafka's name): the broker's shell of the remote tier.

Every ``remote.log.manager.task.interval.ms`` it visits each partition of a topic with
``remote.storage.enable``. As leader it cleans up copies a crashed or deposed leader left
unfinished, moves the remote log start with DeleteRecords, expires remote segments by retention,
deletes the objects of deleted segments once ``remote.log.reader.grace.ms`` passed, copies the
next sealed segments (propose COPY_SEGMENT_STARTED, upload its files (and `.wire` if any and
pylog.remote.log.storage.upload.wire), propose
COPY_SEGMENT_FINISHED), writes the manifest of each committed change (version = its metadata
offset) and collects orphaned objects and superseded manifests after the grace period. Leader
and followers alike then delete the local segments the rules allow (pylog.tiered.rules). Store
I/O runs on a bounded thread pool with timeouts and retries, never on the event loop; every
decision waits for the metadata image to show the committed change, so a proposal that was lost
with a controller is simply proposed again later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow.fs as pafs
from pylog.protocol.errors import ErrorCode
from pylog.storage.remote_layout import (
    OPTIONAL_SEGMENT_FILES,
    SEGMENT_FILES,
    RemoteLogSegment,
    RemoteManifest,
    manifest_key,
    manifest_versions,
    new_segment_id,
    partition_prefix,
    segment_key,
    segment_keys,
)
from pylog.storage.remote_store import RemoteStorageError, open_remote_store

from pylog.broker.control.controller_channel import ControllerUnavailable
from pylog.broker.control.controller_client import ControllerClient
from pylog.broker.datapath.partition import Partition
from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.clock import Clock
from pylog.cluster.image import MetadataImage
from pylog.cluster.records import RemoteLogSegmentState as S
from pylog.config import ConfigError
from pylog.tasks import cancel_and_wait
from pylog.tiered import rules
from pylog.tiered.settings import RemoteTierSettings
from pylog.tiered.store_io import StoreExecutor

log = logging.getLogger(__name__)

IMAGE_WAIT_S = 10.0
COPIES_PER_TICK = 8
# Test-only: ``<point>:<marker file>`` kills this process with SIGKILL at a named point of the
# copy / delete sequence, once per marker file (after-upload: objects written,
# COPY_SEGMENT_FINISHED not proposed; after-commit: committed, manifest not written;
# before-local-delete: local segments about to go).
CRASH_ENV = "PYLOG_TEST_REMOTE_CRASH_AT"
Key = tuple[uuid.UUID, int]


def _crash_point(name: str) -> None:
    point, _, marker = os.environ.get(CRASH_ENV, "").partition(":")
    if point != name or not marker:
        return
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return  # this crash happened already
    log.warning("remote tier: test crash point %s", name)
    os.kill(os.getpid(), signal.SIGKILL)


def segment_epochs(entries: list[tuple[int, int]], base: int, end: int) -> tuple[tuple[int, int], ...]:
    """The (leader epoch, start offset) entries covering ``[base, end]``, the first clamped to base."""
    out: list[tuple[int, int]] = []
    for epoch, start in entries:
        if start > end:
            break
        if start <= base:
            out = [(epoch, base)]
        else:
            out.append((epoch, start))
    return tuple(out)


def _delete_tree(fs: pafs.FileSystem, path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        fs.delete_dir(path)


class RemoteLogManager:
    def __init__(
        self,
        node_id: int,
        settings: RemoteTierSettings,
        replicas: ReplicaManager,
        image: Callable[[], MetadataImage],
        controller: ControllerClient,
        *,
        broker_epoch: Callable[[], int],
        clock: Clock,
    ) -> None:
        self.node_id = node_id
        self.settings = settings
        self.replicas = replicas
        self._image = image
        self.controller = controller
        self._broker_epoch = broker_epoch
        self.clock = clock
        self._now_ms = clock.wall_ms
        self.io: StoreExecutor | None = None
        self._task: asyncio.Task[None] | None = None
        self._busy: set[Key] = set()
        self._in_flight: dict[Key, set[str]] = {}
        self._never_committed: set[str] = set()
        self._manifested: dict[Key, tuple[int, int]] = {}  # version known in the store, its last offset
        self._grace: dict[Any, dict[str, int]] = {}  # first-seen times of things awaiting the grace
        self._listed_ms: dict[Key, int] = {}  # when each partition's objects were last listed

    # -- lifetime ------------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            store = await loop.run_in_executor(None, open_remote_store, self.settings.uri,
                                               self.settings.store_options)
        except (ValueError, RemoteStorageError) as exc:
            raise ConfigError(f"remote.log.storage.uri: {exc}") from None
        self.io = StoreExecutor(store, threads=self.settings.threads, clock=self.clock)
        self._task = asyncio.create_task(self._loop(), name="remote-log-manager")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None
        if self.io is not None:
            self.io.close()

    async def _loop(self) -> None:
        while True:
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("remote tier: a pass failed")
            await asyncio.sleep(self.settings.task_interval_ms / 1000)

    async def run_once(self) -> None:
        """One pass over every tiered partition here (and, on one broker, the deleted topics)."""
        parts = [p for p in self.replicas.snapshot() if p.log_config.remote_storage_enable and not p.deleted]
        results = await asyncio.gather(*(self._partition(p) for p in parts), return_exceptions=True)
        for p, r in zip(parts, results):
            if isinstance(r, Exception) and not isinstance(r, asyncio.CancelledError):
                log.warning("remote tier: %s-%d: %s", p.topic, p.index, r)
        image = self._image()
        live = image.live_brokers()
        if live and live[0] == self.node_id:
            await self._sweep_deleted_topics(image)

    # -- one partition -------------------------------------------------------------------------

    async def _partition(self, part: Partition) -> None:
        key = (part.topic_id, part.index)
        if key in self._busy or self._image().partition(part.topic_id, part.index) is None:
            return
        self._busy.add(key)
        try:
            if part.is_leader:
                await self._lead(part)
            await self._delete_local(part)
        finally:
            self._busy.discard(key)

    def _entries(self, part: Partition) -> list[rules.RemoteEntry]:
        return [rules.RemoteEntry(e.segment, e.state)
                for e in self._image().remote_segment_entries(part.topic_id, part.index)]

    async def _lead(self, part: Partition) -> None:
        key = (part.topic_id, part.index)
        epoch = part.leader_epoch
        prefix = partition_prefix(part.topic, part.topic_id, part.index)
        # copies a crashed or deposed leader left unfinished are deleted, never finished
        stale = rules.stale_copies(self._entries(part), self._in_flight.get(key, ()))
        if stale and await self._propose(part, epoch, [self._change(part, s, S.DELETE_SEGMENT_STARTED)
                                                      for s in stale]):
            self._never_committed.update(s.segment_id for s in stale)
        await self._retention(part, epoch)
        await self._finish_deletions(part, epoch, prefix)
        await self._copy(part, epoch, prefix)
        await self._write_manifest(part, prefix)
        await self._collect_orphans(part, prefix)

    async def _retention(self, part: Partition, epoch: int) -> None:
        image = self._image()
        tid, idx = part.topic_id, part.index
        committed = image.remote_segments(part.topic, tid, idx)
        if not committed:
            return
        if part.log_start_offset > image.remote.recorded_start(tid, idx):  # DeleteRecords reaches the store
            moved = {"topic_id": tid, "partition_index": idx, "leader_epoch": epoch, "segment_id": None,
                     "log_start_offset": part.log_start_offset}
            await self._propose(part, epoch, [moved])
        cfg = part.log_config
        end = committed[-1].end_offset
        local_only = sum(i.size_bytes for i in part.log.segment_infos() if i.base_offset > end)
        expired = rules.expired_remote(
            committed, now_ms=self._now_ms(), retention_ms=cfg.retention_ms if cfg.delete else -1,
            retention_bytes=cfg.retention_bytes if cfg.delete else -1, local_only_bytes=local_only,
            log_start_offset=part.log_start_offset)
        if not expired:
            return
        if not await self._propose(part, epoch, [self._change(part, s, S.DELETE_SEGMENT_STARTED)
                                                 for s in expired]):
            return
        start = rules.log_start_after(committed, expired, part.log_start_offset, part.local_log_start_offset)
        if start > part.log_start_offset:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, part.advance_log_start_offset, start)
            part.log_start_moved()

    async def _finish_deletions(self, part: Partition, epoch: int, prefix: str) -> None:
        assert self.io is not None
        deleting = {e.segment.segment_id: e.segment for e in self._entries(part)
                    if e.state == S.DELETE_SEGMENT_STARTED}
        gkey = ("deleting", part.topic_id, part.index)
        due, self._grace[gkey] = rules.after_grace(self._grace.get(gkey, {}), deleting, now_ms=self._now_ms(),
                                                   grace_ms=self.settings.grace_ms)
        now = set(due) | (deleting.keys() & self._never_committed)
        for sid in sorted(now):
            seg = deleting[sid]
            await self.io.run(f"delete segment {sid}", self.io.store.delete, segment_keys(prefix, seg))
            if await self._propose(part, epoch, [self._change(part, seg, S.DELETE_SEGMENT_FINISHED)]):
                self._never_committed.discard(sid)

    async def _copy(self, part: Partition, epoch: int, prefix: str) -> None:
        assert self.io is not None
        key = (part.topic_id, part.index)
        infos = {i.base_offset: i for i in part.log.segment_infos()}
        local = [rules.LocalSegment(i.base_offset, i.next_offset, i.size_bytes, i.max_timestamp, i.sealed)
                 for i in infos.values()]
        candidates = rules.next_copies(local, self._entries(part), high_watermark=part.high_watermark,
                                       last_stable_offset=part.last_stable_offset,
                                       log_start_offset=part.log_start_offset, limit=COPIES_PER_TICK)
        for c in candidates:
            if not part.is_leader or part.leader_epoch != epoch:
                return
            info = infos[c.local.base_offset]
            seg = RemoteLogSegment(new_segment_id(), c.base_offset, c.end_offset, c.local.max_timestamp,
                                   c.local.size_bytes, epoch,
                                   segment_epochs(part.log.epoch_entries(), c.base_offset, c.end_offset))
            flight = self._in_flight.setdefault(key, set())
            flight.add(seg.segment_id)
            try:
                if not await self._propose(part, epoch, [self._change(part, seg, S.COPY_SEGMENT_STARTED)]):
                    return
                pairs = [(segment_key(prefix, seg, ext), str(path))
                         for ext, path in zip((*SEGMENT_FILES, *OPTIONAL_SEGMENT_FILES), info.files)
                         if ext in SEGMENT_FILES or self.settings.upload_wire]
                size = await self.io.put_files(pairs)
                log.debug("remote tier: %s-%d: uploaded [%d, %d] (%d bytes)", part.topic, part.index,
                          seg.base_offset, seg.end_offset, size)
                _crash_point("after-upload")
                if not await self._propose(part, epoch, [self._change(part, seg, S.COPY_SEGMENT_FINISHED)]):
                    return
                _crash_point("after-commit")
            finally:
                flight.discard(seg.segment_id)
            await self._write_manifest(part, prefix)

    async def _write_manifest(self, part: Partition, prefix: str) -> None:
        assert self.io is not None
        image = self._image()
        tid, idx = part.topic_id, part.index
        version = image.remote.version(tid, idx)
        if version is None or self._manifested.get((tid, idx), (-1, -1))[0] == version:
            return
        segments = image.remote_segments(part.topic, tid, idx)
        start = image.remote_log_start_offset(part.topic, tid, idx)
        manifest = RemoteManifest(part.topic, tid, idx, version,
                                  image.remote.recorded_start(tid, idx) if start is None else start, segments)
        key = manifest_key(prefix, version)
        await self.io.put_bytes("write manifest", key, manifest.encode())
        self._manifested[(tid, idx)] = (version, segments[-1].end_offset if segments else -1)

    async def _manifested_end(self, part: Partition) -> int:
        """The last offset a manifest in the store covers (-1: none): the leader knows what it
        wrote; a follower looks for the manifest of the image's version."""
        assert self.io is not None
        image = self._image()
        tid, idx = part.topic_id, part.index
        version = image.remote.version(tid, idx)
        known = self._manifested.get((tid, idx))
        if version is None:
            return -1
        if known is not None and known[0] == version:
            return known[1]
        if part.is_leader:
            return known[1] if known is not None else -1
        segments = image.remote_segments(part.topic, tid, idx)
        prefix = partition_prefix(part.topic, tid, idx)
        if await self.io.run("stat manifest", self.io.store.exists, manifest_key(prefix, version)):
            self._manifested[(tid, idx)] = (version, segments[-1].end_offset if segments else -1)
            return self._manifested[(tid, idx)][1]
        return known[1] if known is not None else -1

    async def _delete_local(self, part: Partition) -> None:
        infos = part.log.segment_infos()
        local = [rules.LocalSegment(i.base_offset, i.next_offset, i.size_bytes, i.max_timestamp, i.sealed)
                 for i in infos]
        cfg = part.log_config
        n = rules.deletable_local(
            local, manifested_end=await self._manifested_end(part), log_start_offset=part.log_start_offset,
            now_ms=self._now_ms(), local_retention_ms=cfg.effective_local_retention_ms,
            local_retention_bytes=cfg.effective_local_retention_bytes)
        if n:
            _crash_point("before-local-delete")
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, part.delete_local_segments, local[n].base_offset)

    async def _collect_orphans(self, part: Partition, prefix: str) -> None:
        assert self.io is not None
        key = (part.topic_id, part.index)
        now = self._now_ms()
        # LIST calls stay few: a partition's objects are listed at most twice per grace period
        # (and at most every minute), whatever the task interval
        if now - self._listed_ms.get(key, -(1 << 62)) < min(self.settings.grace_ms // 2, 60000):
            return
        self._listed_ms[key] = now
        store = self.io.store
        objects = await self.io.run("list segments", store.list, f"{prefix}/segments")
        known = {e.segment.segment_id for e in self._entries(part)} | self._in_flight.get(key, set())
        orphans = rules.orphan_keys([o.key for o in objects], known)
        versions = await self.io.run("list manifests", manifest_versions, store, prefix)
        current = self._manifested.get(key, (-1, -1))[0]
        old = [manifest_key(prefix, v) for v in rules.superseded_manifests(versions) if v != current]
        gkey = ("objects", *key)
        due, self._grace[gkey] = rules.after_grace(self._grace.get(gkey, {}), orphans + old,
                                                   now_ms=self._now_ms(), grace_ms=self.settings.grace_ms)
        if due:
            log.info("remote tier: %s-%d: deleting %d orphaned or superseded objects", part.topic, part.index,
                     len(due))
            await self.io.run("delete orphans", store.delete, due)

    async def _sweep_deleted_topics(self, image: MetadataImage) -> None:
        """Objects of topics the metadata no longer has (deleted topics) go after the grace period."""
        assert self.io is not None
        store = self.io.store
        names: Any = await self.io.run("list topics", store.children, "")
        gone = []
        for name in names:
            head, _, hexid = name.rpartition("-")
            with contextlib.suppress(ValueError):
                if head and len(hexid) == 32 and image.topic(uuid.UUID(hex=hexid)) is None:
                    gone.append(name)
        seen = self._grace.get("topics", {})
        due, self._grace["topics"] = rules.after_grace(seen, gone, now_ms=self._now_ms(),
                                                        grace_ms=self.settings.grace_ms)
        for name in due:
            objects = await self.io.run(f"list {name}", store.list, name)
            log.info("remote tier: deleting %d objects of deleted topic directory %s", len(objects), name)
            await self.io.run(f"delete {name}", store.delete, [o.key for o in objects])
            if isinstance(store.fs, pafs.LocalFileSystem):  # a directory tree is left behind
                await self.io.run(f"delete {name}/", _delete_tree, store.fs, store.path(name))

    # -- proposals -----------------------------------------------------------------------------

    @staticmethod
    def _change(part: Partition, seg: RemoteLogSegment, state: int) -> dict[str, Any]:
        change: dict[str, Any] = {"topic_id": part.topic_id, "partition_index": part.index,
                                  "leader_epoch": part.leader_epoch, "segment_id": seg.segment_id,
                                  "state": int(state)}
        if state == S.COPY_SEGMENT_STARTED:
            change.update(base_offset=seg.base_offset, end_offset=seg.end_offset,
                          max_timestamp=seg.max_timestamp, size_bytes=seg.size_bytes,
                          segment_leader_epoch=seg.leader_epoch,
                          epochs=[{"epoch": e, "start_offset": o} for e, o in seg.epochs])
        return change

    async def _propose(self, part: Partition, epoch: int, changes: list[dict[str, Any]]) -> bool:
        """Propose changes; True once all committed and this broker's image shows them."""
        for c in changes:
            c["leader_epoch"] = epoch
        try:
            resp = await self.controller.remote_log_segment(self.node_id, self._broker_epoch(), changes)
        except ControllerUnavailable as exc:
            log.info("remote tier: %s-%d: no controller: %s", part.topic, part.index, exc)
            return False
        codes = [r.error_code for r in resp.results]
        if resp.error_code or len(codes) != len(changes) or any(codes):
            log.info("remote tier: %s-%d: proposal refused: %s %s", part.topic, part.index,
                     ErrorCode(resp.error_code).name if resp.error_code else "", codes)
            return False
        return await self._await_image(part, changes)

    async def _await_image(self, part: Partition, changes: list[dict[str, Any]]) -> bool:
        def shown(image: MetadataImage) -> bool:
            entries = {e.segment.segment_id: e.state
                       for e in image.remote_segment_entries(part.topic_id, part.index)}
            for c in changes:
                sid = c.get("segment_id")
                if sid is None:
                    if image.remote.recorded_start(part.topic_id, part.index) < c["log_start_offset"]:
                        return False
                elif c["state"] == S.DELETE_SEGMENT_FINISHED:
                    if sid in entries:
                        return False
                elif entries.get(sid, -1) < c["state"]:
                    return False
            return True

        loop = asyncio.get_running_loop()
        deadline = loop.time() + IMAGE_WAIT_S
        while not shown(self._image()):
            if loop.time() > deadline:
                log.info("remote tier: %s-%d: committed changes not in the image after %.0fs", part.topic,
                         part.index, IMAGE_WAIT_S)
                return False
            await asyncio.sleep(0.02)
        return True

    def tiered_offset(self, part: Partition) -> int | None:
        """One past the last committed remote offset of ``part`` (None: nothing remote): where a
        follower below its leader's local log start begins (KIP-1023)."""
        segments = self._image().remote_segments(part.topic, part.topic_id, part.index)
        return segments[-1].end_offset + 1 if segments else None

    def upload_lag(self) -> dict[tuple[str, int], tuple[int, int]]:
        """(segments, bytes) of sealed local data not yet remote, per tiered partition led here."""
        out: dict[tuple[str, int], tuple[int, int]] = {}
        for part in self.replicas.snapshot():
            if not part.is_leader or not part.log_config.remote_storage_enable:
                continue
            start = self.tiered_offset(part) or part.log_start_offset
            waiting = [i for i in part.log.segment_infos()[:-1] if i.next_offset > start]
            out[(part.topic, part.index)] = (len(waiting), sum(i.size_bytes for i in waiting))
        return out

    def stats(self) -> dict[str, float]:
        """Bytes uploaded and seconds spent uploading (for measurements and cluster info)."""
        io = self.io
        if io is None:
            return {"bytes_uploaded": 0, "upload_seconds": 0.0}
        return {"bytes_uploaded": io.bytes_uploaded, "upload_seconds": io.upload_seconds}
