"""``QuorumAddresses``: where a node reaches the controllers, as it learns them.

The voters' endpoints on the controller listener come from the voter set in force (static, or the
log's ``VotersRecord``); the leader's endpoint also comes with every metadata fetch answer, so a
node that only knows ``controller.quorum.bootstrap.servers`` finds the leader through any of them.
Bootstrap servers have negative ids (-2, -3, ...), as in Kafka's KRaft client: they are addresses,
not voters, tried in turn while no leader is known.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from pylog.cluster.voters import VoterSet

Address = tuple[str, int]


class QuorumAddresses:
    def __init__(
        self, listener: str, *, voters: dict[int, Address] | None = None, bootstrap: Iterable[Address] = ()
    ) -> None:
        self.listener = listener
        self._static = dict(voters or {})
        self._voters: dict[int, Address] = dict(self._static)
        self._learned: dict[int, Address] = {}
        self._bootstrap = {-2 - i: a for i, a in enumerate(bootstrap)}
        self._turn = itertools.count()

    def set_voters(self, *sets: VoterSet | None) -> None:
        """The voter sets in force (latest and committed); endpoints on our listener."""
        found: dict[int, Address] = {}
        for vs in sets:
            if vs is None:
                continue
            for v in vs.voters:
                e = v.endpoint(self.listener)
                if e is not None:
                    found.setdefault(v.node_id, (e.host, e.port))
        self._voters = {**self._static, **found}

    def learn(self, node_id: int, address: Address) -> None:
        """A controller's endpoint, as an answer named it (the leader's)."""
        if node_id >= 0:
            self._learned[node_id] = address

    def address(self, node_id: int) -> Address | None:
        return self._voters.get(node_id) or self._learned.get(node_id) or self._bootstrap.get(node_id)

    def all(self) -> dict[int, Address]:
        """Every known address: voters, learned controllers, then bootstrap servers."""
        return {**self._bootstrap, **self._learned, **self._voters}

    def next_candidate(self) -> int | None:
        """Whom to ask while no leader is known: the voters and bootstrap servers in turn."""
        ids = sorted(self._voters) + sorted(self._bootstrap, reverse=True)
        if not ids:
            ids = sorted(self._learned)
        if not ids:
            return None
        return ids[next(self._turn) % len(ids)]
