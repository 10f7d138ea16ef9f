"""log.dirs (JBOD): parsing and checks at start, and where a new partition goes (log_dirs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pylog.broker.datapath.log_dirs import (
    LogDirs,
    check_log_dirs,
    configured_log_dirs,
    count_by_dir,
    least_loaded,
)
from pylog.config import BrokerConfig, ConfigError


def test_least_loaded_takes_the_fewest_partitions_then_the_first_configured() -> None:
    a, b, c = Path("/a"), Path("/b"), Path("/c")
    assert least_loaded([a, b, c], {}) == a
    assert least_loaded([a, b, c], {a: 2, b: 1, c: 1}) == b
    assert least_loaded([a, b, c], {a: 0, b: 1}) == a
    assert least_loaded([a, b, c], {a: 3, b: 3, c: 2}) == c
    with pytest.raises(ValueError):
        least_loaded([], {})


def test_placing_many_partitions_spreads_them_evenly() -> None:
    dirs = [Path("/a"), Path("/b"), Path("/c")]
    ld = LogDirs(dirs)
    placed: list[Path] = []
    for i in range(10):
        placed.append(ld.place(("t", i), count_by_dir(p / "x" for p in placed)))
    counts = count_by_dir(p / "x" for p in placed)
    assert sorted(counts.values()) == [3, 3, 4] and counts[dirs[0]] == 4


def test_a_found_or_preferred_directory_wins_over_the_least_loaded() -> None:
    a, b = Path("/a"), Path("/b")
    ld = LogDirs([a, b], found={("t", 0): b / "t-0"}, preferred={("t", 1): b})
    assert ld.place(("t", 0), {b: 5}) == b
    assert ld.place(("t", 1), {b: 5}) == b
    assert ld.place(("t", 2), {b: 5}) == a


def test_log_dirs_come_from_log_dirs_else_log_dir(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert configured_log_dirs(BrokerConfig({"log.dirs": f"{a}, {b}"})) == [a, b]
    assert configured_log_dirs(BrokerConfig({"log.dir": str(a)})) == [a]
    # the data directory given on the command line comes first, once, or replaces the first
    assert configured_log_dirs(BrokerConfig({"log.dirs": f"{a},{b}"}), b) == [b, a]
    c = tmp_path / "c"
    assert configured_log_dirs(BrokerConfig({"log.dirs": f"{a},{b}"}), c) == [c, b]
    assert configured_log_dirs(BrokerConfig({"log.dirs": str(a)}), c) == [c]
    assert configured_log_dirs(BrokerConfig({}), a) == [a]


@pytest.mark.parametrize(
    ("value", "message"),
    [("{a},,{b}", "empty entry"), ("{a},{a}", "twice"), (",", "empty entry")],
)
def test_bad_log_dirs_are_refused_plainly(tmp_path: Path, value: str, message: str) -> None:
    cfg = BrokerConfig({"log.dirs": value.format(a=tmp_path / "a", b=tmp_path / "b")})
    with pytest.raises(ConfigError, match=message):
        configured_log_dirs(cfg)


def test_check_log_dirs_creates_them_and_refuses_files_and_nesting(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    check_log_dirs([a, b])
    assert a.is_dir() and b.is_dir()
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ConfigError, match="is not a directory"):
        check_log_dirs([a, f])
    with pytest.raises(ConfigError, match="cannot be created"):
        check_log_dirs([f / "sub"])
    with pytest.raises(ConfigError, match="inside log directory"):
        check_log_dirs([a, a / "inner"])
