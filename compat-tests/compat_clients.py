"""One small produce/consume/admin vocabulary over five real Kafka clients.

Each client is driven through its own public API, unmodified: kafka-python, confluent-kafka and
aiokafka in-process, kcat and kafkajs (``js/kafkajs_cli.js``) as subprocesses. Records are compared
as ``Rec`` values so that any client's output can be checked against any other's input.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

JS_CLI = Path(__file__).parent / "js" / "kafkajs_cli.js"

PYTHON_CLIENTS = ("kafka-python", "confluent-kafka", "aiokafka")
ALL_CLIENTS = (*PYTHON_CLIENTS, "kcat", "kafkajs")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# Codecs each client can produce out of the box (kafkajs ships only gzip; the others need plugins).
CLIENT_CODECS = {
    "kafka-python": CODECS,
    "confluent-kafka": CODECS,
    "aiokafka": CODECS,
    "kcat": CODECS,
    "kafkajs": ("none", "gzip"),
}

CONSUME_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Rec:
    """A record as a client saw it. ``partition``/``offset``/``timestamp`` are None when unknown."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp: int | None = None
    partition: int | None = None
    offset: int | None = None
    timestamp_type: int | None = None  # 0 CreateTime, 1 LogAppendTime, when the client says

    def content(self) -> tuple[Any, ...]:
        return (self.partition, self.key, self.value, self.headers)


@dataclass
class Produced:
    """Where each record went: (partition, offset) per record; offset None if the client cannot tell."""

    positions: list[tuple[int, int | None]] = field(default_factory=list)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode()


def _unb64(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)


def _headers(h: Iterable[tuple[str, bytes | None]] | None) -> tuple[tuple[str, bytes], ...]:
    return tuple(
        (k.decode() if isinstance(k, bytes) else k, v if v is not None else b"") for k, v in (h or ())
    )


def run_cmd(
    cmd: Sequence[str], *, input_bytes: bytes | None = None, timeout: float = 60.0, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run a client subprocess; a non-zero exit is an error carrying the client's stderr."""
    try:
        out = subprocess.run(
            list(cmd), input=input_bytes, capture_output=True, timeout=timeout, cwd=cwd, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"{cmd[0]} timed out after {timeout}s: {' '.join(cmd)}\n"
            f"stderr: {(exc.stderr or b'').decode(errors='replace')[-4000:]}"
        ) from None
    if out.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited {out.returncode}\n"
            f"stdout: {out.stdout.decode(errors='replace')[-4000:]}\n"
            f"stderr: {out.stderr.decode(errors='replace')[-4000:]}"
        )
    return out


# ---------------------------------------------------------------------------------------------
# kafkajs


def kafkajs(command: str, args: dict[str, Any], *, timeout: float = 60.0, allow_error: bool = False) -> Any:
    """Run one kafkajs_cli.js command; it prints one JSON document on stdout.

    With ``allow_error`` a failed command returns ``{"error": ..., "type": ...}`` instead of raising.
    """
    cmd = ["node", str(JS_CLI), command, "-"]
    try:
        out = subprocess.run(
            cmd,
            input=json.dumps(args).encode(),
            capture_output=True,
            timeout=timeout,
            cwd=JS_CLI.parent,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"kafkajs {command} timed out after {timeout}s\n"
            f"stderr: {(exc.stderr or b'').decode(errors='replace')[-4000:]}"
        ) from None
    lines = out.stdout.decode().strip().splitlines()
    doc = json.loads(lines[-1]) if lines else None
    if out.returncode != 0 and not (allow_error and doc is not None):
        raise AssertionError(
            f"kafkajs {command} exited {out.returncode}\n"
            f"stderr: {out.stderr.decode(errors='replace')[-4000:]}"
        )
    if doc is None:
        raise AssertionError(f"kafkajs {command} printed nothing; stderr: {out.stderr.decode()[-4000:]}")
    return doc


def kafkajs_admin(
    bootstrap: str, op: str, *args: Any, timeout: float = 60.0, allow_error: bool = False
) -> Any:
    """``admin[op](*args)`` in kafkajs; its result, or the error document with ``allow_error``."""
    doc = kafkajs(
        "admin",
        {"brokers": [bootstrap], "op": op, "args": list(args)},
        timeout=timeout,
        allow_error=allow_error,
    )
    return doc if "error" in doc else doc["result"]


# ---------------------------------------------------------------------------------------------
# producing


