"""Topics, configs, data and idempotence state survive a clean stop and a kill -9."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from harness import BrokerThread, Client
from pylog.protocol.api import ApiKey
from records_util import make_batch, values_of
from test_idempotence import init_pid
from test_produce_fetch import create, fetch, produce


def describe_topic(client: Client, name: str) -> dict[str, str]:
    resp = client.request(
        ApiKey.DESCRIBE_CONFIGS,
        4,
        {
            "resources": [{"resource_type": 2, "resource_name": name, "configuration_keys": None}],
            "include_synonyms": False,
            "include_documentation": False,
        },
    )
    (res,) = resp.results
    assert res.error_code == 0
    return {c.name: c.value for c in res.configs}


def test_clean_restart_keeps_everything(tmp_path: Path) -> None:
    b = BrokerThread(tmp_path).start()
    c = Client(b.address)
    create(c, "keep", partitions=2, configs={"retention.ms": "123456789"})
    pid = init_pid(c)
    assert (
        produce(
            c, "keep", make_batch([b"a", b"b"], producer_id=pid, producer_epoch=0, base_sequence=0)
        ).base_offset
        == 0
    )
    assert produce(c, "keep", make_batch([b"p1"]), partition=1).base_offset == 0
    topic_id = c.request(ApiKey.METADATA, 12, {"topics": [{"name": "keep"}]}).topics[0].topic_id
    c.close()
    b.stop()

    b = BrokerThread(tmp_path).start()
    try:
        c = Client(b.address)
        meta = c.request(
            ApiKey.METADATA, 12, {"topics": [{"name": "keep"}], "allow_auto_topic_creation": False}
        )
        assert meta.topics[0].error_code == 0 and meta.topics[0].topic_id == topic_id
        assert len(meta.topics[0].partitions) == 2
        assert describe_topic(c, "keep")["retention.ms"] == "123456789"
        assert values_of(fetch(c, "keep", 0).records) == [b"a", b"b"]
        assert values_of(fetch(c, "keep", 0, partition=1).records) == [b"p1"]
        # the producer's state came back from the log: a retry is still a duplicate
        dup = produce(c, "keep", make_batch([b"a", b"b"], producer_id=pid, producer_epoch=0, base_sequence=0))
        assert dup.error_code == 0 and dup.base_offset == 0
        assert (
            produce(
                c, "keep", make_batch([b"c"], producer_id=pid, producer_epoch=0, base_sequence=2)
            ).base_offset
            == 2
        )
        assert init_pid(c) != pid  # producer id blocks are reserved in the metadata log
        c.close()
    finally:
        b.stop()


def test_kill_9_keeps_acknowledged_data(tmp_path: Path) -> None:
    data = tmp_path / "data"

    def start() -> tuple[subprocess.Popen[str], tuple[str, int]]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pylog", "broker", "--data-dir", str(data), "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            m = re.search(r"listening on ([\d.]+):(\d+)", line)
            if m:
                # keep draining the broker's output so it never blocks on a full pipe
                threading.Thread(target=proc.stdout.read, daemon=True).start()
                return proc, (m.group(1), int(m.group(2)))
        raise AssertionError(f"broker exited with {proc.wait()}")

    proc, addr = start()
    try:
        c = Client(addr)
        create(c, "crash")
        for i in range(20):
            assert produce(c, "crash", make_batch([b"v%d" % i]), acks=1).base_offset == i
        c.close()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    proc, addr = start()
    try:
        c = Client(addr)
        assert values_of(fetch(c, "crash", 0).records) == [b"v%d" % i for i in range(20)]
        assert produce(c, "crash", make_batch([b"after"])).base_offset == 20
        c.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
