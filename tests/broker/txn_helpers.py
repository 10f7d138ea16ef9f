"""Transaction API calls with our own codec, for the broker tests."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from harness import Client
from pylog.protocol import records as rec
from pylog.protocol.api import ApiKey


def txn_batch(values: list[bytes], pid: int, epoch: int, seq: int) -> bytes:
    n = len(values)
    table = pa.RecordBatch.from_arrays(
        [
            pa.array(range(n), pa.int64()),
            pa.array([1_700_000_000_000 + i for i in range(n)], pa.timestamp("ms")),
            pa.array([None] * n, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array([[] for _ in range(n)], rec.RECORD_SCHEMA.field("headers").type),
        ],
        schema=rec.RECORD_SCHEMA,
    )
    return rec.encode_batch(
        table, base_offset=0, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
    )


def data_values(records: bytes | memoryview | None) -> list[bytes]:
    """Values of the data batches (control batches, i.e. markers, skipped)."""
    out: list[bytes] = []
    for header, view in rec.iter_batches(records or b""):
        if not header.is_control:
            out += rec.decode_batch(view).records.column("value").to_pylist()
    return out


def find_txn_coordinator(c: Client, txn_id: str, version: int = 3) -> Any:
    return c.request(ApiKey.FIND_COORDINATOR, version, {"key": txn_id, "key_type": 1})


def init_txn(c: Client, txn_id: str, timeout_ms: int = 60000, *, version: int = 4, pid: int = -1,
             epoch: int = -1) -> Any:
    body = {"transactional_id": txn_id, "transaction_timeout_ms": timeout_ms, "producer_id": pid,
            "producer_epoch": epoch}
    return c.request(ApiKey.INIT_PRODUCER_ID, version, body)


def add_partitions(c: Client, txn_id: str, pid: int, epoch: int, topics: dict[str, list[int]],
                   *, version: int = 3) -> dict[tuple[str, int], int]:
    body = {
        "v3_and_below_transactional_id": txn_id,
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }
    resp = c.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, body)
    return {
        (t.name, p.partition_index): p.partition_error_code
        for t in resp.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


def add_offsets(c: Client, txn_id: str, pid: int, epoch: int, group: str, *, version: int = 3) -> int:
    body = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "group_id": group}
    return c.request(ApiKey.ADD_OFFSETS_TO_TXN, version, body).error_code


def end_txn(c: Client, txn_id: str, pid: int, epoch: int, commit: bool, *, version: int = 3) -> int:
    body = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "committed": commit}
    return c.request(ApiKey.END_TXN, version, body).error_code


def txn_offset_commit(c: Client, txn_id: str, group: str, pid: int, epoch: int,
                      offsets: dict[tuple[str, int], int], *, version: int = 3) -> dict[tuple[str, int], int]:
    by_topic: dict[str, list[dict]] = {}
    for (t, p), off in offsets.items():
        by_topic.setdefault(t, []).append(
            {"partition_index": p, "committed_offset": off, "committed_leader_epoch": -1,
             "committed_metadata": ""}
        )
    body = {"transactional_id": txn_id, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
            "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
    resp = c.request(ApiKey.TXN_OFFSET_COMMIT, version, body)
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def offset_fetch(
    c: Client, group: str, tps: list[tuple[str, int]], *, stable: bool
) -> dict[tuple[str, int], Any]:
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    body = {"group_id": group, "require_stable": stable,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]}
    resp = c.request(ApiKey.OFFSET_FETCH, 7, body)
    return {
        (t.name, p.partition_index): (p.committed_offset if p.error_code == 0 else p.error_code)
        for t in resp.topics
        for p in t.partitions
    }


def describe_txn(c: Client, txn_id: str) -> Any:
    (state,) = c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn_id]}).transaction_states
    return state


def list_offsets_latest(c: Client, topic: str, *, committed: bool) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": 1 if committed else 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1,
                                                   "current_leader_epoch": -1}]}],
    }
    resp = c.request(ApiKey.LIST_OFFSETS, 5, body)
    return resp.topics[0].partitions[0].offset
