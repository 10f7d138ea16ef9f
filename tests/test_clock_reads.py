"""Time is read through an injected ``pylog.clock.Clock`` only: no module of the package asks the
system for the time itself (``time.time``, ``time.monotonic``, ``time.perf_counter`` and their
``_ns`` forms, called or handed on as a function, or imported by name), so a test can drive any
shell with a ``ManualClock``. Sleeps are not readings and stay allowed."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE_DIRS = ("pylog", "storage", "protocol", "widgets")
READINGS = {"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns"}
CLOCK = "pylog/clock.py"


def is_reading(node: ast.AST) -> bool:
    """``time.monotonic`` and the like (called or not), or ``from time import monotonic``."""
    if isinstance(node, ast.Attribute):
        return node.attr in READINGS and isinstance(node.value, ast.Name) and node.value.id == "time"
    if isinstance(node, ast.ImportFrom):
        return node.module == "time" and not node.level and any(a.name in READINGS for a in node.names)
    return False


def direct_reads(source: str, name: str) -> list[int]:
    """Lines of ``source`` that read the system clock without going through a Clock."""
    return sorted(node.lineno for node in ast.walk(ast.parse(source, name)) if is_reading(node))


def test_no_direct_time_reads_outside_the_clock() -> None:
    found = []
    for directory in SOURCE_DIRS:
        for path in sorted((ROOT / directory).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel != CLOCK:
                found.extend(f"{rel}:{line}" for line in direct_reads(path.read_text("utf-8"), rel))
    assert not found, "read the time through an injected pylog.clock.Clock instead:\n" + "\n".join(found)


def test_the_scan_sees_every_form_of_reading() -> None:
    source = ("import time\nfrom time import monotonic, sleep\n"
              "a = time.time()\nb = time.perf_counter_ns()\nc = time.monotonic\ntime.sleep(0)\n")
    assert direct_reads(source, "probe.py") == [2, 3, 4, 5]
