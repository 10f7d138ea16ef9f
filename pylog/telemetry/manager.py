"""The broker's record of client instances and the rules of GetTelemetrySubscriptions and
PushTelemetry (Kafka's ClientMetricsManager), sans-IO.

Theory of operation
-------------------
A client first asks for its subscription with a zero instance id; the broker assigns an id and
remembers the instance: who it is (client id, software, address), the metrics and interval it was
assigned (``pylog.telemetry.subscriptions``) and when it last asked and pushed. When subscriptions
change, an instance's assignment is recomputed at its next request (the old subscription id then
answers UNKNOWN_SUBSCRIPTION_ID, and the client asks again). The rules, with Kafka's errors:

- a GetTelemetrySubscriptions sooner than one interval after the instance's last request is
  THROTTLING_QUOTA_EXCEEDED, unless its last push failed for a stale subscription id or a codec;
- a PushTelemetry after a terminating one is INVALID_REQUEST; one sooner than an interval after
  the last push (the first push after a GetTelemetrySubscriptions may come any time: clients add
  jitter) is THROTTLING_QUOTA_EXCEEDED unless it is the terminating one; then a stale subscription
  id is UNKNOWN_SUBSCRIPTION_ID, an unknown codec UNSUPPORTED_COMPRESSION_TYPE, a payload over
  ``telemetry.max.bytes`` TELEMETRY_TOO_LARGE, and one that does not decompress INVALID_RECORD.

Accepted payloads are kept decompressed, the latest per instance, for reading back. Memory is
bounded: at most ``max_instances`` instances (least recently heard from dropped first), payloads
totalling at most ``max_payload_bytes``, and an instance not heard from for three intervals (at
least a minute) is forgotten.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from pylog.protocol.errors import CorruptRecordBatch, ErrorCode, RecordBatchTooLarge
from pylog.protocol.records.compression import CODEC_NAMES, GZIP, LZ4, SNAPPY, ZSTD, decompress
from pylog.telemetry.subscriptions import Assignment, ClientIdentity, Subscription, assign

ACCEPTED_COMPRESSION = (ZSTD, LZ4, GZIP, SNAPPY)
ZERO = uuid.UUID(int=0)
RESERVED_IDS = frozenset({ZERO, uuid.UUID(int=1)})  # Kafka's Uuid.RESERVED
MIN_EXPIRY_MS = 60_000
MAX_INSTANCES = 16_384
MAX_PAYLOAD_BYTES = 64 * 1024 * 1024
INFLATION = 32  # a payload may decompress to this many times telemetry.max.bytes


@dataclass
class ClientInstance:
    identity: ClientIdentity
    principal: str
    assignment: Assignment
    version: object  # the subscriptions the assignment was computed from
    last_get_ms: int | None = None
    last_push_ms: int | None = None
    pushed_since_get: bool = False
    terminating: bool = False
    last_error: int = ErrorCode.NONE
    heard_ms: int = 0
    pushes: int = 0
    metrics: bytes | None = None  # the latest accepted push, decompressed
    pushed_at_ms: int = -1  # wall clock of that push

    @property
    def expires_after_ms(self) -> int:
        return max(MIN_EXPIRY_MS, 3 * self.assignment.interval_ms)


@dataclass(frozen=True)
class SubscriptionAnswer:
    error_code: int
    client_instance_id: uuid.UUID
    assignment: Assignment | None


class ClientMetricsManager:
    def __init__(
        self,
        telemetry_max_bytes: int,
        new_id: Callable[[], uuid.UUID],
        *,
        max_instances: int = MAX_INSTANCES,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
    ) -> None:
        self.telemetry_max_bytes = telemetry_max_bytes
        self._new_id = new_id
        self.max_instances = max_instances
        self.max_payload_bytes = max_payload_bytes
        self._instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()  # least recently heard first
        self._payload_bytes = 0

    # ------------------------------------------------------------------ requests

    def get_subscriptions(
        self,
        instance_id: uuid.UUID,
        identity: Callable[[uuid.UUID], ClientIdentity],
        principal: str,
        subscriptions: tuple[Subscription, ...],
        version: object,
        now_ms: int,
    ) -> SubscriptionAnswer:
        """GetTelemetrySubscriptions: ``identity`` builds the client's identity for an instance id."""
        self._expire(now_ms)
        if instance_id == ZERO:
            instance_id = self._fresh_id()
        inst = self._instance(instance_id, identity, principal, subscriptions, version, now_ms)
        since = max((t for t in (inst.last_get_ms, inst.last_push_ms) if t is not None), default=None)
        early = since is not None and now_ms - since < inst.assignment.interval_ms
        retry = inst.last_error in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        if early and not retry:
            return SubscriptionAnswer(ErrorCode.THROTTLING_QUOTA_EXCEEDED, instance_id, None)
        inst.last_get_ms = now_ms
        inst.pushed_since_get = False
        inst.last_error = ErrorCode.NONE
        return SubscriptionAnswer(ErrorCode.NONE, instance_id, inst.assignment)

    def push(
        self,
        instance_id: uuid.UUID,
        subscription_id: int,
        terminating: bool,
        compression: int,
        payload: bytes | memoryview,
        identity: Callable[[uuid.UUID], ClientIdentity],
        principal: str,
        subscriptions: tuple[Subscription, ...],
        version: object,
        now_ms: int,
        wall_ms: int,
    ) -> int:
        """PushTelemetry: the error code to answer."""
        if instance_id in RESERVED_IDS:
            return ErrorCode.INVALID_REQUEST
        self._expire(now_ms)
        inst = self._instance(instance_id, identity, principal, subscriptions, version, now_ms)
        try:
            code = self._check_push(inst, subscription_id, terminating, compression, len(payload), now_ms)
        finally:
            inst.terminating = inst.terminating or terminating  # a terminated client stays so
        if code == ErrorCode.NONE and len(payload):
            try:
                data = decompress(compression, payload, self.telemetry_max_bytes * INFLATION)
            except (CorruptRecordBatch, RecordBatchTooLarge):
                code = ErrorCode.INVALID_RECORD
            else:
                self._store(inst, data, wall_ms)
        if code == ErrorCode.NONE:
            inst.pushes += 1
        inst.last_error = code
        return code

    def _check_push(
        self,
        inst: ClientInstance,
        subscription_id: int,
        terminating: bool,
        compression: int,
        size: int,
        now_ms: int,
    ) -> int:
        if inst.terminating:
            return ErrorCode.INVALID_REQUEST
        first_since_get = inst.last_get_ms is not None and not inst.pushed_since_get
        on_time = (
            first_since_get
            or inst.last_push_ms is None
            or now_ms - inst.last_push_ms >= inst.assignment.interval_ms
        )
        if on_time:
            inst.last_push_ms, inst.pushed_since_get = now_ms, True
        elif not terminating:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        if subscription_id != inst.assignment.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if compression not in CODEC_NAMES:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if size > self.telemetry_max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE
        return ErrorCode.NONE

    # ------------------------------------------------------------------ reading back

    def instances(self, now_ms: int) -> list[tuple[uuid.UUID, ClientInstance]]:
        self._expire(now_ms)
        return list(self._instances.items())

    # ------------------------------------------------------------------ bookkeeping

    def _fresh_id(self) -> uuid.UUID:
        while True:
            candidate = self._new_id()
            if candidate not in self._instances and candidate not in RESERVED_IDS:
                return candidate

    def _instance(
        self,
        instance_id: uuid.UUID,
        identity: Callable[[uuid.UUID], ClientIdentity],
        principal: str,
        subscriptions: tuple[Subscription, ...],
        version: object,
        now_ms: int,
    ) -> ClientInstance:
        inst = self._instances.get(instance_id)
        if inst is None:
            who = identity(instance_id)
            inst = ClientInstance(who, principal, assign(who, subscriptions), version)
            self._instances[instance_id] = inst
            while len(self._instances) > self.max_instances:
                _, dropped = self._instances.popitem(last=False)
                self._payload_bytes -= len(dropped.metrics or b"")
        elif inst.version != version:  # subscriptions changed: a new assignment, fresh timestamps
            kept = inst
            inst = ClientInstance(
                kept.identity, kept.principal, assign(kept.identity, subscriptions), version
            )
            inst.pushes, inst.metrics, inst.pushed_at_ms = kept.pushes, kept.metrics, kept.pushed_at_ms
            self._instances[instance_id] = inst
        self._instances.move_to_end(instance_id)
        inst.heard_ms = now_ms
        return inst

    def _store(self, inst: ClientInstance, data: bytes, wall_ms: int) -> None:
        self._payload_bytes += len(data) - len(inst.metrics or b"")
        inst.metrics, inst.pushed_at_ms = data, wall_ms
        for other in self._instances.values():  # least recently heard from first
            if self._payload_bytes <= self.max_payload_bytes:
                break
            if other is not inst and other.metrics is not None:
                self._payload_bytes -= len(other.metrics)
                other.metrics = None

    def _expire(self, now_ms: int) -> None:
        while self._instances:
            instance_id, oldest = next(iter(self._instances.items()))
            if now_ms - oldest.heard_ms < oldest.expires_after_ms:
                # instances are in the order last heard from; one with a longer interval may be
                # expired behind a younger one, and goes when it reaches the front
                break
            del self._instances[instance_id]
            self._payload_bytes -= len(oldest.metrics or b"")
