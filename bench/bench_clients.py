"""Kafka client throughput and latency against pylog and Tansu, side by side in one run.

A confluent-kafka (librdkafka) producer writes N records to a fresh topic, then a consumer reads
them back (partition assignment, no group), on each broker in turn. Every row also reports the
broker's CPU seconds per million records (from /proc/PID/stat) and, at the end, its resident
memory (VmRSS / VmHWM from /proc/PID/status). The latency rows send at a fixed rate and measure
end-to-end time (produce call to consumer delivery) as p50 / p99 / p99.9.

    python bench/bench_clients.py                      # default rows (~10-20 s each per broker)
    python bench/bench_clients.py --records 50000      # quicker
    python bench/bench_clients.py --matrix             # sizes x acks x codecs x partitions
    python bench/bench_clients.py --brokers pylog      # one broker only
    python bench/bench_clients.py --only lz4           # only the rows whose label holds "lz4"
    python bench/bench_clients.py --brokers pylog,pylog-metrics   # metrics off vs on and scraped

``pylog-metrics`` is pylog with its metrics listener on (``pylog.metrics.listeners``) and a scraper
reading ``/metrics`` every second during the run; its rows also give the scrape's time and size.

The ratio column is pylog / tansu: above 1 is better for rates, below 1 is better for CPU,
memory and latency.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import statistics
import sys
import time
import uuid
from array import array
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from common import BenchBroker, create_topic

from pylog.local import free_port

DEFAULT_RECORDS = 2_000_000


@dataclass(frozen=True)
class Scenario:
    size: int
    acks: str = "1"
    compression: str = "none"
    partitions: int = 1

    @property
    def label(self) -> str:
        size = f"{self.size} B" if self.size < 1000 else f"{self.size // 1000} KB"
        return f"{size}, acks={self.acks}, {self.compression}, {self.partitions}p"


@dataclass
class Row:
    label: str
    metric: str
    values: dict[str, float | None] = field(default_factory=dict)
    higher_is_better: bool = True
    samples: dict[str, list[float | None]] = field(default_factory=dict)


def payload(size: int, i: int) -> bytes:
    # A 32-byte unit (text and a varying counter) repeated to the size: compressible, as logs are.
    return ((b"pylog bench record %012d " % i) * (size // 32 + 1))[:size]


def produce(bootstrap: str, topic: str, sc: Scenario, n: int, config: dict[str, Any] | None = None) -> float:
    """Seconds to send n records and receive every acknowledgement (``config`` overrides the
    producer's settings)."""
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all" if sc.acks == "all" else sc.acks,
            "compression.type": sc.compression,
            "linger.ms": 5,
            "queue.buffering.max.messages": 500_000,
            "enable.idempotence": False,
            **(config or {}),
        }
    )
    failures = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(err)

    values = [payload(sc.size, i) for i in range(1024)]
    start = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, values[i & 1023], partition=i % sc.partitions, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.005)
        if i & 1023 == 0:
            p.poll(0)
    left = p.flush(300)
    elapsed = time.perf_counter() - start
    if left or failures:
        raise RuntimeError(f"produce: {left} unacknowledged, {len(failures)} failed ({failures[:1]})")
    return elapsed


