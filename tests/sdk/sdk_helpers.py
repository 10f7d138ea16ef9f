"""Shared by tests/sdk and tests/spark: partition logs written through pylog.storage, and a real
``pylog broker`` subprocess."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pytest
from pylog.protocol.records import control
from pylog.storage import RECORD_SCHEMA, BatchMeta, PartitionLog

from pylog.local import LocalBroker

T0 = 1_700_000_000_000
HEADERS = RECORD_SCHEMA.field("headers").type


def rows(start: int, n: int, *, ts: int = T0, key_prefix: str = "k", headers: bool = False) -> pa.RecordBatch:
    """n records with offsets i = start.., keys k<i>, values v<i>, timestamps ts + i."""
    ids = range(start, start + n)
    hdrs = [[{"key": "h", "value": f"x{i}".encode()}] if headers and i % 2 else [] for i in ids]
    return pa.RecordBatch.from_arrays(
        [
            pa.array(ids, pa.int64()),
            pa.array([ts + i for i in ids], pa.timestamp("ms")),
            pa.array([f"{key_prefix}{i}".encode() for i in ids], pa.binary()),
            pa.array([f"v{i}".encode() for i in ids], pa.binary()),
            pa.array(hdrs, HEADERS),
        ],
        schema=RECORD_SCHEMA,
    )


class LogWriter:
    """Appends Kafka-like batches to `<data_dir>/<topic>-<partition>` as a broker would."""

    def __init__(self, data_dir: Path, topic: str, partition: int = 0, **config: object) -> None:
        from pylog.storage import LogConfig

        # format 1 unless asked: Arrow rows without a Kafka codec cannot be written in format 2
        config = {"segment_format": 1, **config}
        self.log = PartitionLog.open(data_dir / f"{topic}-{partition}", LogConfig(**config), now_ms=T0)

    @property
    def end(self) -> int:
        return self.log.log_end_offset

    def append(self, n: int, *, ts: int = T0, producer_id: int = -1, transactional: bool = False,
               attributes: int = 0, headers: bool = False) -> tuple[int, int]:
        """Append n records; returns their [first, end) offsets."""
        start = self.end
        batch = rows(start, n, ts=ts, headers=headers)
        attrs = attributes | (0x10 if transactional else 0)
        meta = BatchMeta(base_offset=start, last_offset_delta=n - 1, record_count=n,
                         base_timestamp=ts + start, max_timestamp=ts + start + n - 1,
                         producer_id=producer_id, producer_epoch=0,
                         base_sequence=0 if producer_id >= 0 else -1, attributes=attrs)
        self.log.append(batch, meta, now_ms=ts + start)
        return start, self.end

    def marker(self, producer_id: int, *, commit: bool) -> int:
        """A transaction marker (a control batch holding one record); returns its offset."""
        offset = self.end
        ctype = control.ControlType.COMMIT if commit else control.ControlType.ABORT
        batch = pa.RecordBatch.from_arrays(
            [pa.array([offset], pa.int64()), pa.array([T0 + offset], pa.timestamp("ms")),
             pa.array([control.control_key(ctype)], pa.binary()),
             pa.array([control.marker_value(0)], pa.binary()), pa.array([[]], HEADERS)],
            schema=RECORD_SCHEMA)
        meta = BatchMeta(base_offset=offset, last_offset_delta=0, record_count=1, base_timestamp=T0 + offset,
                         max_timestamp=T0 + offset, producer_id=producer_id, producer_epoch=0,
                         attributes=0x10 | 0x20)
        self.log.append(batch, meta, now_ms=T0)
        return offset

    def close(self) -> None:
        self.log.close()


def write_topic_dir(data_dir: Path, topic: str, counts: Sequence[int], *, batch: int = 100,
                    headers: bool = False) -> None:
    """A topic with counts[p] records in partition p, in batches of `batch`."""
    for p, total in enumerate(counts):
        w = LogWriter(data_dir, topic, p)
        done = 0
        while done < total:
            n = min(batch, total - done)
            w.append(n, headers=headers)
            done += n
        w.close()


# -- a real broker process ----------------------------------------------------------------------

_LISTEN = re.compile(r"listening on (?P<host>[0-9A-Za-z.\-\[\]:]+?):(?P<port>\d+)\b")
_LISTENER = re.compile(r"pylog listener (?P<name>\w+) on (?P<host>[\d.]+):(?P<port>\d+)")


class Broker:
    """``pylog broker --data-dir DIR --listen 127.0.0.1:0`` from this interpreter."""

    def __init__(self, data_dir: Path, log_path: Path, config: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        self.listeners: dict[str, str] = {}  # listeners beyond the first: name -> host:port
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        cmd = [sys.executable, "-m", "pylog", "broker", "--data-dir", str(data_dir),
               "--listen", "127.0.0.1:0"]
        for k, v in (config or {}).items():
            cmd += ["--config", f"{k}={v}"]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self._log, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.bootstrap = self._wait_listening(log_path)

    def _wait_listening(self, log_path: Path, timeout_s: float = 60.0) -> str:
        assert self.proc.stdout is not None
        found: list[str] = []

        def scan() -> None:
            assert self.proc.stdout is not None
            for raw in self.proc.stdout:
                line = raw.decode(errors="replace")
                self._log.write(raw)
                extra = _LISTENER.search(line)
                if extra:
                    self.listeners[extra.group("name")] = f"{extra.group('host')}:{extra.group('port')}"
                m = _LISTEN.search(line)
                if m and not found:
                    found.append(f"{m.group('host')}:{m.group('port')}")
            self._log.flush()

        threading.Thread(target=scan, daemon=True).start()
        deadline = time.monotonic() + timeout_s
        while not found:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"pylog broker did not start; log: {log_path.read_text()[-3000:]}")
            time.sleep(0.05)
        return found[0]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def secured_broker(root: Path) -> tuple[Broker, dict[str, str]]:
    """A broker with a PLAINTEXT listener (ANONYMOUS, a super user) and a SASL_SSL one (a CA and a
    certificate made here, SCRAM-SHA-256 user alice created before the first start, the standard
    authorizer, alice allowed everything on topics starting with 'sec-' and on every group).
    Returns the broker and alice's client settings for SASL_SSL (with its bootstrap address)."""
    import trustme

    root.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    server = ca.issue_cert("127.0.0.1", "localhost")
    server.private_key_and_cert_chain_pem.write_to_path(str(root / "server.pem"))
    subprocess.run([sys.executable, "-m", "pylog", "storage", "format", "--data-dir", str(root / "data"),
                    "--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]"], check=True,
                   capture_output=True, timeout=60)
    broker = Broker(root / "data", root / "broker.log", {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(root / "server.pem"),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
    })
    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourceType,
    )

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="sdk-tests")
    try:
        admin.create_acls([
            ACL("User:alice", "*", ACLOperation.ALL, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.TOPIC, "sec-", ACLResourcePatternType.PREFIXED)),
            ACL("User:alice", "*", ACLOperation.ALL, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.GROUP, "*", ACLResourcePatternType.LITERAL)),
        ])
    finally:
        admin.close()
    settings = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
                "sasl.password": "alice-secret", "ssl.ca.location": str(root / "ca.pem"),
                "bootstrap": broker.listeners["SASL_SSL"]}
    return broker, settings


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="sdk-tests")
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def running_broker(config: Mapping[str, object]) -> Iterator[LocalBroker]:
    """A started ``pylog.LocalBroker`` with ``config``, closed after (a module fixture's body);
    a broker that cannot start fails the test with its reason."""
    b = LocalBroker(config=dict(config))
    try:
        b.start()
    except Exception as exc:
        b.close()
        pytest.fail(f"cannot start a pylog broker: {exc}")
    yield b
    b.close()
