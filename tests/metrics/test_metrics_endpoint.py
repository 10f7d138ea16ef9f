"""The metrics listener of one broker process: the exposition parses, counters follow what a real
client did, odd label values survive, the health endpoints answer, bad settings are refused."""

from __future__ import annotations

import gzip
import json
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer
from prometheus_client.parser import text_string_to_metric_families

import pylog

ODD_TOPIC = "odd.topic_with-" + "x" * 200  # dots and underscores, 215 characters
ODD_GROUP = 'grp "quoted" \\ back\nslash é ' + "g" * 600  # the exposition must escape and cut it


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def value(found: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    vals = [v for lv, v in found.get(name, []) if all(lv.get(k) == x for k, x in labels.items())]
    assert vals, f"no {name}{labels} in {sorted(found)[:20]}..."
    return sum(vals)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    remote = tmp_path_factory.mktemp("remote")
    config = {
        "num.partitions": "2",
        "share.auto.offset.reset": "earliest",
        "group.initial.rebalance.delay.ms": "0",
        # topics that ask for it keep their history in a remote tier (a directory here)
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.uri": f"file://{remote}",
        "remote.log.manager.task.interval.ms": "200",
    }
    with pylog.LocalBroker(config=config) as b:
        yield b


def test_metrics_follow_a_producer_and_a_group(broker):
    assert broker.metrics_url is not None
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for i in range(500):
        p.produce(ODD_TOPIC, value=b"v%d" % i, partition=i % 2)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": ODD_GROUP,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([ODD_TOPIC])
    got = 0
    while got < 300:
        m = c.poll(10)
        assert m is not None, "the consumer got nothing"
        assert m.error() is None, m.error()
        got += 1
    c.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in c.committed(c.assignment(), timeout=10)}
    c.close()

    status, headers, body = get(broker.metrics_url + "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    found = samples(body.decode())
    assert value(found, "kafka_server_brokertopicmetrics_messagesin_total", topic=ODD_TOPIC) == 500
    assert value(found, "kafka_server_brokertopicmetrics_bytesin_total", topic=ODD_TOPIC) > 500
    assert value(found, "kafka_server_brokertopicmetrics_bytesout_total", topic=ODD_TOPIC) > 0
    assert value(found, "kafka_network_requestmetrics_requests_total", request="Produce") >= 1
    assert value(found, "kafka_network_requestmetrics_requests_total", request="FetchConsumer") >= 1
    assert value(found, "kafka_network_requestmetrics_totaltimems_count", request="Produce") >= 1
    assert value(found, "kafka_network_requestmetrics_localtimems_count", request="FetchConsumer") >= 1
    assert value(found, "kafka_network_requestmetrics_remotetimems_count", request="FetchConsumer") >= 1
    # every request is one observation of each time, its queue time and its throttle time too
    produced = value(found, "kafka_network_requestmetrics_totaltimems_count", request="Produce")
    for histogram in ("requestqueuetimems", "throttletimems"):
        assert value(found, f"kafka_network_requestmetrics_{histogram}_count", request="Produce") == produced
    # a Produce's time histogram is cumulative and ends at +Inf with the count
    inf = value(found, "kafka_network_requestmetrics_totaltimems_bucket", request="Produce", le="+Inf")
    assert inf == value(found, "kafka_network_requestmetrics_totaltimems_count", request="Produce")
    for p_index in (0, 1):
        end = value(found, "kafka_log_log_logendoffset", topic=ODD_TOPIC, partition=str(p_index))
        assert end == 250
        assert value(found, "kafka_log_log_numlogsegments", topic=ODD_TOPIC, partition=str(p_index)) >= 1
        assert value(found, "kafka_log_log_size", topic=ODD_TOPIC, partition=str(p_index)) > 0
    # the group's lag: what it has not committed, its id escaped and cut but one label value
    lags = [(lv, v) for lv, v in found["kafka_consumergroup_lag"] if lv["topic"] == ODD_TOPIC]
    assert {lv["partition"] for lv, _ in lags} == {"0", "1"}
    assert len({lv["group"] for lv, _ in lags}) == 1
    group_label = lags[0][0]["group"]
    assert group_label.startswith('grp "quoted" \\ back\nslash é ') and len(group_label) <= 512
    assert sum(v for _, v in lags) == sum(250 - committed[i] for i in (0, 1)) == 200
    assert value(found, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(found, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(found, "kafka_server_replicamanager_leadercount") >= 2
    assert value(found, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(found, "kafka_server_raftmetrics_current_leader") == 1
    assert value(found, "pylog_raft_voter_log_end_offset", voter="1") > 0
    assert value(found, "pylog_raft_voter_commit_lag", voter="1") == 0
    assert value(found, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") >= 0
    assert value(found, "process_open_fds") > 0
    assert value(found, "pylog_eventloop_lag_seconds_count") >= 1
    assert value(found, "pylog_metrics_collect_errors_total") == 0


def test_openmetrics_and_gzip_when_asked(broker):
    status, headers, body = get(
        broker.metrics_url + "/metrics",
        {"Accept": "application/openmetrics-text; version=1.0.0", "Accept-Encoding": "gzip"},
    )
    assert status == 200
    assert headers["Content-Type"].startswith("application/openmetrics-text")
    assert headers["Content-Encoding"] == "gzip"
    text = gzip.decompress(body).decode()
    assert text.rstrip().endswith("# EOF")
    assert "kafka_controller_kafkacontroller_activecontrollercount 1" in text


def test_health_endpoints(broker):
    status, _, body = get(broker.metrics_url + "/v1/status/live")
    assert (status, json.loads(body)) == (200, {"status": "live"})
    status, _, body = get(broker.metrics_url + "/v1/status/ready")
    assert (status, json.loads(body)) == (200, {"status": "ready"})
    status, _, body = get(broker.metrics_url + "/nothing")
    assert status == 404 and "/metrics" in json.loads(body)["paths"]


def test_bad_listener_is_refused_with_its_reason(tmp_path):
    b = pylog.LocalBroker(tmp_path / "d", config={"pylog.metrics.listeners": "ftp://127.0.0.1:1"})
    with pytest.raises(RuntimeError, match=r"pylog\.metrics\.listeners must be http://HOST:PORT"):
        b.start()
    b.close()


def test_metrics_can_be_turned_off(tmp_path):
    with pylog.LocalBroker(tmp_path / "d", config={"pylog.metrics.listeners": ""}) as b:
        assert b.metrics_url is None
        assert "pylog metrics on" not in (b._tmp / "broker.stdout").read_text()


def test_error_answers_are_counted_by_request_and_error(broker):
    """A Heartbeat for a group nobody joined is answered with a top-level error, counted by name."""
    import socket
    import struct

    from pylog.protocol import api
    from pylog.protocol.api import ApiKey

    def errors() -> dict[str, float]:
        found = samples(get(broker.metrics_url + "/metrics")[2].decode())
        return {lv["error"]: v for lv, v in found.get("kafka_network_requestmetrics_errors_total", [])
                if lv["request"] == "Heartbeat"}

    before = errors()
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        body = {"group_id": "nobody-joined", "generation_id": 1, "member_id": "m", "group_instance_id": None}
        sock.sendall(api.encode_request(ApiKey.HEARTBEAT, 4, 7, "metrics-test", body))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        _, resp = api.decode_response(ApiKey.HEARTBEAT, 4, sock.recv(size, socket.MSG_WAITALL))
    assert resp.error_code != 0
    name = _error_name(resp.error_code)
    after = errors()
    assert after.get(name, 0) == before.get(name, 0) + 1, (before, after)


def _error_name(code: int) -> str:
    from pylog.protocol.errors import ErrorCode

    return ErrorCode(code).name


def test_https_with_the_tls_listeners_settings(tmp_path):
    """https:// serves with the TLS client listener's certificate; plain http gets no answer."""
    import ssl

    import trustme

    from pylog.local import free_port

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    port = free_port()
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tmp_path / "server.pem"),
        "pylog.metrics.listeners": f"https://127.0.0.1:{port}",
    }
    with pylog.LocalBroker(tmp_path / "d", config=config) as b:
        assert b.metrics_url == f"https://127.0.0.1:{port}"
        context = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
        with urllib.request.urlopen(b.metrics_url + "/metrics", context=context, timeout=30) as r:
            assert r.status == 200
            assert "kafka_server_replicamanager_leadercount" in r.read().decode()
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10)
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(b.metrics_url + "/metrics", context=ssl.create_default_context(),
                                   timeout=10)


def test_https_without_a_tls_listener_is_refused(tmp_path):
    b = pylog.LocalBroker(tmp_path / "d", config={"pylog.metrics.listeners": "https://127.0.0.1:0"})
    with pytest.raises(RuntimeError, match="https needs a client listener with TLS"):
        b.start()
    b.close()


def _call(broker, api_key: int, version: int, body: dict):
    """One request over a plain socket, decoded with pylog's codec."""
    import socket
    import struct

    from pylog.protocol import api

    host, port = broker.bootstrap_servers.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(api.encode_request(api_key, version, 1, "metrics-test", body))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        return api.decode_response(api_key, version, sock.recv(size, socket.MSG_WAITALL))[1]


def test_what_clients_push_is_re_exported_with_their_labels(broker):
    """A confluent-kafka producer pushes its metrics (KIP-714) once subscribed; /metrics carries
    them named after the metric, labelled with the client."""
    from pylog.protocol.api import ApiKey

    sub = {"name": "interval.ms", "config_operation": 0, "value": "1000"}
    every = {"name": "metrics", "config_operation": 0, "value": "*"}
    resp = _call(broker, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": 16, "resource_name": "scrape-all", "configs": [every, sub]}],
        "validate_only": False,
    })
    assert [r.error_code for r in resp.responses] == [0]
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "pushing-producer"})
    deadline = time.monotonic() + 60
    pushed: list[tuple[str, dict[str, str]]] = []
    while not pushed:
        assert time.monotonic() < deadline, "no pushed metric re-exported within 60 s"
        p.produce("pushed-topic", value=b"x")
        p.poll(0.5)
        found = samples(get(broker.metrics_url + "/metrics")[2].decode())
        pushed = [(name, lv) for name, rows in found.items() if name.startswith("org_apache_kafka_")
                  for lv, _ in rows if lv.get("client_id") == "pushing-producer"]
    p.flush(10)
    name, labels = pushed[0]
    assert labels["client_software_name"] and len(labels["client_instance_id"]) == 36, labels
    status, _, body = get(broker.metrics_url + "/metrics", {"Accept": "application/openmetrics-text"})
    assert status == 200 and name in body.decode()