def consume(bootstrap: str, topic: str, sc: Scenario, n: int) -> float:
    """Seconds to read n records from the beginning of every partition."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-" + uuid.uuid4().hex,
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            # A response holding more than queued.max.messages.kbytes (64 MB) of records pauses
            # fetching for this long; at the default (1 s) the row would time the client's timer.
            "fetch.queue.backoff.ms": 5,
        }
    )
    try:
        got = 0
        start = time.perf_counter()
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(sc.partitions)])
        deadline = start + 300
        while got < n:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"consume: {got} of {n} records in 300 s")
            # consume() waits for the full count or the timeout: never ask for more than is left.
            for m in c.consume(num_messages=min(10_000, n - got), timeout=1.0):
                if m.error() is None:
                    got += 1
        return time.perf_counter() - start
    finally:
        c.close()


def _latency_reader(bootstrap: str, topic: str, total: int, seconds: float, conn: Any) -> None:
    """Consumer side of the latency row, in its own process (no GIL shared with the sender)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-lat-" + uuid.uuid4().hex,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    c.poll(0.5)
    conn.send("ready")
    samples = array("d")
    deadline = time.monotonic() + seconds + 60
    while len(samples) < total and time.monotonic() < deadline:
        m = c.poll(0.05)  # one at a time: a batch call would hold records back until it fills
        if m is not None and m.error() is None:
            samples.append((time.time_ns() - int.from_bytes(m.value()[:8], "big")) / 1e6)
    c.close()
    conn.send_bytes(samples.tobytes())


def latency(
    bootstrap: str, topic: str, rate: int, seconds: float, size: int, acks: str = "1", linger_ms: float = 0
) -> tuple[list[float], float]:
    """End-to-end milliseconds (send call to consumer delivery, Kafka's EndToEndLatency measure) of
    records sent on a fixed schedule, and the send rate achieved. The producer is handed each
    record as soon as it is due (linger.ms=0 and acks=1 unless asked) with at most 5 requests in
    flight per connection (the Java client's default; librdkafka's default of a million sends one
    request per record however far behind the broker is, which measures the client's queue instead
    of the broker); the consumer runs in a separate process so neither waits on the other's GIL."""
    from confluent_kafka import Producer

    total = int(rate * seconds)
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    reader = ctx.Process(target=_latency_reader, args=(bootstrap, topic, total, seconds, child), daemon=True)
    reader.start()
    try:
        if not parent.poll(60):
            raise RuntimeError("latency consumer did not start")
        parent.recv()
        p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": acks,
                "linger.ms": linger_ms,
                "max.in.flight.requests.per.connection": 5,
                "enable.idempotence": False,
            }
        )
        filler = b"x" * max(0, size - 8)
        start = time.perf_counter()
        for i in range(total):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)  # late sends are not skipped: the schedule stays absolute
            p.produce(topic, time.time_ns().to_bytes(8, "big") + filler, partition=0)
            p.poll(0)
        sent_rate = total / (time.perf_counter() - start)
        p.flush(60)
        if not parent.poll(seconds + 90):
            raise RuntimeError("latency consumer did not finish")
        samples = array("d")
        samples.frombytes(parent.recv_bytes())
        return samples.tolist(), sent_rate
    finally:
        reader.join(10)
        if reader.is_alive():
            reader.kill()


def quantile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def scenarios(matrix: bool) -> list[Scenario]:
    if matrix:
        return [
            Scenario(size, acks, codec, parts)
            for size, acks, codec, parts in itertools.product(
                (100, 1000), ("1", "all"), ("none", "lz4"), (1, 6)
            )
        ]
    # The two base rows, then one factor changed at a time from the 1 KB row.
    return [
        Scenario(100),
        Scenario(1000),
        Scenario(1000, acks="all"),
        Scenario(1000, compression="lz4"),
        Scenario(1000, partitions=4),
        Scenario(1000, partitions=6),
    ]


def loopback_seconds(nbytes: int, chunk: int = 1 << 20) -> float:
    """Seconds to move ``nbytes`` over one 127.0.0.1 TCP connection (a sender thread, a receiver
    reading into one buffer): the most any broker could deliver to one consumer here."""
    import socket
    import threading

    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    got = [0]

    def receive() -> None:
        conn, _ = srv.accept()
        buf = bytearray(chunk)
        with conn:
            while got[0] < nbytes:
                n = conn.recv_into(buf)
                if not n:
                    break
                got[0] += n

    t = threading.Thread(target=receive)
    t.start()
    data = b"x" * chunk
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as s:
        left = nbytes
        while left > 0:
            s.sendall(data if left >= chunk else data[:left])
            left -= chunk
        t.join()
    elapsed = time.perf_counter() - start
    srv.close()
    return elapsed


