"""What importing pylog costs, and what a missing optional dependency says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sdk_helpers import write_topic_dir

import pylog
from pylog._extras import MissingExtraError


def test_import_pylog_loads_no_dataframe_library() -> None:
    code = ("import sys, pylog\n"
            "pylog.read_topic, pylog.scan_topic, pylog.write_topic, pylog.LocalBroker\n"
            "import pylog.sdk.scan, pylog.sdk.dir_source, pylog.sdk.kafka_source, pylog.spark\n"
            "print(sorted(m for m in ('pandas', 'polars', 'duckdb', 'pyspark') if m in sys.modules))")
    assert _python(code) == "[]"


@pytest.mark.parametrize(("method", "module", "name"), [
    ("to_polars", "polars", "Polars"), ("to_pandas", "pandas", "pandas"), ("to_duckdb", "duckdb", "DuckDB")])
def test_missing_notebook_extra_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         method: str, module: str, name: str) -> None:
    write_topic_dir(tmp_path, "t", [3])
    scan = pylog.scan_topic("t", data_dir=tmp_path)
    monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    args = ("t",) if method == "to_duckdb" else ()
    with pytest.raises(MissingExtraError) as err:
        getattr(scan, method)(*args)
    assert str(err.value) == f"{method}() needs {name}, which is not installed: pip install 'pylog[notebook]'"
    assert isinstance(err.value, ModuleNotFoundError)


def _python(code: str, env: dict[str, str] | None = None) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=True, env=env)
    return out.stdout.strip()


def test_spark_workers_default_to_this_interpreter() -> None:
    code = "import os, pylog.spark; print(os.environ['PYSPARK_PYTHON'], os.environ['PYSPARK_DRIVER_PYTHON'])"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    assert _python(code, env).split() == [sys.executable, sys.executable]
    env["PYSPARK_PYTHON"] = "/opt/other/python"
    assert _python(code, env).split() == ["/opt/other/python", sys.executable]  # what the user set stays