def test_authentications_are_counted_by_listener(tmp_path):
    """A client with a wrong SASL/PLAIN password and one with the right one, on the SASL listener."""
    import re

    from confluent_kafka.admin import AdminClient

    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";',
    }
    with pylog.LocalBroker(tmp_path / "d", config=config) as b:
        printed = (b._tmp / "broker.stdout").read_text()
        sasl = re.search(r"pylog listener SASL_PLAINTEXT on (\S+)", printed)
        assert sasl is not None, printed

        admins = []

        def connect(password: str) -> bool:
            admin = AdminClient({"bootstrap.servers": sasl.group(1), "security.protocol": "SASL_PLAINTEXT",
                                 "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                                 "sasl.password": password})
            admins.append(admin)  # its connection stays open while the metrics are read
            try:
                admin.list_topics(timeout=5)
                return True
            except Exception:
                return False

        assert not connect("wrong")
        assert connect("alice-secret")
        deadline = time.monotonic() + 10
        while True:  # the client may be moving from its bootstrap connection to its broker's
            found = samples(get(b.metrics_url + "/metrics")[2].decode())
            plain = [v for lv, v in found.get("pylog_connections", []) if lv == {
                "listener": "SASL_PLAINTEXT", "security_protocol": "SASL_PLAINTEXT", "mechanism": "PLAIN"}]
            if sum(plain) >= 1 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert sum(plain) >= 1, found.get("pylog_connections")
        failed = "kafka_server_socket_server_metrics_failed_authentication_total"
        ok = "kafka_server_socket_server_metrics_successful_authentication_total"
        assert value(found, failed, listener="SASL_PLAINTEXT") >= 1
        assert value(found, ok, listener="SASL_PLAINTEXT") >= 1
        assert value(found, failed, listener="PLAINTEXT") == 0
        connections = "kafka_server_socket_server_metrics_connection_count"
        assert value(found, connections, listener="SASL_PLAINTEXT") >= 0


def test_throttled_answers_show_their_throttle_time(broker):
    """A client-id byte-rate quota throttles a real producer; the throttle histogram says how long."""
    from pylog.protocol.api import ApiKey
    from pylog.protocol.messages import AlterClientQuotasRequest

    from pylog.client.blocking import BlockingClient

    E = AlterClientQuotasRequest.EntryData
    entry = E(entity=[E.EntityData(entity_type="client-id", entity_name="slowed")],
              ops=[E.OpData(key="producer_byte_rate", value=1024.0, remove=False)])
    with BlockingClient(broker.bootstrap_servers) as client:
        answer = client.request(ApiKey.ALTER_CLIENT_QUOTAS, AlterClientQuotasRequest(entries=[entry]))
    assert [e.error_code for e in answer.entries] == [0]
    throttles: list[int] = []
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "slowed", "linger.ms": 0,
                  "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    for _ in range(20):
        p.produce("throttled-topic", value=b"x" * 1024)
        p.flush(30)
    assert throttles and max(throttles) > 0, "the quota never throttled the producer"
    found = samples(get(broker.metrics_url + "/metrics")[2].decode())
    total = value(found, "kafka_network_requestmetrics_throttletimems_sum", request="Produce")
    assert total >= max(throttles) > 0
    by_client = value(found, "pylog_client_throttle_time_ms_total", request="Produce", client_id="slowed",
                      user="ANONYMOUS")
    assert by_client >= max(throttles) * 1000 - 1  # the client's callback says seconds
    assert value(found, "pylog_client_throttled_total", request="Produce", client_id="slowed") >= 1
    below_1ms = value(found, "kafka_network_requestmetrics_throttletimems_bucket", request="Produce", le="1")
    assert below_1ms < value(found, "kafka_network_requestmetrics_throttletimems_count", request="Produce")


def _fetch_body(topic: str, offset: int, max_bytes: int) -> dict:
    return {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "fetch_offset": offset, "partition_max_bytes": max_bytes}]}],
    }


