"""Spark data source ``pylog``: Kafka topics as Spark DataFrames, batch and streaming.

    import pylog.spark                      # before the SparkSession is created
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.master("local[*]").getOrCreate()
    pylog.spark.register(spark)
    df = (spark.read.format("pylog").option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "clicks").load())

Spark's Python workers must import pylog and pyarrow, so they must run this interpreter: importing
this module sets ``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON`` to it when they are unset and no
Spark session exists yet (a session fixes its workers' interpreter when it starts); `register`
says what to do when a session already runs its workers with an interpreter that cannot import pylog.

Options and columns follow Spark's Kafka source and sink (see `pylog.spark.options`); ``dataDir``
reads a pylog data directory without a broker.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from pylog._extras import require

PYTHON_VARS = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")


def _session_running() -> bool:
    if "pyspark" not in sys.modules:  # pyspark not even imported: no session can exist
        return False
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def default_python() -> dict[str, str]:
    """Point unset ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` at this interpreter unless a Spark
    session already runs; returns what was set."""
    if _session_running():
        return {}
    changed = {var: sys.executable for var in PYTHON_VARS if not os.environ.get(var)}
    os.environ.update(changed)
    return changed


default_python()


def register(spark: Any) -> None:
    """Make ``format("pylog")`` available on `spark` (a SparkSession)."""
    require("pyspark", "pylog.spark")
    _check_workers(spark)
    from pylog.spark.source import PylogDataSource

    spark.dataSource.register(PylogDataSource)


def _check_workers(spark: Any) -> None:
    """Fail clearly when the session's Python workers run an interpreter that cannot import pylog."""
    worker = getattr(spark.sparkContext, "pythonExec", None) or sys.executable
    if os.path.realpath(_which(worker)) == os.path.realpath(sys.executable):
        return
    probe = subprocess.run([worker, "-c", "import pyarrow, pylog"], capture_output=True, timeout=120,
                           check=False)
    if probe.returncode != 0:
        raise RuntimeError(
            f"this Spark session runs its Python workers with {worker!r}, which cannot import pylog and "
            f"pyarrow. Stop it (spark.stop()) and create it again after `import pylog.spark` (which points "
            f"PYSPARK_PYTHON at {sys.executable}), or set PYSPARK_PYTHON={sys.executable} before creating it."
        )


def _which(program: str) -> str:
    if os.sep in program:
        return program
    from shutil import which

    return which(program) or program


__all__ = ["default_python", "register"]
