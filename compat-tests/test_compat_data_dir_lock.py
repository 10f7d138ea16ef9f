"""One broker per data directory: a second ``pylog broker`` on a used directory refuses to start,
names the process holding it, and leaves the first broker and its data alone."""

from __future__ import annotations

import subprocess
from pathlib import Path

from compat_broker import BrokerProcess, pylog_command
from compat_clients import Rec, consume, produce


def _files(data_dir: Path) -> list[str]:
    return sorted(str(p.relative_to(data_dir)) for p in data_dir.rglob("*"))


def test_second_broker_on_a_used_data_dir_refuses_to_start(own_broker: BrokerProcess,
                                                           topic_name: str) -> None:
    produce("kafka-python", own_broker.bootstrap, topic_name, [Rec(b"first", b"k")])
    before = _files(own_broker.data_dir)
    assert own_broker.proc is not None
    cmd = [*pylog_command(), "broker", "--data-dir", str(own_broker.data_dir), "--listen", "127.0.0.1:0"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 1, out
    assert "listening" not in out.stdout
    assert f"data directory {own_broker.data_dir.resolve()} is in use by another broker " \
           f"(pid {own_broker.proc.pid})" in out.stderr
    assert _files(own_broker.data_dir) == before  # nothing created or removed
    assert (own_broker.data_dir / ".lock").read_text().strip() == str(own_broker.proc.pid)
    # the first broker keeps serving, from the same log
    produce("kafka-python", own_broker.bootstrap, topic_name, [Rec(b"second", b"k")])
    got = consume("kafka-python", own_broker.bootstrap, topic_name, 2)
    assert [(r.offset, r.value) for r in got] == [(0, b"first"), (1, b"second")]


def test_a_crashed_broker_leaves_no_stale_lock(own_broker: BrokerProcess, topic_name: str) -> None:
    produce("kafka-python", own_broker.bootstrap, topic_name, [Rec(b"kept")])
    own_broker.restart(hard=True)  # SIGKILL: the kernel drops the lock with the process
    got = consume("kafka-python", own_broker.bootstrap, topic_name, 1)
    assert [r.value for r in got] == [b"kept"]
