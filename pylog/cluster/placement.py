"""Where the replicas of new partitions go: round-robin over the brokers, rack-aware when the
brokers have ``broker.rack`` (sans-IO; the randomness is the caller's ``start`` and ``shift``).

Theory of operation
-------------------
Brokers are listed *rack-alternated*: the first broker of each rack, then the second of each, and
so on (racks and brokers in id order), so neighbours in the list sit in different racks. Partition
``p``'s first replica, its preferred leader, is the broker at ``start + p`` in that list: leaders
go round the brokers, and so round the racks. Each further replica is taken at a distance from the
leader that grows with ``shift`` and with every full turn of partitions (Kafka's classic scheme),
so followers spread too; a candidate in a rack the partition already uses is passed over while
some rack is still unused. Without racks this is plain round-robin. Kafka's StripedReplicaPlacer
pursues the same goals (distinct racks while racks suffice, leaders and replicas spread evenly).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

Racks = Mapping[int, "str | None"]  # broker id -> broker.rack (None: no rack)


def rack_alternated(brokers: Racks) -> list[int]:
    """Broker ids interleaved across racks: r0[0], r1[0], r2[0], r0[1], ..."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(brokers):
        by_rack.setdefault(brokers[b] or "", []).append(b)
    racks = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    for i in range(max((len(r) for r in racks), default=0)):
        out.extend(r[i] for r in racks if i < len(r))
    return out


def place_replicas(
    brokers: Racks,
    num_partitions: int,
    replication_factor: int,
    start: int,
    shift: int,
    first: int = 0,
) -> list[tuple[int, ...]]:
    """Replica lists for partitions ``first .. first+num_partitions-1`` (``replication_factor``
    must not exceed the number of brokers)."""
    arranged = rack_alternated(brokers)
    n = len(arranged)
    if replication_factor > n:
        raise ValueError(f"replication factor {replication_factor} is larger than {n} broker(s)")
    all_racks = {brokers[b] or "" for b in arranged}
    out = []
    for p in range(first, first + num_partitions):
        lead = (start + p) % n
        s = shift + p // n
        replicas = [arranged[lead]]
        racks = {brokers[arranged[lead]] or ""}
        k = 0
        while len(replicas) < replication_factor:
            if k < 2 * n:
                candidate = arranged[(lead + 1 + (s + k) % max(n - 1, 1)) % n]
            else:  # every distance tried: any broker not yet used
                candidate = next(b for b in arranged if b not in replicas)
            k += 1
            rack = brokers[candidate] or ""
            if candidate in replicas or (rack in racks and len(racks) < len(all_racks) and k <= 2 * n):
                continue
            replicas.append(candidate)
            racks.add(rack)
        out.append(tuple(replicas))
    return out


def assign_replicas(
    brokers: Sequence[int],
    num_partitions: int,
    replication_factor: int,
    start: int,
    shift: int,
    first: int = 0,
) -> list[tuple[int, ...]]:
    """Round-robin replica placement without racks (Kafka's classic scheme)."""
    return place_replicas(dict.fromkeys(brokers), num_partitions, replication_factor, start, shift, first)
