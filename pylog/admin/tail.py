"""The reader behind ``pylog topic consume``: Fetch from each partition's leader (read_uncommitted,
as a console consumer reads), records in offset order per partition, until the given end
offsets or, without them, for as long as the caller keeps reading."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pylog.client.blocking import iterate
from pylog.client.errors import KafkaError
from pylog.client.metadata import STALE_LEADER
from pylog.protocol.api import ApiKey
from pylog.protocol.records import decode_batch, iter_batches

READ_UNCOMMITTED = 0
MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 8 << 20
LOG_APPEND_TIME = 1


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    timestamp: int  # epoch ms
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def tail(admin: Any, topic: str, starts: dict[int, int], stops: dict[int, int] | None, *,
         limit: int | None = None) -> Iterator[list[Record]]:
    """The records of ``topic`` from ``starts`` ({partition: offset}) up to ``stops`` (exclusive;
    None: no end), at most ``limit``, one list per fetch answer; ``admin`` is a started
    `pylog.sdk.admin.Admin`."""
    return iterate(_tail(admin.aio.client, topic, dict(starts), stops, limit))


async def _tail(client: Any, topic: str, positions: dict[int, int], stops: dict[int, int] | None,
                limit: int | None) -> AsyncIterator[list[Record]]:
    left = limit
    while left is None or left > 0:
        active = [p for p, pos in positions.items() if stops is None or pos < stops[p]]
        if not active:
            return
        by_leader: dict[int, list[int]] = {}
        for p in active:
            by_leader.setdefault(await client.leader(topic, p), []).append(p)
        for leader, parts in sorted(by_leader.items()):
            body = {
                "replica_id": -1, "max_wait_ms": MAX_WAIT_MS, "min_bytes": 1, "max_bytes": FETCH_MAX_BYTES,
                "isolation_level": READ_UNCOMMITTED, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [
                    {"partition": p, "fetch_offset": positions[p], "partition_max_bytes": FETCH_MAX_BYTES}
                    for p in parts]}],
                "forgotten_topics_data": [],
            }
            resp = await client.request(ApiKey.FETCH, body, node=leader)
            if getattr(resp, "error_code", 0):
                raise KafkaError(resp.error_code, "Fetch")
            out: list[Record] = []
            for tr in resp.responses:
                for pr in tr.partitions:
                    p = pr.partition_index
                    if pr.error_code in STALE_LEADER:
                        client.metadata_cache.forget_topic(topic)
                        continue
                    if pr.error_code:
                        raise KafkaError(pr.error_code, f"Fetch {topic}-{p}")
                    stop = None if stops is None else stops[p]
                    positions[p] = _records(topic, p, pr.records, positions[p], stop, out)
            if left is not None:
                out = out[:left]
                left -= len(out)
            if out:
                yield out


def _records(topic: str, partition: int, data: Any, position: int, stop: int | None,
             out: list[Record]) -> int:
    """Append the records of ``data`` from ``position`` (before ``stop``); the next position."""
    for header, view in iter_batches(data if data is not None else b""):
        last = header.base_offset + header.last_offset_delta
        if last < position:
            continue
        if not header.is_control:
            batch = decode_batch(view).records
            offsets = batch.column("offset").to_pylist()
            if header.timestamp_type == LOG_APPEND_TIME:
                stamps = [header.max_timestamp] * len(offsets)
            else:
                stamps = batch.column("timestamp").cast(pa.int64()).to_pylist()
            keys, values = batch.column("key").to_pylist(), batch.column("value").to_pylist()
            headers = (batch.column("headers").to_pylist() if "headers" in batch.schema.names
                       else [None] * len(offsets))
            for off, ts, k, v, hs in zip(offsets, stamps, keys, values, headers):
                if off < position or (stop is not None and off >= stop):
                    continue
                out.append(Record(topic, partition, off, ts, k, v,
                                  [(h["key"], h["value"]) for h in hs or []]))
        position = last + 1
        if stop is not None and position >= stop:
            return stop
    return position
