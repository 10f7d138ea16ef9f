"""Produce: validate and append one record batch per partition; acks 0 / 1 / all.

With a single replica, acks=all is satisfied as soon as the leader's append has
returned, so the answer is immediate. acks=0 gets no answer; if any partition
failed, the connection is closed instead so the producer notices (as Kafka does).
A batch refused for some of its records (KIP-467) lists them in ``record_errors``.
"""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.context import RequestContext
from pylog.broker.metadata import INTERNAL_TOPICS
from pylog.broker.registry import CLOSE_CONNECTION, NO_RESPONSE, serves
from pylog.broker.replica_manager import ReplicaManager
from pylog.schema_registry.validation import SchemaValidation

ISR_SIZE = 1  # a single node: the leader is the only in-sync replica


@serves(ApiKey.PRODUCE, versions=(0, 10))
def produce(ctx: RequestContext, req: Any, *, replicas: ReplicaManager,
            schema_validation: SchemaValidation) -> Any:
    acks = req.acks
    now = ctx.now_ms()
    responses = []
    failed = False
    bad_acks = acks not in (-1, 0, 1)
    for t in req.topic_data:
        parts = replicas.topic_partitions(t.name)
        out = []
        for p in t.partition_data:
            part = parts.get(p.index)
            if bad_acks:
                entry = _error(p.index, ErrorCode.INVALID_REQUIRED_ACKS)
            elif part is None:
                entry = _error(p.index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif t.name in INTERNAL_TOPICS:
                # Only the coordinators write there (Kafka: "Cannot append to internal topic").
                entry = _error(p.index, ErrorCode.INVALID_TOPIC_EXCEPTION)
            elif acks == -1 and part.min_insync_replicas > ISR_SIZE:
                entry = _error(p.index, ErrorCode.NOT_ENOUGH_REPLICAS)
            elif (refusal := schema_validation.check(t.name, part.configs, p.records)) is not None:
                entry = {**_error(p.index, ErrorCode.INVALID_RECORD), "error_message": refusal}
            else:
                res = part.append_from_client(p.records, now)
                entry = {
                    "index": p.index,
                    "error_code": res.error,
                    "base_offset": res.base_offset,
                    "log_append_time_ms": res.log_append_time,
                    "log_start_offset": res.log_start_offset,
                    "record_errors": [
                        {"batch_index": i, "batch_index_error_message": m} for i, m in res.record_errors
                    ],
                    "error_message": res.message if res.error else None,
                }
            failed = failed or entry["error_code"] != 0
            out.append(entry)
        responses.append({"name": t.name, "partition_responses": out})
    if acks == 0:
        return CLOSE_CONNECTION if failed else NO_RESPONSE
    return {"responses": responses, "throttle_time_ms": 0}


def _error(index: int, code: int) -> dict:
    return {
        "index": index,
        "error_code": code,
        "base_offset": -1,
        "log_append_time_ms": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": None,
    }
