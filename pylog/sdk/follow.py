"""`follow`: a topic as a stream of Arrow batches (or Polars / pandas frames) while records arrive.

    for batch in pylog.follow("orders", group="dashboard", bootstrap_servers="localhost:9092"):
        update(batch)            # committed for the group once the loop asks for the next batch

Where it starts: the offsets the consumer group committed, else ``starting_offsets`` /
``starting_timestamp`` (Spark's options; "latest" by default, as a new Kafka consumer). A batch is
handed over once it holds ``max_records`` records or ``max_wait`` seconds after the wait for it
began with at least one record; an idle topic hands nothing over (``idle_timeout`` ends the loop
after that many seconds without records). Memory stays within one batch and one fetch response.

Delivery: at least once by default. The positions of a batch are committed to the group when the
next batch is asked for (or at the end of the loop), so a batch the loop did not finish (a crash,
``break``, Ctrl-C) is read again by the next `follow` of the group. The first positions are
committed at start, so a restart never skips records produced before the first batch.

Exactly once, with the offsets stored beside the output (``commit=False``; no group): each item is
``(batch, offsets)`` where ``offsets`` is Spark's offset JSON of the positions after the batch;
write both in one transaction of your store, and on restart pass the stored value back as
``starting_offsets``.

The group is used the way Kafka's manually assigning consumers use one: the follower reads every
partition (or ``partitions``) itself and commits with generation -1, which the coordinator allows
while no consumer has joined the group. Ctrl-C while waiting ends the loop cleanly.

Transport, as for `read_topic`: ``transport="auto"`` reads over Arrow Flight when the cluster serves
it (`pylog.sdk.flight_tail`: tailing DoGets that wait on the leader for new records), else with
Kafka Fetch long polls (`pylog.sdk.tail`); ``"flight"`` insists on Flight, ``"kafka"`` never uses
it. ``Follower.transport`` tells which way it reads.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.sdk import aio
from pylog.sdk.constant import ConstantPool
from pylog.sdk.decoders import DecodeSpec, apply_decoders, resolve_decoders
from pylog.sdk.frames import check_frame_type, to_frame
from pylog.sdk.group_offsets import GroupOffsets
from pylog.sdk.offsets import OffsetSpec, TimestampSpec, resolve_ranges
from pylog.sdk.options import ReadOptions
from pylog.sdk.scan import decode_context
from pylog.sdk.schema import as_instants, output_schema
from pylog.sdk.tail import SOURCE_COLUMNS, TailReader

if TYPE_CHECKING:
    from pylog.sdk.flight_source import FlightTopicSource
    from pylog.sdk.flight_tail import FlightTail

log = logging.getLogger(__name__)
_CLOSING: set[asyncio.Future[None]] = set()  # closes of collected followers still running


class Follower:
    """What `follow` returns: an iterator of batches (a context manager too; `close` ends it)."""

    def __init__(
        self,
        topic: str,
        options: ReadOptions | None = None,
        /,
        *,
        group: str | None = None,
        max_records: int = 10_000,
        max_wait: float = 1.0,
        idle_timeout: float | None = None,
        commit: bool = True,
        as_: str = "arrow",
        clock: Clock = SYSTEM_CLOCK,
        **read: Any,
    ) -> None:
        """`options` (or `ReadOptions` of the `read` keywords, starting at the latest offsets as
        `follow` does) and how batches are handed over (see `follow`)."""
        if options is None:
            options = ReadOptions(**{"starting_offsets": "latest", **read})
        elif read:
            options = options.replace(**read)
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic must be a non-empty string, got {topic!r}")
        if options.bootstrap_servers is None:  # ReadOptions has asked for one source already
            raise ValueError("follow reads through the Kafka protocol: pass bootstrap_servers=")
        if isinstance(max_records, bool) or not isinstance(max_records, int) or max_records <= 0:
            raise ValueError(f"max_records must be a positive integer, got {max_records!r}")
        if not max_wait > 0:
            raise ValueError(f"max_wait must be a positive number of seconds, got {max_wait!r}")
        if idle_timeout is not None and not idle_timeout > 0:
            raise ValueError(f"idle_timeout must be a positive number of seconds or None, "
                             f"got {idle_timeout!r}")
        if not commit and group is not None:
            raise ValueError("commit=False is the exactly-once form: the offsets travel with each batch for "
                             "you to store with your output; pass them back as starting_offsets=, not group=")
        self.topic = topic
        self.group = group
        self.as_ = check_frame_type(as_)
        self.options = options
        self.max_records, self.max_wait, self.idle_timeout = max_records, float(max_wait), idle_timeout
        self.commit_offsets = commit
        self.columns = options.output_columns
        self.schema = output_schema(self.columns)
        self._decoders = resolve_decoders(options.decode, decode_context(options, topic))
        self.records = 0  # handed over so far
        self.batches = 0
        self._closed = True  # until the reader is made: nothing to close
        self._stopping = threading.Event()
        self._pool = ConstantPool()
        self._committed: dict[int, int] = {}
        self._outstanding: dict[int, int] | None = None  # positions after the batch last handed over
        from pylog.sdk.flight_source import flight_source

        flight = flight_source(options, tiered=False)  # None: through Kafka
        self.transport = "kafka" if flight is None else "flight"
        columns = [c for c in SOURCE_COLUMNS if c in self.columns]
        every = options.partitions is None  # partitions added later are followed too
        self._reader: TailReader | FlightTail
        try:
            positions = self._start_positions(options, flight)
            if flight is None:
                self._reader = TailReader(options.bootstrap_servers, topic, positions, columns,
                                          options=options.fetch, follow_new_partitions=every, clock=clock)
            else:
                from pylog.sdk.flight_tail import FlightTail

                self._reader = FlightTail(flight, options.bootstrap_servers, topic, positions, columns,
                                          options=options.fetch, follow_new_partitions=every, clock=clock)
        except BaseException:
            if flight is not None:
                flight.close()
            raise
        self._closed = False
        self._groups: GroupOffsets | None = None
        if group is not None:
            try:
                self._groups = GroupOffsets(aio.run(self._reader.connect()), group)
                committed = aio.run(self._groups.fetch(topic, sorted(positions)))
                self._reader.seek(committed)  # out of range: the reader moves to the log start or end
                self._committed = dict(committed)
                if commit:  # a restart before the first batch resumes here, skipping nothing
                    self._commit(self._reader.positions)
            except BaseException:  # closed here, not by a garbage collection on the I/O loop's thread
                self.close()
                raise
        self.clock = clock
        self._last_data = clock.monotonic_s()

    def _start_positions(self, options: ReadOptions, flight: FlightTopicSource | None) -> dict[int, int]:
        """Where each partition starts without a committed offset (asked the way the follower reads)."""
        from pylog.sdk.kafka_source import KafkaTopicSource

        chosen = None if options.partitions is None else list(options.partitions)
        if flight is not None:
            ranges = resolve_ranges(flight, self.topic, partitions=chosen,
                                    starting_offsets=options.starting_offsets,
                                    starting_timestamp=options.starting_timestamp)
            return {r.partition: r.start for r in ranges}
        with KafkaTopicSource(options.bootstrap_servers, options.fetch) as source:
            ranges = resolve_ranges(source, self.topic, partitions=chosen,
                                    starting_offsets=options.starting_offsets,
                                    starting_timestamp=options.starting_timestamp)
        return {r.partition: r.start for r in ranges}

    @property
    def positions(self) -> dict[int, int]:
        """{partition: next offset} after the last batch handed over."""
        return self._reader.positions

    def offsets(self) -> dict[str, dict[str, int]]:
        """`positions` as Spark's offset JSON (what ``starting_offsets=`` takes)."""
        return {self.topic: {str(p): o for p, o in sorted(self.positions.items())}}

    def lag(self) -> dict[int, int]:
        """{partition: committed records not handed over yet}, as the brokers last reported."""
        return self._reader.lag()

    def commit(self) -> None:
        """Commit the positions after the last batch handed over now (normally done when the next
        batch is asked for)."""
        if self._groups is None:
            raise ValueError("nothing to commit to: follow was called without group=")
        self._commit(self.positions)
        self._outstanding = None

    def _commit(self, positions: dict[int, int]) -> None:
        changed = {p: o for p, o in positions.items() if self._committed.get(p) != o}
        if changed and self._groups is not None:
            aio.run(self._groups.commit(self.topic, changed))
            self._committed.update(changed)

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        while True:
            if self._closed or self._stopping.is_set():
                self.close()
                raise StopIteration
            try:
                item = self._poll(self.max_wait)
            except KeyboardInterrupt:
                log.info("following %s stopped by KeyboardInterrupt", self.topic)
                self.close()
                raise StopIteration from None
            if item is not None:
                return item
            idle_s = self.clock.monotonic_s() - self._last_data
            if self.idle_timeout is not None and idle_s >= self.idle_timeout:
                self.close()
                raise StopIteration

    def poll(self, timeout: float | None = None) -> Any:
        """The next batch if records arrive within `timeout` seconds (default ``max_wait``), else None
        (the previous batch is committed first, as when iterating)."""
        if self._closed:
            raise ValueError(f"the follower of {self.topic!r} is closed")
        return self._poll(self.max_wait if timeout is None else timeout)

    def stop(self) -> None:
        """End the iteration after the wait in progress (safe from another thread)."""
        self._stopping.set()

    def _poll(self, wait_s: float) -> Any:
        if self._outstanding is not None and self.commit_offsets:
            self._commit(self._outstanding)
            self._outstanding = None
        pieces = aio.run(self._reader.poll(self.max_records, wait_s))
        if not pieces:
            return None
        self._last_data = self.clock.monotonic_s()
        batch = self._assemble(pieces)
        if self._decoders:
            batch = apply_decoders(batch, self._decoders)
        self._outstanding = self._reader.positions
        self.records += batch.num_rows
        self.batches += 1
        data = to_frame(batch, self.as_)
        if not self.commit_offsets:
            return data, {self.topic: {str(p): o for p, o in sorted(self._outstanding.items())}}
        return data

    def _assemble(self, pieces: list[tuple[int, pa.RecordBatch]]) -> pa.RecordBatch:
        parts = []
        for p, batch in pieces:
            n = batch.num_rows
            arrays = []
            for field in self.schema:
                if field.name == "topic":
                    arrays.append(self._pool.take(self.topic, n))
                elif field.name == "partition":
                    arrays.append(self._pool.take(p, n))
                else:
                    arrays.append(batch.column(field.name))
            parts.append(as_instants(pa.RecordBatch.from_arrays(arrays, names=self.schema.names)))
        return parts[0] if len(parts) == 1 else pa.concat_batches(parts)

    def close(self) -> None:
        """Stop following (the positions of a batch not yet followed by a request for the next one
        stay uncommitted)."""
        if self._closed:
            return
        self._closed = True
        try:
            aio.run(self._reader.close())
        except Exception:
            log.debug("closing the follower of %s", self.topic, exc_info=True)

    def __enter__(self) -> Follower:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            try:
                asyncio.get_running_loop()
            except RuntimeError:  # no event loop in this thread: closing may wait for the I/O loop
                try:
                    self.close()
                except Exception:
                    pass
                return
            # collected on the I/O loop's own thread, which must not wait for itself
            self._closed = True
            task = asyncio.ensure_future(self._reader.close())
            _CLOSING.add(task)
            task.add_done_callback(_CLOSING.discard)

    def __repr__(self) -> str:
        who = f", group={self.group!r}" if self.group else ""
        return f"Follower({self.topic!r}{who}, records={self.records}, batches={self.batches})"


