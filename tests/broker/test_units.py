"""Pure pieces of the broker: configuration, wire cache, CLI parsing, handler tables."""

from __future__ import annotations

import pytest

from pylog.broker.datapath.wire_cache import WireCache
from pylog.broker.network import handler_table
from pylog.cli import parse_host_port
from pylog.config import BrokerConfig, ConfigError, ConfigSource, validate_topic_configs


def test_topic_defaults_follow_broker_synonyms() -> None:
    cfg = BrokerConfig({"log.retention.hours": "2", "log.segment.bytes": "1000"})
    value, source, synonyms = cfg.topic_default("retention.ms")
    assert value == "7200000" and source == ConfigSource.STATIC_BROKER_CONFIG
    assert synonyms[0][0] == "log.retention.hours"
    resolved = {r.name: r for r in cfg.describe_topic({"segment.bytes": "5000"})}
    assert resolved["segment.bytes"].value == "5000"
    assert resolved["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert resolved["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG
    assert BrokerConfig({"log.retention.ms": "5"}).topic_configs({})["retention.ms"] == "5"


def test_bad_configs_are_refused() -> None:
    with pytest.raises(ConfigError):
        BrokerConfig({"num.partitions": "many"})
    with pytest.raises(ConfigError):
        BrokerConfig({"no.such.thing": "1"})
    with pytest.raises(ConfigError):
        validate_topic_configs({"cleanup.policy": "sometimes"})
    validate_topic_configs({"cleanup.policy": "compact,delete", "retention.ms": "-1"})


def test_host_port_forms() -> None:
    assert parse_host_port("0.0.0.0:0") == ("0.0.0.0", 0)
    assert parse_host_port("9093") == ("127.0.0.1", 9093)
    assert parse_host_port("[::1]:9092") == ("::1", 9092)
    assert parse_host_port("PLAINTEXT://host:1") == ("host", 1)


def test_wire_cache_serves_contiguous_tail_only() -> None:
    cache = WireCache(100)
    cache.add(0, 4, b"a" * 30)
    cache.add(5, 9, b"b" * 30)
    cache.add(10, 10, b"c" * 30)
    assert cache.get(7, 1000, 11) == [b"b" * 30, b"c" * 30]
    assert cache.get(7, 10, 11) == [b"b" * 30]  # at least one whole batch
    assert cache.get(7, 1000, 10) == [b"b" * 30]  # nothing at or past the high watermark
    cache.add(11, 11, b"d" * 30)  # evicts the oldest
    assert cache.get(2, 1000, 12) is None
    cache.add(20, 20, b"e")  # a gap clears it
    assert cache.get(11, 1000, 30) is None and cache.get(20, 1000, 30) == [b"e"]


def test_advertised_versions_start_at_zero() -> None:
    from pylog.broker.handlers import api_versions, fetch, produce

    specs = [handler_table.route(f) for f in (produce.produce, fetch.fetch, api_versions.api_versions)]
    table = handler_table.HandlerTable(specs, {0: (3, 13), 1: (4, 18), 18: (0, 4)})
    assert table.advertised == {0: (0, 10), 1: (0, 12), 18: (0, 4)}
    assert table.served_floor(0) == 3


def test_a_table_refuses_two_handlers_for_one_api() -> None:
    from pylog.broker.handlers import produce

    with pytest.raises(ValueError, match="two handlers"):
        twice = [handler_table.route(produce.produce), handler_table.route(produce.produce)]
        handler_table.HandlerTable(twice, {})
