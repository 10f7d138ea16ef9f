"""What a topic's materialiser reads next and when it commits: a core with no I/O and no clock.

Theory of operation. An Iceberg table kept from a topic records, in the summary of each snapshot it
commits, the next offset of every partition it holds (``pylog.offsets``); its dead-letter table
does the same. So the table itself says where to resume, and a commit moves table and offsets in
one atomic catalog swap: after a crash at any point the table is either before the commit (its
records are read again) or after it (they are not), never in between.

Start: each partition is read from the table's offset (a partition it does not know starts at the
log start offset). The dead-letter table commits before the table, so once the table holds offset
``o`` the dead-letter table holds every failing record below ``o`` too: its own offsets matter only
where they are ahead (a crash between the two commits), and there they keep its rows from repeating.
An offset below the log start (retention removed records never materialised) or past the log end
(the log was truncated) is moved into the log, with a note.

Buffer: fetched records wait in memory until a commit is due: when the buffer is full
(``max_buffer_records`` / ``max_buffer_bytes``), or ``interval_ms`` after the first buffered record
was fetched, or, once the reader has caught up with the log, when the oldest buffered record is
``interval_ms`` old by its timestamp (so records found on a restart are committed at once rather
than an interval later). Never more often than every `MIN_COMMIT_GAP_MS` unless full.

Commit: rows at or past a table's offset for their partition go to that table; the dead-letter
table commits first, then the main table with the new offsets. A lost race (another materialiser
committed first: a leadership change) reloads the offsets and reads again from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MIN_COMMIT_GAP_MS = 1000
DEFAULT_MAX_BUFFER_RECORDS = 1_000_000
DEFAULT_MAX_BUFFER_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class CommitPlan:
    """One commit: rows of partition p with offset >= ``main_from[p]`` go to the table, those with
    offset >= ``dlq_from[p]`` (failing to decode) to the dead-letter table; afterwards the table holds
    everything below ``offsets`` and the dead-letter table below ``dlq_offsets`` (never behind what
    it held: its offsets must not move back where it is ahead of the table)."""

    main_from: dict[int, int]
    dlq_from: dict[int, int]
    offsets: dict[int, int]
    dlq_offsets: dict[int, int]
    rows: int


@dataclass
class MaterializerPlan:
    interval_ms: int
    max_buffer_records: int = DEFAULT_MAX_BUFFER_RECORDS
    max_buffer_bytes: int = DEFAULT_MAX_BUFFER_BYTES
    main: dict[int, int] = field(default_factory=dict)  # the table's offsets
    dlq: dict[int, int] = field(default_factory=dict)  # the dead-letter table's offsets
    positions: dict[int, int] = field(default_factory=dict)  # next offset to fetch
    notes: list[str] = field(default_factory=list)  # what the shell should log
    buffered_records: int = 0
    buffered_bytes: int = 0
    first_buffered_ms: int | None = None
    oldest_timestamp_ms: int | None = None
    caught_up: bool = False
    last_commit_ms: int | None = None

    def __post_init__(self) -> None:
        if self.interval_ms <= 0:
            raise ValueError(f"the commit interval must be positive, got {self.interval_ms} ms")

    def start(self, main: dict[int, int], dlq: dict[int, int], log_bounds: dict[int, tuple[int, int]]
              ) -> dict[int, int]:
        """The tables' offsets and each partition's (log start, log end) -> where to fetch from."""
        self.main = dict(main)
        self.dlq = {p: max(o, main.get(p, o)) for p, o in dlq.items()}
        self._clear()
        self.positions = {}
        for p, (start, end) in sorted(log_bounds.items()):
            want = main.get(p, start)
            if want < start:
                self.notes.append(f"partition {p}: offsets {want}..{start - 1} were removed from the log "
                                  "before "
                                  f"they were materialised; continuing at {start}")
                want = start
            elif want > end:
                self.notes.append(f"partition {p}: the table holds offsets up to {want}, past the log end "
                                  f"{end} "
                                  f"(the log was truncated); continuing at {end}")
                want = end
            self.positions[p] = want
        return dict(self.positions)

    def add_partitions(self, log_starts: dict[int, int]) -> dict[int, int]:
        """Partitions created after the start: read from their log start."""
        for p, start in log_starts.items():
            if p not in self.positions:
                self.positions[p] = max(start, self.main.get(p, start))
        return dict(self.positions)

    def fetched(self, positions: dict[int, int], records: int, nbytes: int, oldest_timestamp_ms: int | None,
                caught_up: bool, now_ms: int) -> None:
        """A poll returned `records` (`nbytes`) and moved the reader to `positions`."""
        self.positions.update(positions)
        self.caught_up = caught_up
        if records <= 0:
            return
        if self.first_buffered_ms is None:
            self.first_buffered_ms = now_ms
        self.buffered_records += records
        self.buffered_bytes += nbytes
        if oldest_timestamp_ms is not None:
            self.oldest_timestamp_ms = oldest_timestamp_ms if self.oldest_timestamp_ms is None else \
                min(self.oldest_timestamp_ms, oldest_timestamp_ms)

    @property
    def full(self) -> bool:
        return (self.buffered_records >= self.max_buffer_records
                or self.buffered_bytes >= self.max_buffer_bytes)

    def commit_due(self, now_ms: int) -> bool:
        if self.buffered_records == 0:
            return False
        if self.full:
            return True
        if self.last_commit_ms is not None and now_ms - self.last_commit_ms < min(MIN_COMMIT_GAP_MS,
                                                                                 self.interval_ms):
            return False
        assert self.first_buffered_ms is not None
        if now_ms - self.first_buffered_ms >= self.interval_ms:
            return True
        return self.caught_up and self.oldest_timestamp_ms is not None and \
            now_ms - self.oldest_timestamp_ms >= self.interval_ms

    def wait_ms(self, now_ms: int) -> int:
        """How long the shell may wait for records before a commit can be due (at most the interval)."""
        if self.buffered_records == 0 or self.first_buffered_ms is None:
            return self.interval_ms
        due = [self.first_buffered_ms + self.interval_ms]
        if self.oldest_timestamp_ms is not None:
            due.append(self.oldest_timestamp_ms + self.interval_ms)
        if self.last_commit_ms is not None:
            due = [max(d, self.last_commit_ms + min(MIN_COMMIT_GAP_MS, self.interval_ms)) for d in due]
        return max(0, min(min(due) - now_ms, self.interval_ms))

    def commit_plan(self) -> CommitPlan:
        dlq_offsets = {p: max(o, self.dlq.get(p, o)) for p, o in self.positions.items()}
        return CommitPlan(dict(self.main), dict(self.dlq), dict(self.positions), dlq_offsets,
                          self.buffered_records)

    def committed(self, plan: CommitPlan, now_ms: int) -> None:
        """The commit of `plan` landed: both tables hold everything below its offsets."""
        self.main.update(plan.offsets)
        self.dlq.update(plan.dlq_offsets)
        self.last_commit_ms = now_ms
        self._clear()

    def lost_race(self, main: dict[int, int], dlq: dict[int, int], log_bounds: dict[int, tuple[int, int]]
                  ) -> dict[int, int]:
        """Another materialiser committed first: drop the buffer and resume from the tables' offsets."""
        self.notes.append("another materialiser committed to the table first; reading again from its offsets")
        return self.start(main, dlq, log_bounds)

    def _clear(self) -> None:
        self.buffered_records = self.buffered_bytes = 0
        self.first_buffered_ms = self.oldest_timestamp_ms = None