def produce(
    client: str,
    bootstrap: str,
    topic: str,
    recs: Sequence[Rec],
    *,
    compression: str = "none",
    acks: str = "all",
    idempotent: bool | None = None,
    config: dict[str, Any] | None = None,
) -> Produced:
    """Send ``recs`` with ``client`` and wait for every acknowledgement (or raise)."""
    fn = {
        "kafka-python": _produce_kafka_python,
        "confluent-kafka": _produce_confluent,
        "aiokafka": lambda *a, **k: asyncio.run(_produce_aiokafka(*a, **k)),
        "kcat": _produce_kcat,
        "kafkajs": _produce_kafkajs,
    }[client]
    return fn(
        bootstrap, topic, recs, compression=compression, acks=acks, idempotent=idempotent, config=config or {}
    )


def _produce_kafka_python(
    bootstrap: str,
    topic: str,
    recs: Sequence[Rec],
    *,
    compression: str,
    acks: str,
    idempotent: bool | None,
    config: dict[str, Any],
) -> Produced:
    from kafka import KafkaProducer

    kw: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "acks": "all" if acks == "all" else int(acks),
        "compression_type": None if compression == "none" else compression,
        "request_timeout_ms": 20000,
        "max_block_ms": 20000,
        "linger_ms": 5,
    }
    if idempotent is not None:
        kw["enable_idempotence"] = idempotent
    kw.update(config)
    producer = KafkaProducer(**kw)
    try:
        futures = [
            producer.send(
                topic,
                value=r.value,
                key=r.key,
                headers=list(r.headers) or None,
                partition=r.partition,
                timestamp_ms=r.timestamp,
            )
            for r in recs
        ]
        producer.flush(30)
        metas = [f.get(timeout=30) for f in futures]
    finally:
        producer.close(timeout=10)
    return Produced([(m.partition, m.offset) for m in metas])


def _produce_confluent(
    bootstrap: str,
    topic: str,
    recs: Sequence[Rec],
    *,
    compression: str,
    acks: str,
    idempotent: bool | None,
    config: dict[str, Any],
) -> Produced:
    from confluent_kafka import KafkaException, Producer

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "compression.type": compression,
        "acks": acks,
        "linger.ms": 5,
        "message.timeout.ms": 30000,
    }
    if idempotent is not None:
        conf["enable.idempotence"] = idempotent
    conf.update(config)
    errors: list[str] = []
    fatal: list[str] = []
    conf["error_cb"] = lambda err: (fatal if err.fatal() else errors).append(str(err))
    producer = Producer(conf)
    results: list[Any] = [None] * len(recs)

    def on_delivery(i: int):
        def cb(err: Any, msg: Any) -> None:
            results[i] = err if err is not None else (msg.partition(), msg.offset())

        return cb

    for i, r in enumerate(recs):
        kw: dict[str, Any] = {"value": r.value, "key": r.key, "on_delivery": on_delivery(i)}
        if r.partition is not None:
            kw["partition"] = r.partition
        if r.timestamp is not None:
            kw["timestamp"] = r.timestamp
        if r.headers:
            kw["headers"] = list(r.headers)
        producer.produce(topic, **kw)
        producer.poll(0)
    left = producer.flush(40)
    if fatal:
        raise KafkaException(f"fatal producer error: {fatal}")
    if left:
        raise AssertionError(f"confluent-kafka: {left} records not delivered in time; errors: {errors}")
    bad = [r for r in results if not isinstance(r, tuple)]
    if bad:
        raise KafkaException(bad[0])
    return Produced(list(results))


async def _produce_aiokafka(
    bootstrap: str,
    topic: str,
    recs: Sequence[Rec],
    *,
    compression: str,
    acks: str,
    idempotent: bool | None,
    config: dict[str, Any],
) -> Produced:
    from aiokafka import AIOKafkaProducer

    kw: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "acks": "all" if acks == "all" else int(acks),
        "compression_type": None if compression == "none" else compression,
        "request_timeout_ms": 20000,
        "linger_ms": 5,
    }
    if idempotent is not None:
        kw["enable_idempotence"] = idempotent
    kw.update(config)
    producer = AIOKafkaProducer(**kw)
    await asyncio.wait_for(producer.start(), 30)
    try:
        futs = [
            await producer.send(
                topic,
                value=r.value,
                key=r.key,
                partition=r.partition,
                timestamp_ms=r.timestamp,
                headers=list(r.headers) or None,
            )
            for r in recs
        ]
        metas = await asyncio.wait_for(asyncio.gather(*futs), 40)
    finally:
        await asyncio.wait_for(producer.stop(), 20)
    # acks=0 resolves to None: the broker sends no answer, so there is no offset to report.
    return Produced(
        [(m.partition, m.offset) if m is not None else (r.partition or -1, None) for m, r in zip(metas, recs)]
    )