def raw_fetch(bootstrap: str, topic: str, n: int, partition_max_bytes: int = 1 << 20) -> float:
    """Seconds to read offsets [0, n) of partition 0 with plain Fetch v11 requests (one in flight,
    the Java consumer's defaults: 1 MiB per partition, 50 MiB per fetch), walking only batch
    headers: a client that costs little per record, so the broker and the socket are what is timed."""
    import socket
    import struct

    host, port = bootstrap.rsplit(":", 1)
    name = topic.encode()
    head = struct.Struct(">hhih")
    part = struct.Struct(">iiqqi")
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray(64 << 20)
    view = memoryview(buf)

    def recv_exact(k: int) -> memoryview:
        got = 0
        while got < k:
            r = sock.recv_into(view[got:k])
            if not r:
                raise RuntimeError("connection closed")
            got += r
        return view[:k]

    offset, correlation = 0, 0
    start = time.perf_counter()
    deadline = start + 300
    try:
        while offset < n:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"raw fetch: offset {offset} of {n} in 300 s")
            correlation += 1
            body = (
                head.pack(1, 11, correlation, 5)
                + b"bench"
                + struct.pack(">iiiibiii", -1, 500, 1, 50 << 20, 0, 0, -1, 1)
                + struct.pack(">h", len(name))
                + name
                + struct.pack(">i", 1)
                + part.pack(0, -1, offset, -1, partition_max_bytes)
                + struct.pack(">ih", 0, 0)
            )
            sock.sendall(struct.pack(">i", len(body)) + body)
            size = struct.unpack(">i", recv_exact(4))[0]
            resp = recv_exact(size)
            # correlation, throttle, error, session, topics(1), name, partitions(1), partition data
            pos = 4 + 4 + 2 + 4 + 4
            pos += 2 + struct.unpack_from(">h", resp, pos)[0] + 4
            _, err, _hw, _lso, _ls = struct.unpack_from(">ihqqq", resp, pos)
            if err:
                raise RuntimeError(f"raw fetch: error {err} at offset {offset}")
            pos += 30
            aborted = struct.unpack_from(">i", resp, pos)[0]
            pos += 4 + 16 * max(aborted, 0) + 4
            nbytes = struct.unpack_from(">i", resp, pos)[0]
            pos += 4
            end = pos + max(nbytes, 0)
            while pos + 61 <= end:  # whole batches only: a trailing partial one is read again
                base, length = struct.unpack_from(">qi", resp, pos)
                if pos + 12 + length > end:
                    break
                offset = base + struct.unpack_from(">i", resp, pos + 23)[0] + 1
                pos += 12 + length
        return time.perf_counter() - start
    finally:
        sock.close()


