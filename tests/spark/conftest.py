from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "sdk"))


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    """One local SparkSession per test module; Python workers run this interpreter (they import pylog)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import pylog.spark

    session = (SparkSession.builder.master("local[2]").appName("pylog-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    pylog.spark.register(session)
    yield session
    session.stop()
