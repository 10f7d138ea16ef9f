"""The shape of a cluster for the cluster widget: brokers with racks, replica and leader counts,
under-replicated and offline partitions and the reassignments in flight (the SDK's
`ClusterAdmin`), with a short history of the partitions moving, so a notebook watches a rebalance
as it runs. `brokers()` is its one-shot DataFrame form."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from pylog._extras import require
from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.sdk.cluster_admin import ClusterAdminSync

if TYPE_CHECKING:
    import pandas

BROKER_COLUMNS = ["node_id", "host", "port", "rack", "replicas", "leaders"]


class ClusterMonitor:
    """Polls a cluster; each `poll` is a snapshot dict (`ClusterState.to_dict` plus the time and a
    history of [t_ms, partitions moving] samples)."""

    def __init__(self, *, bootstrap_servers: Any, security: Any = None, history_size: int = 240,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        if bootstrap_servers is None:
            raise ValueError("pass bootstrap_servers=")
        self.clock = clock
        self._admin = ClusterAdminSync(bootstrap_servers, security=security, request_timeout_s=10.0)
        self.history: deque[list[int]] = deque(maxlen=history_size)

    def poll(self, now_ms: int | None = None) -> dict[str, Any]:
        now = self.clock.wall_ms() if now_ms is None else now_ms
        snap = self._admin.state().to_dict()
        snap["updated_ms"] = now
        self.history.append([now, len(snap["reassignments"])])
        snap["moving_history"] = list(self.history)
        return snap

    def close(self) -> None:
        self._admin.close()


def brokers_frame(snapshot: dict[str, Any]) -> pandas.DataFrame:
    pd = require("pandas", "pylog.widgets")
    return pd.DataFrame(snapshot.get("brokers", []), columns=BROKER_COLUMNS)


def brokers(*, bootstrap_servers: Any, security: Any = None) -> pandas.DataFrame:
    """One row per broker: rack, replicas and leaders it holds."""
    monitor = ClusterMonitor(bootstrap_servers=bootstrap_servers, security=security)
    try:
        return brokers_frame(monitor.poll())
    finally:
        monitor.close()
