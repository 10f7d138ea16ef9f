"""Kafka's feature versions (KIP-584, KIP-1022) as pylog implements them: what a node supports,
what a new cluster finalizes, and what each level depends on.

A feature's finalized level lives in the metadata log (``FeatureLevelRecord``); level 0 of any
feature but ``metadata.version`` means "not finalized" and is not kept. The supported ranges below
are the levels pylog's code actually implements, under Kafka 4.2's numbering:

- ``metadata.version`` 7-29 (3.3-IV3 to 4.2-IV1): pylog serves the 4.2 protocol surface.
- ``group.version`` 0-1: level 1 turns on the consumer rebalance protocol (KIP-848).
- ``share.version`` 0-1: level 1 turns on share groups (KIP-932); needs metadata.version 27.
- ``transaction.version`` 0: classic transactions (no KIP-890 epoch bump per transaction, no
  flexible transaction log values), so clients keep using AddPartitionsToTxn.
- ``kraft.version`` 0-1: 0 is static voters (``controller.quorum.voters``), 1 the KIP-853 dynamic
  quorum; it is chosen when the storage is formatted and finalized by the Raft log itself.
- ``streams.version`` 0-1: level 1 turns on streams groups (KIP-1071).
- ``eligible.leader.replicas.version`` 0: no ELR (KIP-966).
"""

from __future__ import annotations

from collections.abc import Mapping

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
SHARE_VERSION = "share.version"
STREAMS_VERSION = "streams.version"
ELR_VERSION = "eligible.leader.replicas.version"

# Kafka's MetadataVersion levels: 3.3-IV3 is the lowest a KRaft cluster may run, 4.2-IV1 the newest.
MINIMUM_METADATA_VERSION = 7
LATEST_METADATA_VERSION = 29
_RELEASES = (
    "3.3-IV3", "3.4-IV0", "3.5-IV0", "3.5-IV1", "3.5-IV2", "3.6-IV0", "3.6-IV1", "3.6-IV2",
    "3.7-IV0", "3.7-IV1", "3.7-IV2", "3.7-IV3", "3.7-IV4", "3.8-IV0", "3.9-IV0", "4.0-IV0",
    "4.0-IV1", "4.0-IV2", "4.0-IV3", "4.1-IV0", "4.1-IV1", "4.2-IV0", "4.2-IV1",
)  # fmt: skip
# Levels whose metadata format changed: a downgrade across one of them could lose metadata.
_METADATA_CHANGED = frozenset({7, 8, 11, 13, 14, 15, 17, 23})

SUPPORTED: Mapping[str, tuple[int, int]] = {
    METADATA_VERSION: (MINIMUM_METADATA_VERSION, LATEST_METADATA_VERSION),
    KRAFT_VERSION: (0, 1),
    TRANSACTION_VERSION: (0, 0),
    GROUP_VERSION: (0, 1),
    SHARE_VERSION: (0, 1),
    STREAMS_VERSION: (0, 1),
    ELR_VERSION: (0, 0),
}
"""Feature -> (lowest, highest) level this node implements."""

BOOTSTRAP: Mapping[str, int] = {
    METADATA_VERSION: LATEST_METADATA_VERSION,
    GROUP_VERSION: 1,
    SHARE_VERSION: 1,
    STREAMS_VERSION: 1,
}
"""What the first controller of a cluster finalizes (Kafka 4.2's defaults for its latest
metadata.version, within what pylog supports)."""

# (feature, level) -> the levels of other features it needs. Every level >= 1 also needs
# metadata.version >= MINIMUM_METADATA_VERSION (always true here).
DEPENDENCIES: Mapping[tuple[str, int], Mapping[str, int]] = {
    (SHARE_VERSION, 1): {METADATA_VERSION: 27},
}


def release_name(level: int) -> str:
    """``metadata.version`` level as Kafka names it (``4.2-IV1``)."""
    i = level - MINIMUM_METADATA_VERSION
    return _RELEASES[i] if 0 <= i < len(_RELEASES) else str(level)


def metadata_changed_between(a: int, b: int) -> bool:
    """Whether any metadata.version in (low, high] changed the metadata format (Kafka's
    ``MetadataVersion.checkIfMetadataChanged``)."""
    low, high = min(a, b), max(a, b)
    return any(v in _METADATA_CHANGED for v in range(low + 1, high + 1))


def finalized_level(features: Mapping[str, int], name: str) -> int:
    """The finalized level of ``name`` (0 when it was never finalized)."""
    return features.get(name, 0)
