"""``replica.alter.log.dirs.io.max.bytes.per.second``: the throttle of moves between log dirs.

The throttle's decisions on a clock the test turns, then a real move on a real partition held by it
until the throttle is lifted, as ``kafka-reassign-partitions --verify`` lifts it.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from records_util import make_batch

from pylog.broker.datapath.log_dir_mover import RECHECK_MS, MoveThrottle
from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.config import BrokerConfig, ConfigError, check_static_broker_configs
from pylog.config_defs import ALTER_LOG_DIRS_IO_RATE, ALTER_LOG_DIRS_WINDOW_NUM

MB = 1 << 20

pytestmark = pytest.mark.timeout(60)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.ms


def test_copies_wait_while_the_moves_are_over_the_rate() -> None:
    clock = Clock()
    config = BrokerConfig({ALTER_LOG_DIRS_IO_RATE: str(MB)})
    throttle = MoveThrottle(config, clock)
    assert throttle.hold_ms() == 0  # nothing copied yet
    throttle.record(MB // 2)
    clock.ms += 1000
    assert throttle.hold_ms() == 0  # half the rate
    throttle.record(4 * MB)
    held = throttle.hold_ms()
    assert held > 0
    clock.ms += held
    assert throttle.hold_ms() == 0  # waited it out
    throttle.record(4 * MB)
    assert throttle.hold_ms() > 0
    config.set_dynamic({}, {ALTER_LOG_DIRS_IO_RATE: str(100 * MB)})  # raised while held
    assert throttle.hold_ms() == 0


def test_the_default_never_holds_and_zero_holds_after_anything_copied() -> None:
    clock = Clock()
    config = BrokerConfig({})
    throttle = MoveThrottle(config, clock)
    throttle.record(1 << 40)
    assert throttle.hold_ms() == 0  # Kafka's default: Long.MAX_VALUE, no throttle
    config.set_dynamic({ALTER_LOG_DIRS_IO_RATE: "0"}, {})  # the cluster default, as kafka-configs sets it
    assert throttle.hold_ms() == RECHECK_MS
    clock.ms += 60_000  # the measured windows are past: one more chunk may go, as in Kafka
    assert throttle.hold_ms() == 0


def test_bad_values_are_refused_with_kafkas_words() -> None:
    with pytest.raises(ConfigError, match=f"Invalid value -1 for configuration {ALTER_LOG_DIRS_IO_RATE}: "
                                          "Value must be at least 0"):
        check_static_broker_configs({ALTER_LOG_DIRS_IO_RATE: "-1"})
    with pytest.raises(ConfigError, match="Value must be at least 1"):
        check_static_broker_configs({ALTER_LOG_DIRS_WINDOW_NUM: "0"})
    assert check_static_broker_configs({ALTER_LOG_DIRS_IO_RATE: "1048576"})[0] == {
        ALTER_LOG_DIRS_IO_RATE: "1048576"}


def test_a_move_is_held_until_the_throttle_is_lifted(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    config = BrokerConfig({})
    config.set_dynamic({}, {ALTER_LOG_DIRS_IO_RATE: "0"})  # set for this broker, as a reassignment does
    clock = Clock()
    m = ReplicaManager(config, dirs[0], clock, log_dirs=dirs)
    m.open_log_dirs()
    part = m.ensure_partition("t", 0, uuid.uuid4(), {"segment.bytes": "65536"})
    part.become_leader(1, 0, 0, (1,), (1,), now_ms=0)
    for n in range(400):  # some 4 segments: more than one chunk to copy
        assert part.append_as_leader(make_batch([b"v%06d" % n + b"x" * 500]), clock.ms).error == 0
    part.log.roll()
    part.seal_rolled_segments()

    async def run() -> tuple[int, Path, bool]:
        assert m.mover.start(part, dirs[1]) == 0
        [move] = m.mover.moves.values()
        while move.held_ms == 0:  # the first chunk went, the next one waits
            await asyncio.sleep(0.01)
        held_at = (move.held_ms, part.path, move.dirs.future.is_dir())
        config.set_dynamic({}, {})  # lifted (an incremental DELETE of the config)
        while m.mover.moves:
            await asyncio.sleep(0.01)
        return held_at

    held_ms, path_while_held, future_while_held = asyncio.run(run())
    assert held_ms > 0 and path_while_held == dirs[0] / "t-0" and future_while_held
    assert part.path == dirs[1] / "t-0" and not (dirs[0] / "t-0").exists()
    assert part.log_end_offset == 400
    m.close()
