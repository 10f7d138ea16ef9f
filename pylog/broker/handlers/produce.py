"""Produce: validate and append one record batch per partition; acks 0 / 1 / all.

Only the partition's leader appends (NOT_LEADER_OR_FOLLOWER with the current leader
otherwise). acks=1 answers after the leader's append. acks=all is refused with
NOT_ENOUGH_REPLICAS when the ISR is smaller than ``min.insync.replicas``; otherwise
the answer waits (a delayed produce, up to the request's timeout) until the high
watermark passes the batch, i.e. every in-sync replica has it; with the leader alone
in the ISR that is at once. acks=0 gets no answer; if any partition failed, the
connection is closed instead so the producer notices (as Kafka does). A batch
refused for some of its records (KIP-467) lists them in ``record_errors``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.context import RequestContext
from pylog.broker.metadata import INTERNAL_TOPICS
from pylog.broker.partition import Partition
from pylog.broker.registry import CLOSE_CONNECTION, NO_RESPONSE, serves
from pylog.broker.replica_manager import ReplicaManager
from pylog.schema_registry.validation import SchemaValidation


@serves(ApiKey.PRODUCE, versions=(0, 10))
def produce(
    ctx: RequestContext, req: Any, *, replicas: ReplicaManager, schema_validation: SchemaValidation
) -> Any:
    acks = req.acks
    now = ctx.now_ms()
    responses = []
    waiting: list[tuple[dict, Partition, int]] = []  # acks=all entries until replicated
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
                entry = _error(p.index, replicas.absent_error(t.name, p.index))
            elif t.name in INTERNAL_TOPICS:
                # Only the coordinators write there (Kafka: "Cannot append to internal topic").
                entry = _error(p.index, ErrorCode.INVALID_TOPIC_EXCEPTION)
            elif not part.is_leader:
                entry = _error(p.index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
                entry["current_leader"] = {"leader_id": part.leader_id, "leader_epoch": part.leader_epoch}
            elif acks == -1 and not part.enough_replicas():
                entry = _error(p.index, ErrorCode.NOT_ENOUGH_REPLICAS)
                entry["error_message"] = (
                    f"The ISR {list(part.isr)} is smaller than min.insync.replicas={part.min_insync_replicas}"
                )
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
                if acks == -1 and res.error == 0 and part.high_watermark <= res.last_offset:
                    waiting.append((entry, part, res.last_offset))
            failed = failed or entry["error_code"] != 0
            out.append(entry)
        responses.append({"name": t.name, "partition_responses": out})
    if acks == 0:
        return CLOSE_CONNECTION if failed else NO_RESPONSE
    response = {"responses": responses, "throttle_time_ms": 0}
    if waiting:
        return _await_replication(response, waiting, req.timeout_ms)
    return response


async def _await_replication(
    response: dict, waiting: list[tuple[dict, Partition, int]], timeout_ms: int
) -> dict:
    """Answer once the high watermark passed every batch, or with REQUEST_TIMED_OUT for those it did
    not pass in time (the records stay in the log, as in Kafka)."""
    loop = asyncio.get_running_loop()
    futures = []
    for entry, part, last in waiting:
        fut: asyncio.Future[int] = loop.create_future()

        def done(code: int, fut: asyncio.Future[int] = fut, part: Partition = part) -> None:
            if not fut.done():
                if code == 0 and not part.enough_replicas():
                    code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                fut.set_result(code)

        part.add_hw_waiter(last, done)
        futures.append((entry, part, fut, done))
    await asyncio.wait([f for _, _, f, _ in futures], timeout=max(timeout_ms, 0) / 1000)
    for entry, part, fut, done in futures:
        if fut.done():
            code = fut.result()
        else:
            part.remove_hw_waiter(done)
            code = ErrorCode.REQUEST_TIMED_OUT
        if code:
            entry["error_code"] = code
            entry["error_message"] = ErrorCode.of(code).name
    return response


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
