"""Whole-request error answers (a handler bug, an obsolete version): every entry gets ``code``.

A client must be able to match the answer to what it asked, so per-partition APIs
echo the request's topics and partitions. APIs not covered here get None and the
connection is closed instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Builder = Callable[[Any, int], dict]


def _produce(req: Any, code: int) -> dict:
    return {
        "responses": [
            {
                "name": t.name,
                "partition_responses": [
                    {"index": p.index, "error_code": code, "base_offset": -1} for p in t.partition_data
                ],
            }
            for t in req.topic_data
        ]
    }


def _fetch(req: Any, code: int) -> dict:
    return {
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": t.topic,
                "partitions": [
                    {
                        "partition_index": p.partition,
                        "error_code": code,
                        "high_watermark": -1,
                        "records": b"",
                    }
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ],
    }


def _list_offsets(req: Any, code: int) -> dict:
    return {
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": code, "timestamp": -1, "offset": -1}
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ]
    }


def _offset_commit(req: Any, code: int) -> dict:
    return {
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": code} for p in t.partitions
                ],
            }
            for t in req.topics
        ]
    }


def _offset_fetch(req: Any, code: int) -> dict:
    if getattr(req, "groups", None):
        return {"groups": [{"group_id": g.group_id, "topics": [], "error_code": code} for g in req.groups]}
    return {
        "error_code": code,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p, "committed_offset": -1, "metadata": "", "error_code": code}
                    for p in t.partition_indexes
                ],
            }
            for t in req.topics or []
        ],
    }


def _create_topics(req: Any, code: int) -> dict:
    return {"topics": [{"name": t.name, "error_code": code, "error_message": None} for t in req.topics]}


def _delete_topics(req: Any, code: int) -> dict:
    names = [t.name for t in req.topics] if getattr(req, "topics", None) else req.topic_names
    return {"responses": [{"name": n, "error_code": code} for n in names or []]}


def _describe_configs(req: Any, code: int) -> dict:
    return {
        "results": [
            {
                "error_code": code,
                "error_message": None,
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
                "configs": [],
            }
            for r in req.resources
        ]
    }


def _alter_configs(req: Any, code: int) -> dict:
    return {
        "responses": [
            {"error_code": code, "resource_type": r.resource_type, "resource_name": r.resource_name}
            for r in req.resources
        ]
    }


def _create_partitions(req: Any, code: int) -> dict:
    return {"results": [{"name": t.name, "error_code": code} for t in req.topics]}


def _elect_leaders(req: Any, code: int) -> dict:
    return {"error_code": code, "replica_election_results": []}


def _top_level(req: Any, code: int) -> dict:
    return {"error_code": code}


def _delete_records(req: Any, code: int) -> dict:
    return {
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p.partition_index, "low_watermark": -1, "error_code": code}
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ]
    }


def _describe_producers(req: Any, code: int) -> dict:
    return {
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p, "error_code": code, "error_message": None, "active_producers": []}
                    for p in t.partition_indexes
                ],
            }
            for t in req.topics
        ]
    }


def _add_partitions_to_txn(req: Any, code: int) -> dict:
    if getattr(req, "transactions", None):
        return {"error_code": code, "results_by_transaction": []}
    return {
        "error_code": code,
        "results_by_topic_v3_and_below": [
            {
                "name": t.name,
                "results_by_partition": [
                    {"partition_index": p, "partition_error_code": code} for p in t.partitions
                ],
            }
            for t in req.v3_and_below_topics or []
        ],
    }


def _create_acls(req: Any, code: int) -> dict:
    return {"results": [{"error_code": code, "error_message": None} for _ in req.creations]}


def _delete_acls(req: Any, code: int) -> dict:
    return {
        "filter_results": [
            {"error_code": code, "error_message": None, "matching_acls": []} for _ in req.filters
        ]
    }


def _alter_scram(req: Any, code: int) -> dict:
    users = dict.fromkeys([*(d.name for d in req.deletions), *(u.name for u in req.upsertions)])
    return {"results": [{"user": u, "error_code": code, "error_message": None} for u in users]}


def _alter_client_quotas(req: Any, code: int) -> dict:
    return {
        "entries": [
            {
                "error_code": code,
                "error_message": None,
                "entity": [
                    {"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity
                ],
            }
            for entry in req.entries
        ]
    }


def _offset_for_leader_epoch(req: Any, code: int) -> dict:
    return {
        "topics": [
            {
                "topic": t.topic,
                "partitions": [
                    {"error_code": code, "partition": p.partition, "leader_epoch": -1, "end_offset": -1}
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ]
    }


def _write_txn_markers(req: Any, code: int) -> dict:
    return {
        "markers": [
            {
                "producer_id": m.producer_id,
                "topics": [
                    {
                        "name": t.name,
                        "partitions": [
                            {"partition_index": p, "error_code": code} for p in t.partition_indexes
                        ],
                    }
                    for t in m.topics
                ],
            }
            for m in req.markers
        ]
    }


def _share_topics(req: Any, code: int) -> dict:
    """ShareFetch / ShareAcknowledge: every partition of every topic (by id) gets ``code``."""
    return {
        "error_code": 0,
        "responses": [
            {
                "topic_id": t.topic_id,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": code,
                        "error_message": None,
                        "current_leader": {"leader_id": -1, "leader_epoch": -1},
                    }
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ],
    }


def _share_offsets(req: Any, code: int) -> dict:
    """Alter / DeleteShareGroupOffsets: every named topic's partitions get ``code``."""
    return {
        "error_code": 0,
        "responses": [
            {
                "topic_name": t.topic_name,
                "partitions": [
                    {
                        "partition_index": getattr(p, "partition_index", p),
                        "error_code": code,
                        "error_message": None,
                    }
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ],
    }


def _alter_reassignments(req: Any, code: int) -> dict:
    return {
        "error_code": code,
        "responses": [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": code} for p in t.partitions
                ],
            }
            for t in req.topics
        ],
    }


def _envelope(req: Any, code: int) -> dict:
    return {"response_data": None, "error_code": code}


_BUILDERS: dict[int, Builder] = {
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    8: _offset_commit,
    9: _offset_fetch,
    10: _top_level,
    11: _top_level,
    12: _top_level,
    13: _top_level,
    14: _top_level,
    19: _create_topics,
    20: _delete_topics,
    22: _top_level,
    25: _top_level,
    26: _top_level,
    32: _describe_configs,
    33: _alter_configs,
    37: _create_partitions,
    43: _elect_leaders,
    44: _alter_configs,
    45: _alter_reassignments,
    46: _top_level,
    64: _top_level,
    55: _top_level,
    36: _top_level,
    60: _top_level,
    21: _delete_records,
    23: _offset_for_leader_epoch,
    27: _write_txn_markers,
    24: _add_partitions_to_txn,
    28: _offset_commit,
    29: _top_level,
    30: _create_acls,
    31: _delete_acls,
    50: _top_level,
    51: _alter_scram,
    48: _top_level,
    49: _alter_client_quotas,
    71: _top_level,
    72: _top_level,
    74: _top_level,
    56: _top_level,
    57: _top_level,
    58: _envelope,
    61: _describe_producers,
    62: _top_level,
    63: _top_level,
    67: _top_level,
    68: _top_level,
    76: _top_level,
    47: _top_level,
    78: _share_topics,
    79: _share_topics,
    91: _share_offsets,
    92: _share_offsets,
    32000: _top_level,
    32001: _top_level,
}


def error_response(api_key: int, api_version: int, request: Any, code: int) -> dict | None:
    builder = _BUILDERS.get(api_key)
    if builder is None or request is None:
        return None
    return builder(request, code)
