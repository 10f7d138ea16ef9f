"""Every property test replays: Hypothesis runs from one seed, printed in the report header.

The seed is ``PYLOG_HYPOTHESIS_SEED`` (default 0), or pytest's own ``--hypothesis-seed``. The
``pylog`` profile keeps no example database, so a run depends on the seed and the code alone:
``PYLOG_HYPOTHESIS_SEED=1234 pytest tests/storage/test_model.py`` reproduces what a run with seed
1234 found. A test may still pin its own ``@seed``.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

SEED_ENV = "PYLOG_HYPOTHESIS_SEED"
DEFAULT_SEED = 0

settings.register_profile("pylog", database=None, derandomize=False, print_blob=True)
settings.load_profile("pylog")


def _seed(config: pytest.Config) -> int:
    given = config.getoption("hypothesis_seed", None)
    if given is not None:
        return int(given)
    raw = os.environ.get(SEED_ENV, "").strip()
    try:
        return int(raw) if raw else DEFAULT_SEED
    except ValueError:
        raise pytest.UsageError(f"{SEED_ENV} must be an integer, got {raw!r}") from None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # Hypothesis' own plugin turns the option into its global seed in its pytest_configure.
    config.option.hypothesis_seed = str(_seed(config))


def pytest_report_header(config: pytest.Config) -> str:
    return f"hypothesis seed: {config.option.hypothesis_seed} (replay with {SEED_ENV}=N)"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int) -> None:
    """After a failing run the seed is repeated where it is read (also under ``-q``)."""
    if exitstatus == pytest.ExitCode.TESTS_FAILED:
        seed = terminalreporter.config.option.hypothesis_seed
        terminalreporter.write_line(f"hypothesis seed: {seed} (replay with {SEED_ENV}={seed})")