def test_request_time_is_split_as_kafka_splits_it(broker):
    """Each answered request is one observation of every part of its time, and the total is the
    sum of its parts: request queue, local, remote, response queue and response send."""
    import math

    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(50):
        p.produce("split-times", value=b"v%d" % i)
        p.flush(30)
    found = samples(get(broker.metrics_url + "/metrics")[2].decode())
    parts = ("requestqueuetimems", "localtimems", "remotetimems", "responsequeuetimems", "responsesendtimems")
    count = value(found, "kafka_network_requestmetrics_totaltimems_count", request="Produce")
    assert count >= 50
    for part in parts:
        assert value(found, f"kafka_network_requestmetrics_{part}_count", request="Produce") == count, part
    total = value(found, "kafka_network_requestmetrics_totaltimems_sum", request="Produce")
    summed = sum(value(found, f"kafka_network_requestmetrics_{part}_sum", request="Produce")
                 for part in parts)
    assert math.isclose(total, summed, rel_tol=1e-6, abs_tol=1e-3), (total, summed)


def test_an_answer_the_client_does_not_read_counts_as_response_send_time(broker):
    """A Fetch answer larger than the socket buffers, to a client that reads nothing for 0.5 s: its
    send cannot end before the client reads, so the send time holds those 0.5 s."""
    import socket
    import struct

    from pylog.protocol import api
    from pylog.protocol.api import ApiKey

    topic = "slow-reader"
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20,
                  "batch.size": 900_000, "message.max.bytes": 1_000_000})
    for _ in range(160):
        p.produce(topic, value=b"x" * 50_000, partition=0)
    assert p.flush(30) == 0

    def send_sum() -> float:
        found = samples(get(broker.metrics_url + "/metrics")[2].decode())
        return value(found, "kafka_network_requestmetrics_responsesendtimems_sum", request="FetchConsumer")

    before = send_sum()
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
        sock.settimeout(30)
        sock.connect((host, int(port)))
        sock.sendall(api.encode_request(ApiKey.FETCH, 12, 1, "slow", _fetch_body(topic, 0, 16 << 20)))
        time.sleep(0.5)
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        got = bytearray()
        while len(got) < size:
            chunk = sock.recv(min(1 << 20, size - len(got)))
            assert chunk, "the broker closed the connection"
            got += chunk
    assert size > 4 << 20, size  # far more than the socket buffers hold
    deadline = time.monotonic() + 10
    while send_sum() - before < 500 and time.monotonic() < deadline:
        time.sleep(0.05)  # the broker notices the drained buffer on its next check
    assert send_sum() - before >= 500


