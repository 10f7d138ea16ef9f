"""The in-memory Raft log of one node: entries after an optional snapshot point.

The metadata log is small, so every node keeps the log after its latest snapshot in
memory; the snapshot point (``start_index``/``start_term``) is the last entry the
snapshot covers, and moves forward on ``compact`` and ``restore``.
"""

from __future__ import annotations

from collections.abc import Sequence

from pylog.cluster.raft_types import Entry


class LogInvariantError(AssertionError):
    """A step would break a Raft safety property (e.g. rewrite a committed entry)."""


class RaftLog:
    def __init__(self, entries: Sequence[Entry] = (), start_index: int = 0, start_term: int = 0) -> None:
        self.start_index = start_index
        self.start_term = start_term
        self._entries: list[Entry] = list(entries)
        for i, e in enumerate(self._entries):
            if e.index != start_index + 1 + i:
                raise ValueError(f"log entries are not contiguous at {e.index}")

    def last_index(self) -> int:
        return self.start_index + len(self._entries)

    def last_term(self) -> int:
        return self._entries[-1].term if self._entries else self.start_term

    def term(self, index: int) -> int | None:
        """The term of the entry at ``index``, or None when it is compacted or beyond the end."""
        if index == self.start_index:
            return self.start_term
        pos = index - self.start_index - 1
        if 0 <= pos < len(self._entries):
            return self._entries[pos].term
        return None

    def match_term(self, index: int, term: int) -> bool:
        return self.term(index) == term

    def entry(self, index: int) -> Entry:
        return self._entries[index - self.start_index - 1]

    def slice(self, lo: int, hi: int) -> tuple[Entry, ...]:
        """Entries with lo <= index < hi (clamped to what the log holds)."""
        lo = max(lo, self.start_index + 1)
        return tuple(self._entries[lo - self.start_index - 1 : max(0, hi - self.start_index - 1)])

    def compact(self, index: int) -> int:
        """Drop the entries up to ``index`` (a snapshot now covers them); returns its term."""
        term = self.term(index)
        if term is None or index <= self.start_index:
            held = f"{self.start_index + 1}..{self.last_index()}"
            raise LogInvariantError(f"cannot compact to {index}: the log holds {held}")
        del self._entries[: index - self.start_index]
        self.start_index, self.start_term = index, term
        return term

    def restore(self, index: int, term: int) -> None:
        """Discard the whole log: it now starts after a snapshot at (index, term)."""
        self._entries.clear()
        self.start_index, self.start_term = index, term

    def append(self, entry: Entry) -> None:
        if entry.index != self.last_index() + 1:
            raise LogInvariantError(f"append of {entry.index} after {self.last_index()}")
        self._entries.append(entry)

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Raft §5.4.1: a candidate's log at least as up to date as ours gets our vote."""
        mine = self.last_term()
        return last_term > mine or (last_term == mine and last_index >= self.last_index())

    def find_conflict_by_term(self, index: int, term: int) -> tuple[int, int]:
        """The largest (i, term(i)) with i <= index and term(i) <= term.

        Lets a rejection skip a whole term of divergent entries at once instead of
        backing off one index per round trip.
        """
        index = min(index, self.last_index())
        while index > self.start_index:
            t = self.term(index)
            assert t is not None
            if t <= term:
                return index, t
            index -= 1
        return self.start_index, self.start_term

    def maybe_append(
        self, prev_index: int, prev_term: int, entries: Sequence[Entry], committed: int
    ) -> tuple[int, int] | None:
        """Append a leader's entries after (prev_index, prev_term).

        Returns None when our log does not contain (prev_index, prev_term); otherwise
        (last_new, replaced_from): the index of the last entry the message vouches for,
        and the first index whose old entry was replaced (0 if none). Entries already
        present are kept; the first conflicting one and everything after it are replaced.
        """
        if not self.match_term(prev_index, prev_term):
            return None
        last_new = prev_index + len(entries)
        for pos, e in enumerate(entries):
            if e.index <= self.start_index:
                continue
            t = self.term(e.index)
            if t == e.term:
                continue
            replaced_from = 0
            if t is not None:
                if e.index <= committed:
                    raise LogInvariantError(f"conflict at committed index {e.index} (committed {committed})")
                replaced_from = e.index
                del self._entries[e.index - self.start_index - 1 :]
            self._entries.extend(entries[pos:])
            return last_new, replaced_from
        return last_new, 0
