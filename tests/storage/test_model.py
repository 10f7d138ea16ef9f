"""Rule-based test of PartitionLog against an in-memory model of Kafka's log semantics."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from pylog.storage import LogConfig
from storage_helpers import meta_for, open_log, records


@dataclass
class Batch:
    base: int
    last: int
    rows: list[tuple[int, bytes, bytes]] = field(default_factory=list)


CONFIG = LogConfig(segment_bytes=5000, cleanup_policy="compact,delete", retention_bytes=12_000,
                   retention_ms=-1)


class LogMachine(RuleBasedStateMachine):
    FORMAT = 1  # the segment format the log writes

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="pylog-model-"))
        self.dir = self.tmp / "t-0"
        self.log = open_log(self.FORMAT, self.dir, CONFIG, now_ms=0)
        self.batches: list[Batch] = []
        self.lso = 0
        self.leo = 0
        self.now = 0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- helpers -------------------------------------------------------------------------------

    def _visible(self) -> list[tuple[int, bytes, bytes]]:
        return [r for b in self.batches for r in b.rows if r[0] >= self.lso]

    # -- rules ---------------------------------------------------------------------------------

    @rule(n=st.integers(1, 12), keyspace=st.integers(1, 6), size=st.integers(1, 120))
    def append(self, n: int, keyspace: int, size: int) -> None:
        keys = [b"k%d" % ((self.leo + i) % keyspace) for i in range(n)]
        values = [b"%d:" % (self.leo + i) + b"x" * size for i in range(n)]
        self.now += 10
        rb = records(n, ts=self.now, keys=keys, values=values)
        stored = self.log.append(rb, meta_for(rb), now_ms=self.now)
        assert stored.base_offset == self.leo
        self.batches.append(Batch(self.leo, self.leo + n - 1,
                                  [(self.leo + i, keys[i], values[i]) for i in range(n)]))
        self.leo += n

    @rule(data=st.data(), max_bytes=st.integers(1, 6000))
    def read(self, data: st.DataObject, max_bytes: int) -> None:
        start = data.draw(st.integers(self.lso, self.leo))
        got = self.log.read(start, max_bytes)
        expected = [b for b in self.batches if b.last >= start]
        assert (len(got) >= 1) == bool(expected) and len(got) <= len(expected)
        for stored, want in zip(got, expected):
            assert (stored.meta.base_offset, stored.meta.last_offset) == (want.base, want.last)
            assert stored.meta.record_count == len(want.rows) == stored.records.num_rows
            rows = zip(stored.records.column("offset").to_pylist(), stored.records.column("key").to_pylist(),
                       stored.records.column("value").to_pylist())
            assert list(rows) == want.rows

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        first = self.log.segment_base_offsets()[0]
        offset = data.draw(st.integers(max(0, first - 3), self.leo))
        if offset >= self.leo:
            self.log.truncate_to(offset)
            return
        if offset < first:
            self.log.truncate_to(offset)
            self.batches, self.lso, self.leo = [], offset, offset
            return
        self.log.truncate_to(offset)
        self.batches = [b for b in self.batches if b.last < offset]
        self.leo = offset
        self.lso = min(self.lso, offset)

    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.lso, self.leo))
        assert self.log.delete_records_before(offset) == offset
        self.lso = offset

    @rule()
    def retention(self) -> None:
        old = self.lso
        self.log.apply_retention(self.now)
        assert old <= self.log.log_start_offset <= self.leo
        self.lso = self.log.log_start_offset

    @rule()
    def seal(self) -> None:
        self.log.seal_pending()

    @rule()
    def compact(self) -> None:
        active = self.log.segment_base_offsets()[-1]
        latest: dict[bytes, int] = {}
        for b in self.batches:
            for off, key, _ in b.rows:
                if off < active:
                    latest[key] = off
        keep = set(latest.values())
        self.log.compact(self.now, force=True)
        for b in self.batches:
            b.rows = [r for r in b.rows if r[0] >= active or r[0] in keep]
        self.batches = [b for b in self.batches if b.rows]

    @precondition(lambda self: self.leo > 0)
    @rule()
    def reopen(self) -> None:
        self.log.close()
        self.log = open_log(self.FORMAT, self.dir, CONFIG, now_ms=self.now)

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def offsets_match(self) -> None:
        assert (self.log.log_start_offset, self.log.log_end_offset) == (self.lso, self.leo)

    @invariant()
    def records_match(self) -> None:
        t = self.log.read_table()
        got = list(zip(*(t.column(c).to_pylist() for c in ("offset", "key", "value"))))
        assert got == self._visible()


LogMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
TestPartitionLog = LogMachine.TestCase


class LogMachineFormat2(LogMachine):
    FORMAT = 2


LogMachineFormat2.TestCase.settings = settings(max_examples=10, stateful_step_count=30, deadline=None,
                                         suppress_health_check=[HealthCheck.too_slow])
TestPartitionLogFormat2 = LogMachineFormat2.TestCase
