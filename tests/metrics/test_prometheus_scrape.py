"""A real Prometheus server scrapes a 3-node cluster every second while real clients produce and
consume: its HTTP API answers what the clients did, an under-replicated partition while a follower
is stopped (and none once it runs again), a group's lag growing while the group is stopped; the
alert rules and the dashboard's queries run against those series; a node still answers its scrape
while another is killed. Needs Debian's prometheus package (``make prometheus``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import pylog
from pylog.local import free_port

MONITORING = Path(pylog.__file__).parent / "metrics" / "monitoring"
TOPIC, GROUP = "orders", "billing"
SPREAD, AUDIT = "spread", "audit"  # one replica per partition, on every node: led elsewhere


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: run `make prometheus` (Debian's prometheus package)")
    return path


class Prometheus:
    """A prometheus process on 127.0.0.1 scraping ``targets`` every second."""

    def __init__(self, home: Path, targets: list[str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = home / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
            f"rule_files: [{json.dumps(str(MONITORING / 'alerts.yml'))}]\n"
            "scrape_configs:\n  - job_name: pylog\n    static_configs:\n"
            f"      - targets: {json.dumps(targets)}\n"
        )
        self.log = home / "prometheus.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [_tool("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={home / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=log, stderr=subprocess.STDOUT,
            )
        self.wait_for(lambda: self._ready(), "prometheus to be ready", 30)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            assert self.process.poll() is None, self.log.read_text()
            return False

    def api(self, path: str, **params: str) -> dict:
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as e:
            body = json.loads(e.read())
        assert body["status"] == "success", f"{params}: {body}"
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        return self.api("query", query=expr)["result"]

    def scalar(self, expr: str) -> float | None:
        """The value of a one-sample query (None when it has no sample)."""
        result = self.query(expr)
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def wait_for(self, check: Callable[[], object], what: str, timeout_s: float = 45) -> None:
        deadline = time.monotonic() + timeout_s
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout_s}s for {what}")
            time.sleep(0.5)

    def wait_value(
        self, expr: str, want: Callable[[float | None], bool], what: str, timeout_s: float = 45
    ) -> None:
        seen: list[float | None] = []

        def check() -> bool:
            seen.append(self.scalar(expr))
            return want(seen[-1])

        try:
            self.wait_for(check, what, timeout_s)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {expr} was {seen[-5:]}") from None

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[pylog.LocalCluster]:
    config = {
        "replica.lag.time.max.ms": "2000",  # a stopped follower leaves the ISR in seconds
        "num.partitions": "3",
        "default.replication.factor": "3",
    }
    with pylog.LocalCluster(3, data_dir=tmp_path / "cluster", config=config) as c:
        yield c


@pytest.fixture
def prometheus(tmp_path: Path, cluster: pylog.LocalCluster) -> Iterator[Prometheus]:
    targets = [u.removeprefix("http://") for u in cluster.metrics_urls]
    assert len(targets) == 3
    prom = Prometheus(tmp_path, targets)
    try:
        yield prom
    finally:
        prom.stop()


def _produce(bootstrap: str, n: int, start: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(start, start + n):
        p.produce(TOPIC, key=b"k%d" % i, value=b"order %d" % i)
    assert p.flush(30) == 0


def _consume_all(bootstrap: str, n: int) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([TOPIC])
    got, deadline = 0, time.monotonic() + 60
    while got < n:
        assert time.monotonic() < deadline, f"consumed {got} of {n}"
        m = c.poll(1)
        if m is not None and m.error() is None:
            got += 1
    c.commit(asynchronous=False)
    c.close()


def _commit_behind_on_every_node(bootstrap: str) -> dict[str, float]:
    """Six single-replica partitions led by all three nodes, 10, 20, ... 60 records in them, a
    group committed at 0, 1, ... 5: {partition: expected lag}."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(SPREAD, num_partitions=6, replication_factor=1)])[SPREAD].result(30)
    leaders = {p.leader for p in admin.list_topics(SPREAD, timeout=30).topics[SPREAD].partitions.values()}
    assert len(leaders) == 3, leaders
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(6):
        for _ in range(10 * (i + 1)):
            p.produce(SPREAD, value=b"x", partition=i)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": AUDIT, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(SPREAD, i, i) for i in range(6)], asynchronous=False)
    c.close()
    return {str(i): float(10 * (i + 1) - i) for i in range(6)}


