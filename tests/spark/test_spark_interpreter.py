"""Spark's Python workers run pylog's interpreter without anything exported: a fresh process whose
``python3`` on PATH cannot import pyarrow or pylog (Debian's) still reads ``format("pylog")``, and a
session started with such a worker interpreter is refused with what to do."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sdk_helpers import write_topic_dir

SESSION = """
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
"""


def _run(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=300, check=False, env=env)


@pytest.fixture
def plain_env() -> dict[str, str]:
    """No PYSPARK_* variables, and a PATH whose python3 is not this interpreter."""
    other = Path("/usr/bin/python3")
    probe = subprocess.run([str(other), "-c", "import pyarrow"], capture_output=True, check=False)
    if probe.returncode == 0:
        pytest.fail(f"{other} imports pyarrow; this test needs a python3 on PATH that cannot")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env["PATH"] = "/usr/bin:/bin"
    return env


@pytest.mark.timeout(600)
def test_import_pylog_spark_is_enough(tmp_path: Path, plain_env: dict[str, str]) -> None:
    write_topic_dir(tmp_path, "clicks", [7, 5])
    out = _run(f"""
        import pylog.spark
        {SESSION.strip().replace(chr(10), chr(10) + '        ')}
        pylog.spark.register(spark)
        df = (spark.read.format("pylog").option("dataDir", {str(tmp_path)!r}).option("subscribe", "clicks")
              .load())
        print("rows", df.count(), sorted(r.partition for r in df.select("partition").distinct().collect()))
        spark.stop()
        """, plain_env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "rows 12 [0, 1]" in out.stdout


@pytest.mark.timeout(600)
def test_a_session_with_a_worker_interpreter_that_cannot_import_pylog(plain_env: dict[str, str]) -> None:
    out = _run(f"""
        import os
        os.environ["PYSPARK_PYTHON"] = "/usr/bin/python3"
        {SESSION.strip().replace(chr(10), chr(10) + '        ')}
        import pylog.spark
        try:
            pylog.spark.register(spark)
        except RuntimeError as exc:
            print("refused:", exc)
        spark.stop()
        """, plain_env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "refused: this Spark session runs its Python workers with '/usr/bin/python3', which cannot " \
           "import pylog and pyarrow. Stop it (spark.stop()) and create it again after `import pylog.spark`" \
           in out.stdout