def test_partition_errors_are_counted_by_topic_and_partition(broker):
    """A Fetch past the log end is answered OFFSET_OUT_OF_RANGE for that partition: counted under
    Kafka's errors of Fetch, its failed fetches of the topic, and in pylog_partition_errors by topic
    and partition."""
    from pylog.protocol.api import ApiKey

    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    p.produce("erring", value=b"x", partition=0)
    assert p.flush(30) == 0

    def counts() -> tuple[float, float]:
        found = samples(get(broker.metrics_url + "/metrics")[2].decode())
        per_partition = sum(v for lv, v in found.get("pylog_partition_errors_total", [])
                            if lv == {"request": "Fetch", "topic": "erring", "partition": "0",
                                      "error": "OFFSET_OUT_OF_RANGE"})
        by_request = sum(v for lv, v in found.get("kafka_network_requestmetrics_errors_total", [])
                         if lv == {"request": "Fetch", "error": "OFFSET_OUT_OF_RANGE"})
        failed_fetches = found.get("kafka_server_brokertopicmetrics_failedfetchrequests_total", [])
        by_topic = sum(v for lv, v in failed_fetches if lv == {"topic": "erring"})
        return per_partition, by_request, by_topic

    before = counts()
    for _ in range(3):
        resp = _call(broker, ApiKey.FETCH, 12, _fetch_body("erring", 10**9, 1 << 20))
        assert resp.responses[0].partitions[0].error_code == 1  # OFFSET_OUT_OF_RANGE
    after = counts()
    assert [a - b for a, b in zip(after, before)] == [3, 3, 3]


