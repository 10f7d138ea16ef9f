"""The partitions this broker hosts, kept in step with the metadata image.

Partition logs are created, reconfigured and deleted only by applied metadata
(topic and partition records, config records), never directly by a request
handler: a CreateTopics handler commits records and the listener here opens the
logs. Directories follow Kafka's ``<topic>-<partition>`` naming.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pylog.protocol.errors import ErrorCode
from pylog.storage import list_partitions
from pylog.storage.checkpoint import HIGH_WATERMARK_FILE, read_offset_checkpoint, write_offset_checkpoint

from pylog.broker.partition import Partition, rebuild_producer_state
from pylog.broker.wire_cache import WireBudget
from pylog.config import BrokerConfig

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
_EMPTY: dict[int, Partition] = {}
PARTITION_METADATA = "partition.metadata"


class ReplicaManager:
    def __init__(self, config: BrokerConfig, data_dir: Path, now_ms: Any) -> None:
        self.config = config
        self.data_dir = data_dir
        self._now_ms = now_ms
        self.partitions: dict[TopicPartition, Partition] = {}
        self._by_topic: dict[str, dict[int, Partition]] = {}
        self.wire_cache_bytes = config.int("pylog.wire.cache.bytes")
        self.wire_budget = WireBudget(config.int("pylog.wire.cache.total.bytes"))
        self.max_uncompressed_bytes = max(
            config.int("message.max.bytes"), config.int("socket.request.max.bytes")
        )
        self._lock = threading.Lock()  # guards the dicts against the maintenance thread
        self._checkpointed = read_offset_checkpoint(data_dir / HIGH_WATERMARK_FILE)
        # whether the cluster has a partition at all (set once the metadata is known)
        self.partition_exists: Callable[[str, int], bool] = lambda topic, index: False

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def topic_partitions(self, topic: str) -> dict[int, Partition]:
        return self._by_topic.get(topic, _EMPTY)

    def absent_error(self, topic: str, index: int) -> int:
        """The error for a partition this broker does not host: NOT_LEADER_OR_FOLLOWER when the
        cluster has it elsewhere (it moved away: the client refreshes its metadata, as with Kafka),
        else UNKNOWN_TOPIC_OR_PARTITION."""
        if self.partition_exists(topic, index):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def topics(self) -> list[str]:
        return list(self._by_topic)

    def snapshot(self) -> list[Partition]:
        with self._lock:
            return list(self.partitions.values())

    # --- driven by applied metadata ---------------------------------------------------------

    def ensure_partition(self, topic: str, index: int, topic_id: Any, configs: dict[str, str]) -> Partition:
        tp = (topic, index)
        part = self.partitions.get(tp)
        if part is not None and part.topic_id == topic_id:
            return part
        if part is not None:
            # Same name, new topic id: the old topic was deleted while we were not looking.
            self.remove_partition(topic, index)
        path = self.data_dir / f"{topic}-{index}"
        _claim_directory(path, topic_id)
        part = Partition(
            topic,
            index,
            topic_id,
            path,
            self.config.topic_configs(configs),
            now_ms=self._now_ms(),
            wire_cache_bytes=self.wire_cache_bytes,
            wire_budget=self.wire_budget,
            max_uncompressed_bytes=self.max_uncompressed_bytes,
        )
        rebuild_producer_state(part)
        part.restore_high_watermark(self._checkpointed.get(tp, 0))
        with self._lock:
            self.partitions[tp] = part
            self._by_topic.setdefault(topic, {})[index] = part
        log.info("opened partition %s-%d (log end offset %d)", topic, index, part.log_end_offset)
        return part

    def update_configs(self, topic: str, configs: dict[str, str]) -> None:
        effective = self.config.topic_configs(configs)
        for part in self.topic_partitions(topic).values():
            part.apply_configs(effective)

    def remove_partition(self, topic: str, index: int, *, delete_data: bool = True) -> None:
        with self._lock:
            part = self.partitions.pop((topic, index), None)
            parts = self._by_topic.get(topic)
            if parts is not None:
                parts.pop(index, None)
                if not parts:
                    del self._by_topic[topic]
        if part is None:
            return
        with part.lock:
            part.deleted = True
            part.close(flush=False)
        part.wake()
        if delete_data:
            shutil.rmtree(part.path, ignore_errors=True)
        log.info("removed partition %s-%d", topic, index)

    def remove_topic(self, topic: str) -> None:
        for index in list(self.topic_partitions(topic)):
            self.remove_partition(topic, index)

    def delete_strays(self, known: Iterable[TopicPartition], *, skip: Iterable[str] = ()) -> None:
        """Delete partition directories the image does not assign here (deleted while down)."""
        keep = set(known)
        skipped = set(skip)
        for d in list_partitions(self.data_dir):
            if d.path.name not in skipped and (d.topic, d.partition) not in keep:
                log.info("deleting %s: its topic no longer exists", d.path)
                shutil.rmtree(d.path, ignore_errors=True)

    def checkpoint_high_watermarks(self) -> None:
        """Write every partition's high watermark to ``replication-offset-checkpoint`` (Kafka's
        file: the SDK's data-dir reader shows nothing past it), so a restart keeps them."""
        offsets = {(p.topic, p.index): p.high_watermark for p in self.snapshot() if not p.deleted}
        if offsets != self._checkpointed:
            write_offset_checkpoint(self.data_dir / HIGH_WATERMARK_FILE, offsets)
            self._checkpointed = offsets

    def close(self) -> None:
        try:
            self.checkpoint_high_watermarks()
        except OSError:
            log.exception("writing %s failed", HIGH_WATERMARK_FILE)
        for part in self.snapshot():
            try:
                part.close()
            except Exception:
                log.exception("closing partition %s-%d failed", part.topic, part.index)
        with self._lock:
            self.partitions.clear()
            self._by_topic.clear()


def _claim_directory(path: Path, topic_id: Any) -> None:
    """Make ``path`` belong to ``topic_id`` (Kafka's partition.metadata): data left by an older
    topic of the same name (deleted while the broker was down) is removed first."""
    marker = path / PARTITION_METADATA
    expected = f"version: 0\ntopic_id: {topic_id}\n"
    if marker.exists():
        if marker.read_text("utf-8") == expected:
            return
        log.warning("%s held a previous topic of the same name; removing its data", path)
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() and any(path.iterdir()):
        log.warning("%s has no %s; adopting its data for topic id %s", path, PARTITION_METADATA, topic_id)
    path.mkdir(parents=True, exist_ok=True)
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(expected, "utf-8")
    tmp.replace(marker)
