"""`LiveTable`: a topic followed live (`pylog.follow`), its newest rows and the rate they arrive at.

While running, a background thread asks the follower for the next batch (waiting up to
`interval_s`), keeps the newest `n` rows for display (decoded as `TopicBrowser` decodes them) and
adds a point to the records-per-second series the sparkline draws. With a ``group`` the follower
commits what was shown, so another `live_table` of that group continues where this one stopped.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import traitlets
from pylog.widgets import browse, html
from pylog.widgets.views import _LiveWidget

from pylog.clock import SYSTEM_CLOCK, Clock

DISPLAY_COLUMNS = ["partition", "offset", "timestamp", "key", "value"]


class LiveTable(_LiveWidget):
    """The newest `n` records of `topic` as they arrive, the total followed and a rate sparkline."""

    topic = traitlets.Unicode("").tag(sync=True)
    n = traitlets.Int(20).tag(sync=True)
    decode = traitlets.Unicode("auto").tag(sync=True)
    records: traitlets.List[Any] = traitlets.List().tag(sync=True)
    rates: traitlets.List[Any] = traitlets.List().tag(sync=True)  # [[epoch ms, records per second], ...]
    total = traitlets.Int(0).tag(sync=True)

    def __init__(self, topic: str, n: int = 20, *, bootstrap_servers: Any, group: str | None = None,
                 starting_offsets: Any = "latest", decode: str = "auto", interval_s: float = 1.0,
                 live: bool = True, history_size: int = 120, schema_registry_url: str | None = None,
                 security: Any = None, clock: Clock = SYSTEM_CLOCK) -> None:
        from pylog.sdk.follow import Follower

        if decode not in browse.DECODINGS:
            raise ValueError(f"decode must be one of {browse.DECODINGS}, got {decode!r}")
        if n <= 0:
            raise ValueError(f"n must be positive, got {n}")
        follower = Follower(topic, bootstrap_servers=bootstrap_servers, group=group,
                            starting_offsets=starting_offsets, max_wait=float(interval_s), security=security,
                            clock=clock)
        super().__init__(kind="live", topic=topic, n=int(n), decode=decode, interval_s=float(interval_s))
        self.follower = follower
        self.bootstrap_servers, self.security = bootstrap_servers, security
        self.schema_registry_url = schema_registry_url
        self._latest: pa.Table | None = None
        self._history: deque[list[float]] = deque(maxlen=history_size)
        self._clock = clock
        self._last_poll = clock.monotonic_s()
        self._decoded: dict[str, list[str | None]] = {}
        self._poll(0.05)
        if live:
            self.start()

    def _fetch(self) -> None:
        self._poll(self.interval_s)

    def _loop(self, stop: Any) -> None:  # the follower's wait is the pause between refreshes
        while not stop.is_set():
            self.refresh()

    def _poll(self, timeout_s: float) -> None:
        batch = self.follower.poll(timeout_s)
        now = self._clock.monotonic_s()
        got = 0 if batch is None else batch.num_rows
        elapsed = max(now - self._last_poll, 1e-3)
        self._last_poll = now
        self._history.append([self._clock.wall_ms(), round(got / elapsed, 1)])
        if batch is not None:
            rows = pa.Table.from_batches([batch]).select(DISPLAY_COLUMNS)
            newest = _newest_first(rows, self.n)
            keep = newest if self._latest is None else pa.concat_tables([newest, self._latest])
            self._latest = keep.slice(0, self.n)
            self._decoded = browse.registry_texts(
                self._latest, self.topic, bootstrap_servers=self.bootstrap_servers,
                schema_registry_url=self.schema_registry_url, security=self.security)
        with self.hold_sync():
            self.total = self.follower.records
            self.rates = list(self._history)
            if batch is not None and self._latest is not None:
                self.records = browse.records_json(self._latest, self.decode, self._decoded)

    @traitlets.observe("decode")
    def _on_decode(self, change: dict[str, Any]) -> None:
        if change["new"] not in browse.DECODINGS:
            self.decode = change["old"]
            return
        if getattr(self, "_latest", None) is not None:
            self.records = browse.records_json(self._latest, change["new"], self._decoded)

    def _describe(self) -> str:
        return f"topic={self.topic!r}, n={self.n}, total={self.total}"

    def dataframe(self) -> Any:
        """The rows shown, newest first, as a pandas DataFrame."""
        from pylog._extras import require

        pd = require("pandas", "the widget's DataFrame")
        df = pd.DataFrame(self.records, columns=browse.COLUMNS)
        df["timestamp"] = pd.to_datetime(df["timestamp"], unit="ms")
        return df

    def close(self) -> None:
        super().close()
        follower = getattr(self, "follower", None)
        if follower is not None:
            follower.close()

    def _repr_html_(self) -> str:
        return html.live_html(self.topic, self.records, self.rates, self.total)


def _newest_first(rows: pa.Table, n: int) -> pa.Table:
    """The newest `n` rows of a batch (by timestamp, then offset), newest first."""
    order = pc.sort_indices(rows, [("timestamp", "descending"), ("offset", "descending"),
                                   ("partition", "ascending")])
    return rows.take(order).slice(0, n)