def wait_sealed(data_dir: Path, topic: str, timeout: float = 120) -> None:
    """Wait until every rolled segment of ``topic`` is sealed (only the active stream left)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(len(list(d.glob("*.arrows"))) <= 1 for d in data_dir.glob(f"{topic}-*")):
            return
        time.sleep(0.2)
    raise RuntimeError(f"segments of {topic} not sealed in {timeout} s")


CATCHUP_SEGMENT_BYTES = 64 * 1024 * 1024


def catch_up_row(
    args: argparse.Namespace,
    brokers: dict[str, BenchBroker],
    record: Callable[..., None],
    guarded: Callable[..., Any],
) -> None:
    """1 KB records read back from the beginning of history whose wire cache is cold: pylog is
    restarted after the produce (Tansu keeps its log in memory and has no such state, so it is read
    as it is), with 64 MiB segments so that history is in sealed segments as a long-lived topic's
    is. Beside it, the loopback limit: the same bytes over one 127.0.0.1 socket."""
    sc = Scenario(1000)
    n = args.catchup_records or records_for(sc, args.records)
    label = f"catch-up consume {sc.label}, cold cache"
    mb = n * sc.size / 1e6
    took: dict[str, float | None] = {}
    for kind, b in brokers.items():
        topic = f"bench-cu-{uuid.uuid4().hex[:8]}"
        print(f"[{kind}] {label}: {n} records", file=sys.stderr)
        config = {"segment.bytes": str(CATCHUP_SEGMENT_BYTES)} if b.kind == "pylog" else {}
        guarded(kind, "create topic", create_topic, b.bootstrap, topic, 1, config)
        secs = guarded(kind, "produce", produce, b.bootstrap, topic, sc, n)
        if secs and b.kind == "pylog":
            guarded(kind, "seal", wait_sealed, b.tmp / "data", topic)
            guarded(kind, "restart", b.restart)
        cpu1 = b.stats().cpu_s
        csecs = guarded(kind, "consume", consume, b.bootstrap, topic, sc, n) if secs else None
        cpu2 = b.stats().cpu_s
        record(label, "records/s (confluent-kafka)", kind, n / csecs if csecs else None)
        record(label, "MB/s (confluent-kafka)", kind, mb / csecs if csecs else None)
        record(
            label,
            "broker CPU s / M records (confluent-kafka)",
            kind,
            (cpu2 - cpu1) / n * 1e6 if csecs else None,
            False,
        )
        if secs and b.kind == "pylog":
            guarded(kind, "restart", b.restart)  # cold again for the second reader
        cpu3 = b.stats().cpu_s
        rsecs = guarded(kind, "raw fetch", raw_fetch, b.bootstrap, topic, n) if secs else None
        cpu4 = b.stats().cpu_s
        took[kind] = rsecs
        record(label, "MB/s (plain Fetch client)", kind, mb / rsecs if rsecs else None)
        record(
            label,
            "broker CPU s / M records (plain Fetch client)",
            kind,
            (cpu4 - cpu3) / n * 1e6 if rsecs else None,
            False,
        )
        guarded(kind, "delete topic", delete_topic, b.bootstrap, topic)
    loop = loopback_seconds(n * sc.size)
    for kind in brokers:
        record(label, "MB/s loopback limit (same bytes)", kind, mb / loop)
        rsecs = took.get(kind)
        record(
            label, "fraction of loopback limit (plain Fetch client)", kind, loop / rsecs if rsecs else None
        )


def records_for(sc: Scenario, base: int) -> int:
    # 1 KB rows move ten times the bytes of 100 B rows; fewer records keep the row time similar.
    return base if sc.size < 1000 else max(1000, base // 2)


def delete_topic(bootstrap: str, topic: str) -> None:
    """Free the row's data (Tansu keeps it in memory, pylog on disk) before the next row."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.delete_topics([topic], operation_timeout=30)[topic].result(60)


METRICS_KIND = "pylog-metrics"
"""pylog with pylog.metrics.listeners on, scraped every ``Scraper.interval_s`` during the run."""


class Scraper:
    """Reads a node's /metrics every ``interval_s`` as Prometheus would; keeps times and sizes."""

    def __init__(self, url: str, interval_s: float = 1.0) -> None:
        import threading

        self.url, self.interval_s = url, interval_s
        self.times_ms: list[float] = []
        self.sizes: list[int] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Scraper:
        self._thread.start()
        return self

    def _run(self) -> None:
        import urllib.request

        while not self._stop.wait(self.interval_s):
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=10) as r:
                    size = len(r.read())
            except OSError:
                self.failures += 1
                continue
            self.times_ms.append((time.perf_counter() - started) * 1000)
            self.sizes.append(size)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)


def start_broker(kind: str, pylog_config: dict[str, str], scrapers: dict[str, Scraper]) -> BenchBroker:
    if kind != METRICS_KIND:
        return BenchBroker(kind, config=pylog_config if kind == "pylog" else None).start()
    listener = f"http://127.0.0.1:{free_port()}"
    b = BenchBroker("pylog", config={**pylog_config, "pylog.metrics.listeners": listener}).start()
    scrapers[kind] = Scraper(listener + "/metrics").start()
    return b