def _produce_kcat(
    bootstrap: str,
    topic: str,
    recs: Sequence[Rec],
    *,
    compression: str,
    acks: str,
    idempotent: bool | None,
    config: dict[str, Any],
) -> Produced:
    """kcat sends lines; one invocation per run of records sharing partition and headers."""
    positions: list[tuple[int, int | None]] = []
    i = 0
    while i < len(recs):
        j = i
        while j < len(recs) and (recs[j].partition, recs[j].headers) == (recs[i].partition, recs[i].headers):
            j += 1
        group = recs[i:j]
        lines = []
        for r in group:
            if r.timestamp is not None:
                raise ValueError("kcat cannot set record timestamps")
            if r.value is None or b"\n" in r.value or b"\t" in r.value or (r.key and b"\t" in r.key):
                raise ValueError("kcat records must be single-line text")
            lines.append(r.value if r.key is None else r.key + b"\t" + r.value)
        cmd = [
            "kcat",
            "-b",
            bootstrap,
            "-P",
            "-t",
            topic,
            "-K",
            "\t",
            "-z",
            compression,
            "-X",
            f"acks={-1 if acks == 'all' else acks}",
            "-m",
            "20",
        ]
        if idempotent:
            cmd += ["-X", "enable.idempotence=true"]
        for k, v in config.items():
            cmd += ["-X", f"{k}={v}"]
        if group[0].partition is not None:
            cmd += ["-p", str(group[0].partition)]
        for hk, hv in group[0].headers:
            cmd += ["-H", f"{hk}={hv.decode()}"]
        run_cmd(cmd, input_bytes=b"".join(line + b"\n" for line in lines))
        positions += [(r.partition if r.partition is not None else -1, None) for r in group]
        i = j
    return Produced(positions)


def _produce_kafkajs(
    bootstrap: str,
    topic: str,
    recs: Sequence[Rec],
    *,
    compression: str,
    acks: str,
    idempotent: bool | None,
    config: dict[str, Any],
) -> Produced:
    msgs = []
    for r in recs:
        m: dict[str, Any] = {
            "key_b64": _b64(r.key),
            "value_b64": _b64(r.value),
            "headers": [[k, _b64(v)] for k, v in r.headers],
        }
        if r.partition is not None:
            m["partition"] = r.partition
        if r.timestamp is not None:
            m["timestamp"] = str(r.timestamp)
        msgs.append(m)
    out = kafkajs(
        "produce",
        {
            "brokers": [bootstrap],
            "topic": topic,
            "messages": msgs,
            "compression": compression,
            "acks": -1 if acks == "all" else int(acks),
            "idempotent": bool(idempotent),
            **config,
        },
    )
    return Produced([(p["partition"], int(p["offset"])) for p in out["positions"]])


# ---------------------------------------------------------------------------------------------
# consuming (without a consumer group, except kafkajs which has no other way)


def consume(
    client: str,
    bootstrap: str,
    topic: str,
    count: int,
    *,
    partitions: Sequence[int] = (0,),
    timeout: float = CONSUME_TIMEOUT_S,
    config: dict[str, Any] | None = None,
) -> list[Rec]:
    """Read ``count`` records from the beginning of ``partitions``; sorted by (partition, offset)."""
    fn = {
        "kafka-python": _consume_kafka_python,
        "confluent-kafka": _consume_confluent,
        "aiokafka": lambda *a, **k: asyncio.run(_consume_aiokafka(*a, **k)),
        "kcat": _consume_kcat,
        "kafkajs": _consume_kafkajs,
    }[client]
    recs = fn(bootstrap, topic, count, partitions=list(partitions), timeout=timeout, config=config or {})
    if len(recs) < count:
        raise AssertionError(f"{client} read {len(recs)} of {count} records from {topic} in {timeout}s")
    return sorted(recs, key=lambda r: (r.partition, r.offset))


def _consume_kafka_python(
    bootstrap: str, topic: str, count: int, *, partitions: list[int], timeout: float, config: dict[str, Any]
) -> list[Rec]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=20000,
        **config,
    )
    try:
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        consumer.seek_to_beginning()
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=500).values():
                out += [
                    Rec(
                        m.value,
                        m.key,
                        _headers(m.headers),
                        m.timestamp,
                        m.partition,
                        m.offset,
                        m.timestamp_type,
                    )
                    for m in msgs
                ]
        return out
    finally:
        consumer.close()


