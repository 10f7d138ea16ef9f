"""`ReadOptions`: the read keywords written and checked in one place, the public functions agreeing
with it (no broker needed: misuse is answered before anything is read)."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from pathlib import Path

import pytest

import pylog
from pylog.sdk.options import ReadOptions
from pylog.spark.options import ReadOptions as SparkReadOptions


@pytest.mark.parametrize("function", ["read_topic", "scan_topic"])
def test_the_public_keywords_are_the_options(function: str) -> None:
    """IDE help keeps explicit keywords; their defaults are the options' own."""
    fields = {f.name: f.default for f in dataclasses.fields(ReadOptions)
              if f.init and f.name != "read_committed"}
    params = {name: p.default for name, p in inspect.signature(getattr(pylog, function)).parameters.items()
              if name != "topic"}
    assert params == fields


def test_misuse_is_a_plain_value_error(tmp_path: Path) -> None:
    for options, message in [
        ({"data_dir": tmp_path, "transport": "http"}, "transport must be one of 'auto', 'kafka', 'flight'"),
        ({"data_dir": tmp_path, "bootstrap_servers": "h:1"}, "both were given"),
        ({}, "neither was given"),
        ({"data_dir": tmp_path, "columns": ["nope"]}, r"unknown column\(s\) \['nope'\]"),
        ({"data_dir": tmp_path, "on_decode_error": "skip"}, "on_decode_error must be 'raise' or 'null'"),
        ({"data_dir": tmp_path, "flight": "grpc://h:1"}, "pass bootstrap_servers="),
        ({"bootstrap_servers": "h:1", "flight": "h:1"}, "flight must be a URL"),
        ({"bootstrap_servers": "h:1", "read_committed": False}, "read_committed=False reads"),
        ({"data_dir": tmp_path, "storage_options": {"region": "x"}}, "storage_options= was given without"),
        ({"bootstrap_servers": "h:1", "security": {"sasl.pasword": "x"}}, "unknown security setting"),
    ]:
        with pytest.raises(ValueError, match=message):
            ReadOptions(**options)
        if "read_committed" not in options:  # not a public keyword
            with pytest.raises(ValueError, match=message):
                pylog.scan_topic("t", **options)


def test_options_are_frozen_and_replaced_whole(tmp_path: Path) -> None:
    options = ReadOptions(data_dir=tmp_path, partitions=[1, "0"], columns=["offset"])
    assert options.partitions == (1, 0) and options.output_columns == ["offset"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.columns = ["key"]  # type: ignore[misc]
    with pytest.raises(ValueError, match="transport must be"):
        options.replace(transport="nope")  # a change is checked like the rest
    narrowed = options.replace(include_headers=True)
    assert narrowed.output_columns == ["offset", "headers"] and narrowed.discovered is options.discovered
    assert options.replace(bootstrap_servers="h:1", data_dir=None).discovered is not options.discovered


def test_a_scan_and_the_spark_source_carry_one_options_object(tmp_path: Path) -> None:
    scan = pylog.scan_topic("t", data_dir=tmp_path, columns=["key", "offset"])
    assert isinstance(scan.options, ReadOptions) and scan.columns == ["key", "offset"]
    assert scan.select("offset").options is scan.options
    spark = SparkReadOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "t",
                                    "includeHeaders": "true", "schema.registry.url": "http://r"},
                                   streaming=False)
    sdk = spark.sdk()
    assert (sdk.bootstrap_servers, sdk.include_headers, sdk.schema_registry_url, sdk.transport) == \
        ("h:1", True, "http://r", "auto")
    assert pickle.loads(pickle.dumps(spark)) == spark  # it travels to Spark's Python workers