def follow(
    topic: str,
    *,
    bootstrap_servers: Any,
    group: str | None = None,
    partitions: Sequence[int] | None = None,
    starting_offsets: OffsetSpec = "latest",
    starting_timestamp: TimestampSpec = None,
    max_records: int = 10_000,
    max_wait: float = 1.0,
    idle_timeout: float | None = None,
    commit: bool = True,
    include_headers: bool = False,
    columns: Sequence[str] | None = None,
    decode: DecodeSpec = None,
    schema_registry_url: str | None = None,
    on_decode_error: str = "raise",
    as_: str = "arrow",
    fetch_options: Any = None,
    security: Any = None,
    transport: str = "auto",
    flight: str | None = None,
) -> Follower:
    """Follow `topic` as records arrive: an iterator of ``pyarrow.RecordBatch`` (``as_="polars"`` or
    ``"pandas"`` for frames) with the columns of `read_topic` (``columns``, ``include_headers``,
    ``decode`` and ``schema_registry_url`` as there). See the module doc for where it starts,
    ``max_records`` / ``max_wait`` / ``idle_timeout``, and delivery (``group`` and ``commit``).
    ``bootstrap_servers`` / ``security`` / ``fetch_options`` / ``transport`` / ``flight`` as for
    `read_topic` (over Arrow Flight when the cluster serves it, see the module doc)."""
    options = ReadOptions.from_arguments(locals())
    return Follower(topic, options, group=group, max_records=max_records, max_wait=max_wait,
                    idle_timeout=idle_timeout, commit=commit, as_=as_)