def _consume_confluent(
    bootstrap: str, topic: str, count: int, *, partitions: list[int], timeout: float, config: dict[str, Any]
) -> list[Rec]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": unique("assign-only"),
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        **config,
    }
    consumer = Consumer(conf)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().fatal() or not m.error().retriable():
                    raise KafkaException(m.error())
                continue
            ts_type, ts = m.timestamp()
            out.append(
                Rec(
                    m.value(),
                    m.key(),
                    _headers(m.headers()),
                    ts,
                    m.partition(),
                    m.offset(),
                    ts_type - 1 if ts_type else None,
                )
            )
        return out
    finally:
        consumer.close()


async def _consume_aiokafka(
    bootstrap: str, topic: str, count: int, *, partitions: list[int], timeout: float, config: dict[str, Any]
) -> list[Rec]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **config,
    )
    await asyncio.wait_for(consumer.start(), 30)
    try:
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        await consumer.seek_to_beginning()
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for msgs in (await consumer.getmany(timeout_ms=500)).values():
                out += [
                    Rec(
                        m.value,
                        m.key,
                        _headers(m.headers),
                        m.timestamp,
                        m.partition,
                        m.offset,
                        m.timestamp_type,
                    )
                    for m in msgs
                ]
        return out
    finally:
        await asyncio.wait_for(consumer.stop(), 20)


def parse_kcat_json(lines: Iterable[bytes]) -> list[Rec]:
    out = []
    for line in lines:
        if not line.strip():
            continue
        d = json.loads(line)
        h = d.get("headers") or []
        headers = tuple(
            (h[i], h[i + 1].encode() if h[i + 1] is not None else b"") for i in range(0, len(h), 2)
        )
        out.append(
            Rec(
                None if d.get("payload") is None else d["payload"].encode(),
                None if d.get("key") is None else d["key"].encode(),
                headers,
                d.get("ts"),
                d["partition"],
                d["offset"],
                {"create": 0, "logappend": 1}.get(d.get("tstype")),
            )
        )
    return out


def _consume_kcat(
    bootstrap: str, topic: str, count: int, *, partitions: list[int], timeout: float, config: dict[str, Any]
) -> list[Rec]:
    out: list[Rec] = []
    for p in partitions:
        cmd = [
            "kcat",
            "-b",
            bootstrap,
            "-C",
            "-t",
            topic,
            "-p",
            str(p),
            "-o",
            "beginning",
            "-e",
            "-J",
            "-m",
            "20",
        ]
        for k, v in config.items():
            cmd += ["-X", f"{k}={v}"]
        res = run_cmd(cmd, timeout=timeout)
        out += parse_kcat_json(res.stdout.splitlines())
    return out


def _consume_kafkajs(
    bootstrap: str, topic: str, count: int, *, partitions: list[int], timeout: float, config: dict[str, Any]
) -> list[Rec]:
    out = kafkajs(
        "consume",
        {
            "brokers": [bootstrap],
            "topic": topic,
            "groupId": unique("kafkajs-read"),
            "count": count,
            "timeoutMs": int(timeout * 1000),
            **config,
        },
        timeout=timeout + 30,
    )
    recs = [kafkajs_rec(m) for m in out["messages"]]
    return [r for r in recs if r.partition in partitions]


def kafkajs_rec(m: dict[str, Any]) -> Rec:
    return Rec(
        _unb64(m["value_b64"]),
        _unb64(m["key_b64"]),
        tuple((k, _unb64(v) or b"") for k, v in m["headers"]),
        int(m["timestamp"]),
        m["partition"],
        int(m["offset"]),
    )


# ---------------------------------------------------------------------------------------------
# topics


def create_topic(
    bootstrap: str, topic: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> None:
    """Create a topic with kafka-python's admin client and wait until it has leaders."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics(
            {topic: {"num_partitions": partitions, "replication_factor": 1, "configs": dict(configs or {})}},
            wait_for_metadata=True,
        )
    finally:
        admin.close()


def end_offsets(bootstrap: str, topic: str, partitions: Sequence[int]) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, request_timeout_ms=20000)
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        return {tp.partition: off for tp, off in c.end_offsets(tps).items()}
    finally:
        c.close()


def strip_positions(recs: Iterable[Rec]) -> list[Rec]:
    return [replace(r, offset=None, timestamp_type=None) for r in recs]
