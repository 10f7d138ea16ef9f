"""The asyncio shell of share groups' partition state: `__share_group_state`, lock-expiry timer,
waiting ShareFetches.

`pylog.share.ShareManager` (share sessions and share partitions) and `ShareStateStore` (the
latest persisted snapshot of each share partition) decide; this shell

* owns the `__share_group_state` partitions this broker leads, as the share coordinator does in
  Kafka: it replays them on start (and in `load_partition` when leadership moves here) and drops
  them in `unload_partition`, which also forgets the share partitions they back;
* appends the snapshot of every share partition that changed durably (an acknowledgement, a
  release, an archive, the first start offset) *before* the request that changed it is answered,
  so an accepted record is never delivered again after a restart;
* keeps one loop timer on the earliest acquisition-lock deadline, and wakes waiting ShareFetches
  when records become available again (a release, an expired lock).

The topic is created on first use with `share.coordinator.state.topic.num.partitions` partitions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pylog.protocol.errors import ErrorCode

from pylog.broker.coordinators.coordinator_shell import CoordinatorShell, ShellServices
from pylog.broker.coordinators.internal_topics import iter_log_entries
from pylog.cluster.controller import NewTopic
from pylog.cluster.records import ConfigResourceType
from pylog.cluster.resource_configs import iso_duration_ms
from pylog.groups.types import Output
from pylog.share.manager import ShareManager
from pylog.share.partition import ShareConfig
from pylog.share.state import ShareKey, ShareStateStore

if TYPE_CHECKING:
    from pylog.broker.datapath.partition import Partition
    from pylog.config import BrokerConfig

log = logging.getLogger(__name__)

SHARE_STATE_TOPIC = "__share_group_state"


class ShareShell(CoordinatorShell[ShareKey]):
    coordinator: ShareStateStore | None
    tick_name = "share coordinator"

    def __init__(self, config: BrokerConfig, services: ShellServices) -> None:
        super().__init__(SHARE_STATE_TOPIC, self._state_topic, services)
        self.broker_config = cfg = config
        self.share_config = ShareConfig(
            cfg.int("group.share.record.lock.duration.ms"),
            cfg.int("group.share.delivery.count.limit"),
            cfg.int("group.share.partition.max.record.locks"),
        )
        self.auto_offset_reset = str(cfg.raw("share.auto.offset.reset") or "latest")
        self.manager: ShareManager | None = None
        self._waiters: set[Callable[[], None]] = set()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        leaders = self.leaders()
        n = (
            len(leaders)
            if leaders
            else self.broker_config.int("share.coordinator.state.topic.num.partitions")
        )
        self.coordinator = ShareStateStore(n)
        self.manager = ShareManager(self.share_config, self.coordinator, self.share_config_of)
        await self._replay_led_partitions()

    def share_config_of(self, group_id: str) -> ShareConfig:
        """The share settings of a group: its GROUP config overrides over the broker's."""
        o = self.metadata.image.configs(ConfigResourceType.GROUP, group_id)
        base = self.share_config
        if not o:
            return base
        return ShareConfig(
            int(o.get("share.record.lock.duration.ms", base.lock_duration_ms)),
            int(o.get("share.delivery.count.limit", base.delivery_count_limit)),
            int(o.get("share.partition.max.record.locks", base.max_in_flight)),
        )

    def read_committed(self, group_id: str) -> bool:
        """The group's ``share.isolation.level`` is read_committed: its members see neither aborted
        transactions nor records past the last stable offset."""
        level = self.metadata.image.configs(ConfigResourceType.GROUP, group_id).get(
            "share.isolation.level", "read_uncommitted"
        )
        return str(level).strip().lower() == "read_committed"

    def initial_offset(self, group_id: str, part: Partition, now_ms: int) -> int:
        """Where a group starts on a partition it has no state for: its ``share.auto.offset.reset``
        (earliest, latest, or by_duration:<ISO-8601 duration> back from now)."""
        reset = self.metadata.image.configs(ConfigResourceType.GROUP, group_id).get(
            "share.auto.offset.reset", self.auto_offset_reset
        )
        reset = reset.strip().lower()
        if reset == "earliest":
            return part.log_start_offset
        if reset.startswith("by_duration:"):
            since = now_ms - iso_duration_ms(reset.removeprefix("by_duration:"))
            found = part.offset_for_timestamp(since, committed=False)
            return found[0] if found is not None else part.high_watermark
        return part.high_watermark

    async def ensure_topic(self) -> ErrorCode:
        error = await self._topic.ensure()
        leaders = self.leaders()
        if error is ErrorCode.NONE and leaders and self.coordinator is not None:
            self.coordinator.num_partitions = len(leaders)
        return error

    def _state_topic(self) -> NewTopic:
        cfg = self.broker_config
        return NewTopic(
            SHARE_STATE_TOPIC,
            cfg.int("share.coordinator.state.topic.num.partitions"),
            cfg.int("share.coordinator.state.topic.replication.factor"),
            configs={
                "cleanup.policy": "compact",
                "segment.bytes": str(cfg.int("share.coordinator.state.topic.segment.bytes")),
            },
        )

    # ------------------------------------------------------------------ CoordinatorShell hooks

    def partition_for(self, key: ShareKey) -> int:
        assert self.coordinator is not None
        return self.coordinator.partition_for(key)

    def _load(self, p: int, records: list[Any]) -> None:
        assert self.coordinator is not None and self.manager is not None
        self.manager.forget_partitions_of(p)
        self.coordinator.load_partition(p, records, now_ms=self.clock())
        self._loaded.add(p)

    def _unload(self, p: int) -> Output:
        assert self.coordinator is not None and self.manager is not None
        self.manager.forget_partitions_of(p)
        return self.coordinator.unload_partition(p)

    def _read_partition(self, p: int) -> list[Any]:
        plog = self._log_of(p)
        return [] if plog is None else list(iter_log_entries(plog))

    def _next_deadline(self) -> int | None:
        return self.manager.next_deadline_ms() if self.manager is not None else None

    def _tick(self, now_ms: int) -> None:
        assert self.manager is not None
        if self.manager.tick(now_ms):
            self.persist()
            self.notify()

    def apply(self, out: Any, on_error: Any = None) -> Any:
        error = self._persist(out.records)
        if error is not ErrorCode.NONE and on_error is not None:
            return on_error(out.response, error)
        return out.response

    # ------------------------------------------------------------------ for the handlers

    def key_error(self, key: ShareKey) -> ErrorCode:
        """Why the state of `key` cannot be used here now (loads its state partition lazily)."""
        return self.coordinator_error(key)

    def persist(self) -> ErrorCode:
        """Append the snapshots of every share partition that changed durably; then reschedule."""
        if self.manager is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._persist(self.manager.snapshot_records())
        self._reschedule()
        return error

    def reschedule(self) -> None:
        self._reschedule()

    def add_waiter(self, callback: Callable[[], None]) -> None:
        self._waiters.add(callback)

    def remove_waiter(self, callback: Callable[[], None]) -> None:
        self._waiters.discard(callback)

    def notify(self) -> None:
        """Records became available again: wake the waiting ShareFetches."""
        for cb in list(self._waiters):
            cb()