def _instance(cluster: pylog.LocalCluster, node_id: int) -> str:
    url = cluster.node(node_id).metrics_url
    assert url is not None
    return url.removeprefix("http://")


def _node_of(cluster: pylog.LocalCluster, instance: str) -> int:
    return next(n.node_id for n in cluster.nodes.values() if n.metrics_url == f"http://{instance}")


def test_prometheus_sees_what_clients_and_failures_do(
    cluster: pylog.LocalCluster, prometheus: Prometheus
) -> None:
    prom, bootstrap = prometheus, cluster.bootstrap_servers
    prom.wait_value('sum(up{job="pylog"})', lambda v: v == 3, "three nodes scraped")

    # what a producer and a group did
    _produce(bootstrap, 3000)
    _consume_all(bootstrap, 3000)
    messages_in = f'sum(kafka_server_brokertopicmetrics_messagesin_total{{topic="{TOPIC}"}})'
    prom.wait_value(messages_in, lambda v: v == 3000, "3000 messages in")
    assert prom.scalar(f'sum(kafka_server_brokertopicmetrics_bytesin_total{{topic="{TOPIC}"}})') > 3000 * 9
    prom.wait_value(f'sum(kafka_server_brokertopicmetrics_bytesout_total{{topic="{TOPIC}"}})',
                    lambda v: v is not None and v > 3000 * 9, "consumers' bytes out")
    prom.wait_value(f'sum(kafka_server_brokertopicmetrics_replicationbytesout_total{{topic="{TOPIC}"}})',
                    lambda v: v is not None and v > 2 * 3000 * 9, "followers' bytes out")
    assert prom.scalar('sum(kafka_network_requestmetrics_requests_total{request="Produce"})') >= 1
    assert prom.scalar('sum(kafka_network_requestmetrics_totaltimems_count{request="Produce"})') >= 1
    for fetch in ("FetchConsumer", "FetchFollower"):  # Kafka's names for a consumer's and a replica's
        assert prom.scalar(f'sum(kafka_network_requestmetrics_requests_total{{request="{fetch}"}})') >= 1
    ends = f'sum(max by (partition) (kafka_log_log_logendoffset{{topic="{TOPIC}"}}))'
    prom.wait_value(ends, lambda v: v == 3000, "log end offsets adding up to 3000")
    assert prom.scalar("sum(kafka_controller_kafkacontroller_activecontrollercount)") == 1
    assert prom.scalar("max(kafka_controller_kafkacontroller_offlinepartitionscount)") == 0
    # each leader's view of its followers, the active controller's of the voters
    follower_lag = f'pylog_replica_follower_lag{{topic="{TOPIC}"}}'
    prom.wait_value(f"count({follower_lag})", lambda v: v == 6, "two followers of each of three partitions")
    prom.wait_value(f"max({follower_lag})", lambda v: v == 0, "followers caught up")
    prom.wait_value("count(pylog_raft_voter_log_end_offset)", lambda v: v == 3, "three voters")
    assert prom.scalar("max(pylog_raft_voter_commit_lag)") is not None

    # the group's lag grows while it is stopped
    lag = f'sum(kafka_consumergroup_lag{{group="{GROUP}",topic="{TOPIC}"}})'
    prom.wait_value(lag, lambda v: v == 0, "no lag once the group committed everything")
    _produce(bootstrap, 500, 3000)
    prom.wait_value(lag, lambda v: v == 500, "a lag of 500")
    rate = f'sum(rate(kafka_server_brokertopicmetrics_messagesin_total{{topic="{TOPIC}"}}[30s]))'
    assert prom.scalar(rate) > 0
    _produce(bootstrap, 700, 3500)
    prom.wait_value(lag, lambda v: v == 1200, "a lag of 1200")

    # the lag of partitions whose leader is another node than the group's coordinator
    expected = _commit_behind_on_every_node(bootstrap)
    spread_lag = f'sum by (partition) (kafka_consumergroup_lag{{group="{AUDIT}",topic="{SPREAD}"}})'
    prom.wait_for(lambda: {r["metric"]["partition"]: float(r["value"][1])
                           for r in prom.query(spread_lag)} == expected,
                  f"the lag of every partition of {SPREAD}: {expected}, was {prom.query(spread_lag)}")

    # a stopped follower: under-replicated partitions, and none once it runs again
    controller = prom.query("kafka_controller_kafkacontroller_activecontrollercount == 1")
    assert len(controller) == 1
    active = _node_of(cluster, controller[0]["metric"]["instance"])
    follower = next(n for n in sorted(cluster.nodes) if n != active)
    urp = "sum(kafka_server_replicamanager_underreplicatedpartitions)"
    prom.wait_value(urp, lambda v: v == 0, "no under-replicated partition")
    cluster.pause(follower)
    try:
        prom.wait_value(urp, lambda v: v is not None and v > 0, "an under-replicated partition")
        assert prom.scalar(f'up{{instance="{_instance(cluster, follower)}"}}') == 0
        prom.wait_for(lambda: prom.query('ALERTS{alertname="PylogUnderReplicatedPartitions"}'),
                      "the under-replicated alert pending", 15)
    finally:
        cluster.resume(follower)
    prom.wait_value(urp, lambda v: v == 0, "every partition fully replicated again", 60)
    assert prom.scalar("sum(kafka_server_replicamanager_isrshrinks_total)") >= 1
    prom.wait_value("sum(kafka_server_replicamanager_isrexpands_total)", lambda v: v is not None and v >= 1,
                    "ISR expansions")

    # every query of the dashboard runs, and the metrics it names exist
    names = set(prom.api("label/__name__/values"))
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) > 20
    for expr in exprs:
        prom.query(expr.replace("$job", ".*").replace("$__rate_interval", "5s"))
    referenced = {w for e in exprs for w in _metric_names(e)}
    assert referenced - names <= {"kafka_server_socket_server_metrics_failed_authentication_total"} | {
        n for n in referenced  # no errors answered, no topic in a remote tier or an Iceberg table, no
        # schema registry requests here
        if n.startswith(("kafka_network_requestmetrics_errors", "kafka_server_brokertopicmetrics_remote",
                         "pylog_iceberg_", "pylog_schema_registry_"))
    }, referenced - names

    # a node keeps answering its scrape while another node is killed
    scraped = cluster.node(1).metrics_url + "/metrics"
    codes: list[int] = []
    stop = threading.Event()

    def scrape() -> None:
        while not stop.is_set():
            with urllib.request.urlopen(scraped, timeout=10) as r:
                codes.append(r.status)
                assert b"kafka_server_replicamanager_leadercount" in r.read()

    t = threading.Thread(target=scrape)
    t.start()
    try:
        time.sleep(0.5)
        cluster.kill(2)
        time.sleep(2)
    finally:
        stop.set()
        t.join(15)
    assert codes and set(codes) == {200}, codes
    prom.wait_value(f'up{{instance="{_instance(cluster, 2)}"}}',
                    lambda v: v == 0, "the killed node down")


def _metric_names(expr: str) -> set[str]:
    import re

    return {m for m in re.findall(r"\b([a-z_]+_[a-z_]+)\s*\{", expr)} | {
        m for m in re.findall(r"\b((?:kafka|pylog|process)_[a-z_]+)\b", expr)
    }


def test_alert_rules_pass_promtool() -> None:
    out = subprocess.run([_tool("promtool"), "check", "rules", str(MONITORING / "alerts.yml")],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 7 rules found" in out.stdout
    out = subprocess.run([_tool("promtool"), "test", "rules", "alerts_test.yml"], cwd=MONITORING,
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