def run(args: argparse.Namespace) -> list[Row]:
    pylog_config = dict(kv.split("=", 1) for kv in args.pylog_config)
    scrapers: dict[str, Scraper] = {}
    brokers = {kind: start_broker(kind, pylog_config, scrapers) for kind in args.brokers}
    rows: list[Row] = []

    def record(label: str, metric: str, kind: str, value: float | None, higher: bool = True) -> None:
        # Each repetition adds a sample; the row shows their median (None if any run failed).
        for r in rows:
            if r.label == label and r.metric == metric:
                break
        else:
            r = Row(label, metric, {}, higher)
            rows.append(r)
        r.samples.setdefault(kind, []).append(value)
        got = r.samples[kind]
        r.values[kind] = None if any(v is None for v in got) else statistics.median(got)  # type: ignore[type-var]

    def guarded(kind: str, what: str, fn: Callable[..., Any], *fn_args: Any) -> Any:
        try:
            return fn(*fn_args)
        except Exception as exc:  # a peer missing a feature must not end the run
            print(f"  {kind}: {what} failed: {exc}", file=sys.stderr)
            return None

    try:
        chosen = [
            sc for sc in scenarios(args.matrix) if not args.only or any(o in sc.label for o in args.only)
        ]
        for sc, _rep in itertools.product(chosen, range(args.repeat)):
            n = records_for(sc, args.records)
            mb = n * sc.size / 1e6
            for kind, b in brokers.items():
                topic = f"bench-{uuid.uuid4().hex[:8]}"
                print(f"[{kind}] {sc.label}: {n} records", file=sys.stderr)
                guarded(kind, "create topic", create_topic, b.bootstrap, topic, sc.partitions)
                cpu0 = b.stats().cpu_s
                secs = guarded(kind, "produce", produce, b.bootstrap, topic, sc, n)
                cpu1 = b.stats().cpu_s
                label = f"produce {sc.label}"
                record(label, "records/s", kind, n / secs if secs else None)
                record(label, "MB/s", kind, mb / secs if secs else None)
                record(
                    label, "broker CPU s / M records", kind, (cpu1 - cpu0) / n * 1e6 if secs else None, False
                )
                csecs = guarded(kind, "consume", consume, b.bootstrap, topic, sc, n) if secs else None
                cpu2 = b.stats().cpu_s
                label = f"consume {sc.label}"
                record(label, "records/s", kind, n / csecs if csecs else None)
                record(label, "MB/s", kind, mb / csecs if csecs else None)
                record(
                    label, "broker CPU s / M records", kind, (cpu2 - cpu1) / n * 1e6 if csecs else None, False
                )
                guarded(kind, "delete topic", delete_topic, b.bootstrap, topic)

        if args.catchup:
            for _rep in range(args.repeat):
                catch_up_row(args, brokers, record, guarded)

        if args.latency_rate > 0:
            label = f"end-to-end latency, {args.latency_rate}/s x {args.latency_seconds:g} s, 100 B"
            for _rep, (kind, b) in itertools.product(range(args.repeat), brokers.items()):
                topic = f"bench-lat-{uuid.uuid4().hex[:8]}"
                print(f"[{kind}] {label}", file=sys.stderr)
                guarded(kind, "create topic", create_topic, b.bootstrap, topic, 1)
                got = guarded(
                    kind, "latency", latency, b.bootstrap, topic, args.latency_rate, args.latency_seconds, 100
                )
                samples, sent_rate = got if got else ([], None)
                s = sorted(samples)
                record(label, "records/s sent", kind, sent_rate)
                for name, q in (("p50 ms", 0.5), ("p99 ms", 0.99), ("p99.9 ms", 0.999)):
                    record(label, name, kind, quantile(s, q) if s else None, False)
                record(label, "mean ms", kind, statistics.fmean(s) if s else None, False)

        for kind, b in brokers.items():
            st = b.stats()
            record("broker memory at the end", "RSS MB", kind, st.rss_mb, False)
            record("broker memory at the end", "peak RSS MB", kind, st.hwm_mb, False)
            record("broker memory at the end", "RSS anonymous MB", kind, st.anon_mb, False)
            record("broker memory at the end", "RSS file-backed MB", kind, st.file_mb, False)
        for kind, scraper in scrapers.items():
            scraper.stop()
            label = f"/metrics scraped every {scraper.interval_s:g} s"
            t = sorted(scraper.times_ms)
            record(label, "scrapes", kind, len(t) + scraper.failures)
            record(label, "failed scrapes", kind, scraper.failures, False)
            record(label, "scrape p50 ms", kind, quantile(t, 0.5) if t else None, False)
            record(label, "scrape max ms", kind, t[-1] if t else None, False)
            record(label, "scrape KB", kind, scraper.sizes[-1] / 1000 if scraper.sizes else None, False)
    finally:
        for scraper in scrapers.values():
            scraper.stop()
        for b in brokers.values():
            b.stop()
    return rows


