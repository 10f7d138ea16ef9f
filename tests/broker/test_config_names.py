"""Config names: pylog's definitions against Apache Kafka's table, and what `--config` accepts."""

from __future__ import annotations

import difflib

import pytest

from pylog import kafka_configs as kafka
from pylog.config import (
    ALL_BROKER_CONFIGS,
    ALL_TOPIC_CONFIGS,
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigType,
    broker_config_def,
    check_static_broker_configs,
    validate_topic_configs,
)

# Kafka types these string and splits them itself; pylog types them list
LIST_IN_PYLOG = {
    "listeners", "advertised.listeners", "listener.security.protocol.map", "controller.listener.names"}


def test_names_pylog_defines_beyond_kafka_are_not_misspelt_kafka_names() -> None:
    """pylog's own names (pylog.*), Confluent's (schema registry) and other Kafka versions' are fine;
    a near miss of a Kafka name is a typo."""
    defined = {*BROKER_CONFIGS, *TOPIC_CONFIGS}
    kafka_names = [*kafka.BROKER_CONFIGS, *kafka.TOPIC_CONFIGS]
    extra = {n for n in defined if n not in kafka_names}
    assert "num.partitions" not in extra and "retention.ms" not in extra
    near_misses = {n: difflib.get_close_matches(n, kafka_names, n=1, cutoff=0.9) for n in extra}
    assert {n: m for n, m in near_misses.items() if m} == {}
    assert len(kafka.BROKER_CONFIGS) > 300 and len(kafka.TOPIC_CONFIGS) == 33


def test_pylog_definitions_have_kafka_types() -> None:
    types = {"int": ConfigType.INT, "long": ConfigType.LONG, "short": ConfigType.SHORT,
             "string": ConfigType.STRING, "list": ConfigType.LIST, "boolean": ConfigType.BOOLEAN,
             "double": ConfigType.DOUBLE, "class": ConfigType.CLASS, "password": ConfigType.PASSWORD}
    for name, (kind, _default, mode) in kafka.BROKER_CONFIGS.items():
        assert mode in (kafka.READ_ONLY, kafka.PER_BROKER, kafka.CLUSTER_WIDE), name
        if name in BROKER_CONFIGS and name not in LIST_IN_PYLOG:
            assert BROKER_CONFIGS[name].type is types[kind], name
    for name, (kind, default, synonym) in kafka.TOPIC_CONFIGS.items():
        assert ALL_TOPIC_CONFIGS[name].type is types[kind], name
        assert ALL_TOPIC_CONFIGS[name].default == default, name
        assert synonym is None or synonym in ALL_BROKER_CONFIGS, name


def test_every_kafka_name_is_known_and_only_pylogs_are_acted_on() -> None:
    assert set(kafka.BROKER_CONFIGS) <= set(ALL_BROKER_CONFIGS)
    assert set(kafka.TOPIC_CONFIGS) <= set(ALL_TOPIC_CONFIGS)
    assert BROKER_CONFIGS["num.partitions"].acted_on
    relogin = ALL_BROKER_CONFIGS["sasl.kerberos.min.time.before.relogin"]
    assert not relogin.acted_on and relogin.type is ConfigType.LONG and relogin.default == "60000"
    assert ALL_BROKER_CONFIGS["delegation.token.expiry.time.ms"].read_only  # Kafka: read-only
    prefixed = broker_config_def("listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config")
    assert prefixed is not None and prefixed.type is ConfigType.PASSWORD and prefixed.acted_on  # SASL
    assert broker_config_def("listener.name.internal.no.such.config") is None


def test_static_configs_typo_stops_the_start_with_a_suggestion() -> None:
    with pytest.raises(ConfigError, match=r"num\.partition'.*did you mean num\.partitions\?"):
        check_static_broker_configs({"num.partition": "3"})
    with pytest.raises(ConfigError, match=r"unknown config 'totally\.made\.up'") as err:
        check_static_broker_configs({"totally.made.up": "1"})
    assert "did you mean" not in str(err.value)


def test_static_configs_bad_values_stop_the_start() -> None:
    with pytest.raises(ConfigError, match=r"Invalid value 'many' for configuration num\.partitions"):
        check_static_broker_configs({"num.partitions": "many"})
    with pytest.raises(ConfigError, match=r"background\.threads"):
        check_static_broker_configs({"background.threads": "lots"})  # a Kafka config pylog ignores
    with pytest.raises(ConfigError, match="String must be one of"):
        check_static_broker_configs({"ssl.client.auth": "sometimes"})


def test_static_configs_kafka_only_names_are_kept_and_topic_names_are_left_out() -> None:
    accepted, warnings = check_static_broker_configs(
        {"num.partitions": "3", "sasl.kerberos.min.time.before.relogin": "5000", "retention.ms": "1"})
    assert accepted == {"num.partitions": "3", "sasl.kerberos.min.time.before.relogin": "5000"}
    assert warnings == ["retention.ms is a topic config, not a broker config: set it per topic; "
                        "its broker-wide default is log.retention.ms"]
    described = {r.name: r for r in BrokerConfig(accepted).describe()}
    entry = described["sasl.kerberos.min.time.before.relogin"]
    assert entry.value == "5000" and entry.source is ConfigSource.STATIC_BROKER_CONFIG
    default = ("sasl.kerberos.min.time.before.relogin", "60000", ConfigSource.DEFAULT_CONFIG)
    assert entry.synonyms[-1] == default
    assert len(described) >= len(kafka.BROKER_CONFIGS)


def test_kafka_only_topic_configs_take_their_broker_default() -> None:
    cfg = BrokerConfig({"log.local.retention.ms": "1000"})
    resolved = {r.name: r for r in cfg.describe_topic({"remote.storage.enable": "false"})}
    assert resolved["local.retention.ms"].value == "1000"
    assert resolved["local.retention.ms"].source is ConfigSource.STATIC_BROKER_CONFIG
    assert resolved["remote.storage.enable"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    validate_topic_configs({"remote.storage.enable": "true", "compression.zstd.level": "5"})
    with pytest.raises(ConfigError, match=r"did you mean retention\.ms"):
        validate_topic_configs({"retention.mss": "5"})
