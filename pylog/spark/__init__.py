"""Spark data source ``pylog``: Kafka topics as Spark DataFrames, batch and streaming.

    import os, sys
    os.environ["PYSPARK_PYTHON"] = sys.executable   # workers must import pylog and pyarrow
    import pylog.spark
    pylog.spark.register(spark)
    df = (spark.read.format("pylog").option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "clicks").load())

Options and columns follow Spark's Kafka source and sink (see `pylog.spark.options`); ``dataDir``
reads a pylog data directory without a broker.
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Make ``format("pylog")`` available on `spark` (a SparkSession)."""
    from pylog.spark.source import PylogDataSource

    spark.dataSource.register(PylogDataSource)


__all__ = ["register"]
