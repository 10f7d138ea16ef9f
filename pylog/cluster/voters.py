"""The controller quorum's voters (Kafka's VoterSet, KIP-853) and the control records that carry them.

A voter is a *replica key*, its node id and the directory id of its metadata log directory, plus
the endpoints it is reached at and the ``kraft.version`` range it supports. The directory id tells
a controller apart from the same node id on a replaced disk: a voter whose key names a directory
id only counts when the replica's directory id matches (a voter set from ``controller.quorum.voters``
has no directory ids and matches any).

With ``kraft.version`` 1 the voter set lives in the metadata log itself, as control entries
(Kafka's ``KRaftVersionRecord`` / ``VotersRecord`` control records) and in snapshots; a change
takes effect on every replica as soon as the entry is in its log, committed or not, and at most
one change is uncommitted at a time, so the old and the new set always share a majority (Raft's
single-server membership change). With ``kraft.version`` 0 the set is ``controller.quorum.voters``.

A control entry's data is a JSON object, ``{"control": [{"type": "KRaftVersionRecord", ...},
{"type": "VotersRecord", ...}]}`` (a metadata record batch is a JSON array), so a reader of the log
tells the two apart by the first byte. ``VoterHistory`` tracks the voter set at each index of a
node's log (Kafka's VoterSetHistory): appends, truncation of a conflicting suffix, compaction.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

CONTROL_PREFIX = b"{"
KRAFT_VERSION_STATIC = 0  # voters from controller.quorum.voters
KRAFT_VERSION_DYNAMIC = 1  # voters in the log (KIP-853)
SUPPORTED_KRAFT_VERSIONS = (0, 1)


class ControlRecordError(ValueError):
    """A control entry that does not decode."""


@dataclass(frozen=True, slots=True, order=True)
class Endpoint:
    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class VoterNode:
    node_id: int
    directory_id: uuid.UUID | None = None
    endpoints: tuple[Endpoint, ...] = ()
    min_kraft_version: int = 0
    max_kraft_version: int = 1

    def endpoint(self, listener: str | None = None) -> Endpoint | None:
        """The endpoint on ``listener`` (the first one when None)."""
        for e in self.endpoints:
            if listener is None or e.name == listener:
                return e
        return None

    def key(self) -> tuple[int, uuid.UUID | None]:
        return self.node_id, self.directory_id


@dataclass(frozen=True, slots=True)
class VoterSet:
    """An immutable set of voters, sorted by node id (at most one voter per node id)."""

    voters: tuple[VoterNode, ...]
    _by_id: dict[int, VoterNode] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.voters, key=lambda v: v.node_id))
        by_id = {v.node_id: v for v in ordered}
        if len(by_id) != len(ordered):
            raise ValueError(f"a voter set names a node id twice: {[v.node_id for v in ordered]}")
        if not ordered:
            raise ValueError("a voter set cannot be empty")
        object.__setattr__(self, "voters", ordered)
        object.__setattr__(self, "_by_id", by_id)

    @classmethod
    def of_ids(cls, ids: Iterable[int]) -> VoterSet:
        """A static set (no directory ids, no endpoints), as ``controller.quorum.voters`` gives."""
        return cls(tuple(VoterNode(i, None, (), 0, 0) for i in sorted(set(ids))))

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(v.node_id for v in self.voters)

    @property
    def quorum(self) -> int:
        """How many voters make a majority."""
        return len(self.voters) // 2 + 1

    def __len__(self) -> int:
        return len(self.voters)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._by_id

    def get(self, node_id: int) -> VoterNode | None:
        return self._by_id.get(node_id)

    def is_voter(self, node_id: int, directory_id: uuid.UUID | None) -> bool:
        """Whether replica (node_id, directory_id) is a voter: the id is in the set and, if the
        voter names a directory id, it is this one (Kafka's ``VoterSet.isVoter``)."""
        v = self._by_id.get(node_id)
        return v is not None and (v.directory_id is None or v.directory_id == directory_id)

    def add(self, voter: VoterNode) -> VoterSet | None:
        """A new set with ``voter`` added; None when its node id is already a voter."""
        if voter.node_id in self._by_id:
            return None
        return VoterSet((*self.voters, voter))

    def remove(self, node_id: int, directory_id: uuid.UUID | None) -> VoterSet | None:
        """A new set without the voter of this exact key; None when there is none, or it is the last."""
        v = self._by_id.get(node_id)
        if v is None or v.directory_id != directory_id or len(self.voters) == 1:
            return None
        return VoterSet(tuple(x for x in self.voters if x.node_id != node_id))

    def update(self, voter: VoterNode) -> VoterSet | None:
        """A new set with the voter of the same key replaced (endpoints, versions); None if absent."""
        v = self._by_id.get(voter.node_id)
        if v is None or v.directory_id != voter.directory_id:
            return None
        return VoterSet(tuple(voter if x.node_id == voter.node_id else x for x in self.voters))

    def overlapping_majority(self, other: VoterSet) -> bool:
        """At most one voter added or removed between the two sets: every majority of one meets
        every majority of the other."""
        a = {v.key() for v in self.voters}
        b = {v.key() for v in other.voters}
        return len(a - b) <= 1 and len(b - a) <= 1

    def __str__(self) -> str:
        return "{" + ", ".join(_key_str(v.node_id, v.directory_id) for v in self.voters) + "}"


def _key_str(node_id: int, directory_id: uuid.UUID | None) -> str:
    return f"{node_id}" if directory_id is None else f"{node_id}:{directory_id}"


# ---------------------------------------------------------------------------------------------
# control entries


@dataclass(frozen=True, slots=True)
class ControlBatch:
    """The control records of one entry (or of a snapshot's header)."""

    kraft_version: int | None = None
    voters: VoterSet | None = None


def is_control(data: bytes) -> bool:
    return data[:1] == CONTROL_PREFIX


def _voter_to_dict(v: VoterNode) -> dict[str, Any]:
    return {
        "voter_id": v.node_id,
        "voter_directory_id": str(v.directory_id) if v.directory_id is not None else None,
        "endpoints": [{"name": e.name, "host": e.host, "port": e.port} for e in v.endpoints],
        "kraft_version_feature": {
            "min_supported_version": v.min_kraft_version,
            "max_supported_version": v.max_kraft_version,
        },
    }


def _voter_from_dict(d: dict[str, Any]) -> VoterNode:
    dir_id = d.get("voter_directory_id")
    feature = d.get("kraft_version_feature") or {}
    return VoterNode(
        int(d["voter_id"]),
        uuid.UUID(dir_id) if dir_id else None,
        tuple(Endpoint(str(e["name"]), str(e["host"]), int(e["port"])) for e in d.get("endpoints", ())),
        int(feature.get("min_supported_version", 0)),
        int(feature.get("max_supported_version", 0)),
    )


def encode_control(batch: ControlBatch) -> bytes:
    records: list[dict[str, Any]] = []
    if batch.kraft_version is not None:
        records.append({"type": "KRaftVersionRecord", "version": 0, "kraft_version": batch.kraft_version})
    if batch.voters is not None:
        records.append(
            {"type": "VotersRecord", "version": 0, "voters": [_voter_to_dict(v) for v in batch.voters.voters]}
        )
    return json.dumps({"control": records}, separators=(",", ":")).encode()


def decode_control(data: bytes) -> ControlBatch:
    """The control records of a control entry's data (empty data: none)."""
    if not data:
        return ControlBatch()
    try:
        records = json.loads(data)["control"]
        kraft_version: int | None = None
        voters: VoterSet | None = None
        for r in records:
            if r["type"] == "KRaftVersionRecord":
                kraft_version = int(r["kraft_version"])
            elif r["type"] == "VotersRecord":
                voters = VoterSet(tuple(_voter_from_dict(v) for v in r["voters"]))
        return ControlBatch(kraft_version, voters)
    except (ValueError, KeyError, TypeError) as exc:
        raise ControlRecordError(f"not a control entry: {exc}") from None


# ---------------------------------------------------------------------------------------------
# the voter set at each index of a log


@dataclass(frozen=True, slots=True)
class VoterState:
    """The voter set and kraft.version in force from entry ``index`` on (0: before the log)."""

    index: int
    voters: VoterSet | None
    kraft_version: int


class VoterHistory:
    """Kafka's VoterSetHistory: the voter set and kraft.version as of each control entry of a log.

    ``base`` is what holds before the log's first entry (a snapshot's, or the static set); the
    latest state is in force now, whether or not its entry is committed.
    """

    def __init__(self, base: VoterState) -> None:
        self._states: list[VoterState] = [base]

    def reset(self, base: VoterState) -> None:
        self._states = [base]

    @property
    def latest(self) -> VoterState:
        return self._states[-1]

    def at(self, index: int) -> VoterState:
        """The state in force at entry ``index`` (the last change at or before it)."""
        for s in reversed(self._states):
            if s.index <= index:
                return s
        return self._states[0]

    def changes_after(self, index: int) -> list[VoterState]:
        return [s for s in self._states if s.index > index]

    def append(self, index: int, batch: ControlBatch) -> bool:
        """A control entry at ``index`` was appended; True when it changed the voters or version."""
        last = self._states[-1]
        if index <= last.index:
            raise ValueError(f"control entry at {index} after one at {last.index}")
        voters = batch.voters if batch.voters is not None else last.voters
        version = batch.kraft_version if batch.kraft_version is not None else last.kraft_version
        if voters == last.voters and version == last.kraft_version:
            return False
        self._states.append(VoterState(index, voters, version))
        return True

    def truncate_from(self, index: int) -> bool:
        """Entries from ``index`` on were replaced; True when a change was dropped."""
        before = len(self._states)
        while len(self._states) > 1 and self._states[-1].index >= index:
            self._states.pop()
        return len(self._states) != before

    def compact(self, index: int) -> None:
        """The log now starts after ``index``: changes at or before it fold into the base."""
        keep = [s for s in self._states if s.index > index]
        base = self.at(index)
        self._states = [VoterState(min(base.index, index), base.voters, base.kraft_version), *keep]


def directory_id_str(u: uuid.UUID | None) -> str:
    """Kafka's text form of a directory id (its ``Uuid``: base64url, no padding)."""
    if u is None:
        return "AAAAAAAAAAAAAAAAAAAAAA"
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


def parse_directory_id(text: str) -> uuid.UUID:
    """A directory id in Kafka's text form (or as a hyphenated UUID); ValueError otherwise."""
    text = text.strip()
    if len(text) == 22:
        try:
            raw = base64.urlsafe_b64decode(text + "==")
        except (ValueError, TypeError):
            raw = b""
        if len(raw) == 16:
            return uuid.UUID(bytes=raw)
    try:
        return uuid.UUID(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a directory id (e.g. {directory_id_str(uuid.uuid4())})") from None


def new_directory_id() -> uuid.UUID:
    return uuid.uuid4()
