"""What the coordinator shells share about their compacted internal topics
(`__consumer_offsets`, `__transaction_state`): creating the topic on first use, appending a
call's records as one batch as the partition's leader (the COORDINATOR origin), and reading a
partition back for replay.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pylog.protocol import records as rec
from pylog.protocol.errors import ErrorCode

from pylog.broker.datapath.partition import AppendOrigin, Partition
from pylog.cluster.controller import NewTopic
from pylog.groups import CoordinatorRecord, TxnMarkerRecord, TxnOffsetRecord
from pylog.groups.coordinator import LogEntry
from pylog.model import CONTROL_MASK, HEADERS_TYPE, RECORD_SCHEMA, TRANSACTIONAL_MASK

if TYPE_CHECKING:
    from pylog.broker.control.controller_client import ControllerClient
    from pylog.broker.control.metadata import MetadataView

log = logging.getLogger(__name__)

CREATE_WAIT_S = 10.0
LOAD_READ_BYTES = 8 * 1024 * 1024


class InternalTopic:
    """Creates one internal topic on demand (the first FindCoordinator, as Kafka does) and waits
    for it, sharing one creation among concurrent callers."""

    def __init__(
        self,
        name: str,
        new_topic: Callable[[], NewTopic],
        metadata: MetadataView,
        controller: ControllerClient,
    ) -> None:
        self.name = name
        self._metadata = metadata
        self._controller = controller
        self._new_topic = new_topic  # called at creation time: the settings then in force
        self._creating: asyncio.Future[None] | None = None

    def leaders(self) -> dict[int, int] | None:
        """Leader of each partition; None while the topic does not exist."""
        md = self._metadata
        topic = md.topic(self.name)
        if topic is None:
            return None
        return {p.partition_id: p.leader for p in md.partitions(topic)}

    async def ensure(self) -> ErrorCode:
        """NONE once the topic exists; COORDINATOR_NOT_AVAILABLE if it could not be created."""
        md = self._metadata
        if md.topic(self.name) is not None:
            await md.published()  # its coordinators loaded where the partitions lead here
            return ErrorCode.NONE
        if self._creating is None or self._creating.done():
            self._creating = asyncio.ensure_future(self._create())
        try:
            await asyncio.wait_for(asyncio.shield(self._creating), CREATE_WAIT_S)
        except asyncio.TimeoutError:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        except Exception:
            log.exception("creating %s failed", self.name)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if md.topic(self.name) is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        await md.published()
        return ErrorCode.NONE

    async def _create(self) -> None:
        topic = fit_to_cluster(self._new_topic(), len(self._metadata.image.live_brokers()))
        (result,) = await self._controller.create_topics([topic])
        if result.error_code and self._metadata.topic(topic.name) is None:
            log.error("creating %s failed: %s %s", topic.name, result.error_code, result.error_message)
            return
        log.info("created %s with %d partitions", topic.name, topic.num_partitions)


def fit_to_cluster(topic: NewTopic, live_brokers: int) -> NewTopic:
    """An internal topic's replication factor (Kafka's default 3) is capped at the brokers there
    are when it is created, and its min.insync.replicas at that: a small cluster still gets its
    coordinators."""
    rf = max(1, min(topic.replication_factor, live_brokers))
    configs = dict(topic.configs)
    if "min.insync.replicas" in configs and configs["min.insync.replicas"] is not None:
        configs["min.insync.replicas"] = str(min(int(configs["min.insync.replicas"]), rf))
    return dataclasses.replace(topic, replication_factor=rf, configs=configs)


def append_records_at(part: Partition, recs: list[CoordinatorRecord], now_ms: int) -> tuple[ErrorCode, int]:
    """Append `recs` (all of one producer id / epoch) as one batch, as the partition's leader; a
    producer id >= 0 makes it a transactional batch of that producer (TxnOffsetCommit). The error,
    and the batch's base offset (-1 on error)."""
    n = len(recs)
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(range(n), pa.int64()),
            pa.array([now_ms] * n, pa.timestamp("ms")),
            pa.array([r.key for r in recs], pa.binary()),
            pa.array([r.value for r in recs], pa.binary()),
            pa.array([[]] * n, HEADERS_TYPE),
        ],
        schema=RECORD_SCHEMA,
    )
    first = recs[0]
    if first.producer_id >= 0:
        wire = rec.encode_batch(
            batch,
            base_offset=0,
            producer_id=first.producer_id,
            producer_epoch=first.producer_epoch,
            is_transactional=True,
        )
    else:
        wire = rec.encode_batch(batch, base_offset=0)
    result = part.append_as_leader(wire, now_ms, AppendOrigin.COORDINATOR)
    return ErrorCode(result.error), result.base_offset if result.error == 0 else -1


def batches_by_partition(records: list[CoordinatorRecord]) -> dict[int, list[list[CoordinatorRecord]]]:
    """Per partition, runs of consecutive records sharing a producer id / epoch (one batch each)."""
    out: dict[int, list[list[CoordinatorRecord]]] = {}
    for r in records:
        runs = out.setdefault(r.partition, [])
        last = runs[-1][-1] if runs else None
        if last is not None and (last.producer_id, last.producer_epoch) == (r.producer_id, r.producer_epoch):
            runs[-1].append(r)
        else:
            runs.append([r])
    return out


def iter_log_entries(plog: Any) -> Iterator[LogEntry]:
    """Every record of a partition, oldest first: (key, value, offset) for plain records,
    `TxnOffsetRecord` for records of transactional batches, `TxnMarkerRecord` for markers."""
    offset = plog.log_start_offset
    end = plog.log_end_offset
    while offset < end:
        batches = plog.read(offset, LOAD_READ_BYTES)
        if not batches:
            return
        for b in batches:
            attrs = b.meta.attributes
            keys = b.records.column("key").to_pylist()
            values = b.records.column("value").to_pylist()
            offsets = b.records.column("offset").to_pylist()
            if attrs & CONTROL_MASK:
                for k, v in zip(keys, values):
                    marker = rec.parse_control_record(k, v)
                    if marker.is_commit or marker.is_abort:
                        yield TxnMarkerRecord(b.meta.producer_id, marker.is_commit)
            elif attrs & TRANSACTIONAL_MASK:
                for k, v, o in zip(keys, values, offsets):
                    if k is not None:
                        yield TxnOffsetRecord(b.meta.producer_id, k, v, o)
            else:
                for k, v, o in zip(keys, values, offsets):
                    if k is not None:
                        yield k, v, o
        last = batches[-1].meta
        offset = last.base_offset + last.last_offset_delta + 1


def plain_records(entries: Iterator[LogEntry]) -> Iterator[tuple[bytes, bytes | None]]:
    """The (key, value) records of `iter_log_entries` (a log no producer writes transactionally)."""
    for e in entries:
        if isinstance(e, tuple):
            yield e[0], e[1]