def fmt(v: float | None) -> str:
    if v is None:
        return "error"
    if v != v:  # NaN
        return "-"
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


def table(rows: list[Row], kinds: list[str]) -> str:
    header = ["row", "metric", *kinds]
    ratio = {("pylog", "tansu"): "pylog/tansu", ("pylog", METRICS_KIND): "metrics on/off"}.get(tuple(kinds))
    if ratio is not None:
        header.append(ratio)
    lines = []
    for r in rows:
        cells = [r.label, r.metric, *(fmt(r.values.get(k)) for k in kinds)]
        if ratio is not None:  # pylog / tansu, metrics on / off
            top, bottom = (kinds[0], kinds[1]) if ratio == "pylog/tansu" else (kinds[1], kinds[0])
            a, b = r.values.get(top), r.values.get(bottom)
            cells.append(f"{a / b:.2f}" if a is not None and b else "-")
        lines.append(cells)
    widths = [max(len(str(x)) for x in col) for col in zip(header, *lines)]
    out = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |"]
    out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for cells in lines:
        out.append(
            "| "
            + " | ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
            + " |"
        )
    return "\n".join(out)


def parser() -> argparse.ArgumentParser:
    """The command line of this benchmark (bench_throughput.py builds its runs from it too)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--records", type=int, default=DEFAULT_RECORDS, help="records per 100 B row (1 KB rows: half)"
    )
    ap.add_argument("--brokers", default="pylog,tansu", type=lambda s: [x for x in s.split(",") if x])
    ap.add_argument(
        "--matrix", action="store_true", help="every combination of size, acks, codec, partitions"
    )
    ap.add_argument(
        "--latency-rate", type=int, default=10_000, help="records/s for the latency row (0: skip)"
    )
    ap.add_argument("--latency-seconds", type=float, default=10.0)
    ap.add_argument(
        "--repeat", type=int, default=1, help="run every row this many times, brokers alternating; medians"
    )
    ap.add_argument(
        "--only", action="append", default=[], help="run only rows whose label contains this (repeatable)"
    )
    ap.add_argument(
        "--catchup",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the catch-up row: 1 KB history read with pylog's wire cache cold, against loopback",
    )
    ap.add_argument(
        "--catchup-records", type=int, default=0, help="records of the catch-up row (default: 1 KB rows')"
    )
    ap.add_argument(
        "--pylog-config", action="append", default=[], metavar="KEY=VALUE",
        help="a broker setting for pylog (repeatable), e.g. pylog.segment.compression=none"
    )
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    return ap


def main() -> None:
    args = parser().parse_args()
    rows = run(args)
    print(table(rows, args.brokers))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2))


if __name__ == "__main__":
    main()