def test_groups_transactions_and_share_groups(broker):
    """A classic group while its member runs, a committed transaction, a share consumer holding
    records it has not acknowledged."""
    from confluent_kafka import ShareConsumer

    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "metrics-tx"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce("shared", value=b"%d" % i, partition=0)
    p.commit_transaction(30)

    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "running",
                  "auto.offset.reset": "earliest"})
    c.subscribe(["shared"])
    deadline = time.monotonic() + 30
    while not c.assignment():
        assert time.monotonic() < deadline, "no assignment"
        c.poll(0.2)
    share = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "sharing",
                           "share.acknowledgement.mode": "explicit"})
    share.subscribe(["shared"])
    held = 0
    while held == 0:
        assert time.monotonic() < deadline, "the share consumer got nothing"
        held += sum(1 for m in share.poll(0.2) if m.error() is None)
    try:
        found = samples(get(broker.metrics_url + "/metrics")[2].decode())
    finally:
        share.close()
        c.close()
    assert value(found, "pylog_group_members", group="running", type="classic") == 1
    assert value(found, "pylog_group_state", group="running", type="classic", state="Stable") == 1
    assert value(found, "pylog_group_generation", group="running", type="classic") >= 1
    assert value(found, "pylog_group_members", group="sharing", type="share") == 1
    assert value(found, "kafka_server_group_coordinator_metrics_group_count", protocol="share") >= 1
    where = {"group": "sharing", "topic": "shared", "partition": "0"}
    acquired = value(found, "pylog_share_partition_acquired", **where)
    assert held <= acquired <= 10  # what it polled, and what it may hold beyond
    assert value(found, "pylog_share_partition_in_flight", **where) >= acquired
    assert value(found, "pylog_transactions", state="CompleteCommit") >= 1
    assert value(found, "pylog_transaction_pending_markers") == 0


def test_tiered_partitions_show_remote_bytes_and_copy_lag(broker):
    """A topic kept in the remote tier: once its sealed segments are copied, their bytes show as
    remote and the copy lag goes to 0."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    config = {"remote.storage.enable": "true", "segment.bytes": "65536"}
    admin.create_topics([NewTopic("tiered", num_partitions=1, replication_factor=1, config=config)])[
        "tiered"].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, "batch.num.messages": 20})
    for _ in range(300):  # 15 batches of 20 kB: segments of 64 kB roll
        p.produce("tiered", value=b"x" * 1000)
    assert p.flush(30) == 0
    deadline = time.monotonic() + 30
    while True:
        found = samples(get(broker.metrics_url + "/metrics")[2].decode())
        remote = found.get("kafka_server_brokertopicmetrics_remotelogsizebytes", [])
        lag = value(found, "kafka_server_brokertopicmetrics_remotecopylagsegments", topic="tiered",
                    partition="0")
        if sum(v for lv, v in remote if lv["topic"] == "tiered") > 0 and lag == 0:
            break
        assert time.monotonic() < deadline, (remote, lag)
        time.sleep(0.2)
    assert value(found, "kafka_server_brokertopicmetrics_remotelogmetadatacount", topic="tiered") >= 3
    assert value(found, "kafka_server_brokertopicmetrics_remotecopybytes_total") >= 3 * 65536 * 0.5


def test_stuck_scrapers_hold_up_neither_the_broker_nor_other_scrapes(broker):
    """Scrapers that never finish their request, or never read the answer, while a producer
    writes and another scraper reads."""
    import socket
    from urllib.parse import urlsplit

    where = urlsplit(broker.metrics_url)
    stuck = [socket.create_connection((where.hostname, where.port), timeout=10) for _ in range(20)]
    try:
        for i, sock in enumerate(stuck):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            ending = b"\r\n" if i % 2 else b""  # half never end their headers, half never read
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + ending)
        p = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(100):
            p.produce("beside-stuck-scrapers", value=b"%d" % i)
        assert p.flush(30) == 0
        status, _, body = get(broker.metrics_url + "/metrics")
        assert status == 200
        found = samples(body.decode())
        messages = value(found, "kafka_server_brokertopicmetrics_messagesin_total",
                         topic="beside-stuck-scrapers")
        assert messages == 100
    finally:
        for sock in stuck:
            sock.close()


def _registry(broker, method: str, path: str, body: dict | None = None) -> int:
    """``method path`` on the broker's schema registry; the HTTP status it answered."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(broker.schema_registry_url + path, data=data, method=method,
                                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_schema_registry_requests_by_route_method_and_status(broker):
    """Registry requests count under their route's pattern (not the subject or id asked for), a
    path no route serves under ``unmatched``, each with its status; their times are a histogram."""
    assert broker.schema_registry_url is not None, "no schema registry: install the registry extra"
    route = "/subjects/{subject}/versions"

    def counts() -> dict[tuple[str, str, str], float]:
        found = samples(get(broker.metrics_url + "/metrics")[2].decode())
        return {(lv["route"], lv["method"], lv["status"]): v
                for lv, v in found.get("pylog_schema_registry_requests_total", [])}

    before = counts()
    schema = {"schema": json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})}
    assert _registry(broker, "POST", "/subjects/metrics-a-value/versions", schema) == 200
    assert _registry(broker, "POST", "/subjects/metrics-b-value/versions", schema) == 200
    assert _registry(broker, "GET", "/subjects/metrics-a-value/versions") == 200
    assert _registry(broker, "POST", "/subjects/metrics-a-value/versions", {"schema": "{not json"}) == 422
    assert _registry(broker, "GET", "/schemas/ids/987654") == 404
    assert _registry(broker, "GET", "/no/such/path/x1") == 404
    after = counts()
    delta = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    assert delta == {
        (route, "POST", "200"): 2,
        (route, "GET", "200"): 1,
        (route, "POST", "422"): 1,
        ("/schemas/ids/{id}", "GET", "404"): 1,
        ("unmatched", "GET", "404"): 1,
    }
    found = samples(get(broker.metrics_url + "/metrics")[2].decode())
    posts = value(found, "pylog_schema_registry_request_duration_seconds_count", route=route, method="POST")
    assert posts == after[(route, "POST", "200")] + after[(route, "POST", "422")]
    assert value(found, "pylog_schema_registry_request_duration_seconds_bucket", route=route, method="POST",
                 le="+Inf") == posts


def test_iceberg_materialization_lag_per_partition(broker):
    """A topic kept as an Iceberg table: until its table commits, every record is behind; once a
    commit is due (a record older than the commit interval arrives) the lag is 0 and the table
    holds every record."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from pylog.iceberg import open_catalog
    from pylog.iceberg.catalog import table_identifier

    topic = "materialised"
    config = {"pylog.iceberg.enable": "true", "pylog.iceberg.commit.interval.ms": "600000"}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 2, 1, config=config)])[topic].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(16):
        p.produce(topic, value=b"r%d" % i, partition=0 if i < 10 else 1)
    assert p.flush(30) == 0

    def lags() -> dict[str, float]:
        found = samples(get(broker.metrics_url + "/metrics")[2].decode())
        return {lv["partition"]: v for lv, v in found.get("pylog_iceberg_materialization_lag", [])
                if lv["topic"] == topic}

    def wait_for(want: dict[str, float], what: str) -> None:
        deadline = time.monotonic() + 60
        while (got := lags()) != want:
            assert time.monotonic() < deadline, f"{what}: lag {got}, not {want}"
            time.sleep(0.2)

    # fresh records and a 10 minute interval: no commit yet, every record is behind
    wait_for({"0": 10, "1": 6}, "the materialiser started")
    # a record two hours old: the table commits as soon as the materialiser has read it
    p.produce(topic, value=b"old", partition=1, timestamp=int(time.time() * 1000) - 7_200_000)
    assert p.flush(30) == 0
    wait_for({"0": 0, "1": 0}, "the table committed")
    rows = open_catalog(broker.data_dir).load_table(table_identifier(topic, None)).scan().to_arrow()
    assert rows.num_rows == 17
