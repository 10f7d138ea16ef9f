"""Every Apache Kafka broker and topic config name through real admin clients and the command line.

AlterConfigs / IncrementalAlterConfigs accept any Kafka config name (stored in the metadata log,
described back with its source and synonyms, logged once as not acted on when pylog ignores it);
names in neither pylog's nor Kafka's list stay INVALID_CONFIG. ``pylog broker --config`` stops on a
typo with a suggestion, warns about Kafka names it ignores and refuses bad values.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compat_broker import BrokerProcess, pylog_command

RELOGIN = "sasl.kerberos.min.time.before.relogin"  # per-broker in Kafka, not implemented by pylog
NOT_ACTED_ON = f"{RELOGIN} is an Apache Kafka config that pylog stores but does not act on"


@pytest.fixture
def kp_admin(broker: BrokerProcess) -> Iterator[Any]:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    yield admin
    admin.close()


def _node(admin: Any) -> str:
    return str(admin.describe_cluster()["brokers"][0]["broker_id"])


def _broker_config(admin: Any, node: str, name: str) -> dict[str, Any]:
    from kafka.admin import ConfigResource, ConfigResourceType

    res = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, node, configs={name: None})],
                                 include_synonyms=True, config_filter="all")
    return res["broker"][node][name]


def test_kafka_python_sets_a_kafka_broker_config_pylog_does_not_implement(
    broker: BrokerProcess, kp_admin: Any
) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    node = _node(kp_admin)
    for value, incremental in (("58000", False), ("59000", True)):
        resource = ConfigResource(ConfigResourceType.BROKER, node, configs={RELOGIN: value})
        res = kp_admin.alter_configs([resource], incremental=incremental, raise_on_unknown=False)
        assert res["broker"][node] == "OK"
        entry = _broker_config(kp_admin, node, RELOGIN)
        assert entry["value"] == value and entry["config_source"] == "DYNAMIC_BROKER_CONFIG"
        assert entry["synonyms"] == [
            {"name": RELOGIN, "value": value, "source": "DYNAMIC_BROKER_CONFIG"},
            {"name": RELOGIN, "value": "60000", "source": "DEFAULT_CONFIG"},
        ]
    assert broker.log_text().count(NOT_ACTED_ON) == 1  # flagged once, not on every change


def test_kafka_python_sensitive_kafka_config_is_described_without_its_value(kp_admin: Any) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    node = _node(kp_admin)
    entry = _broker_config(kp_admin, node, "ssl.key.password")
    assert entry["is_sensitive"] and entry["value"] is None
    # pylog reads its TLS material at start: changing it at run time is refused, as Kafka refuses
    # read-only configs, instead of being stored and silently not applied
    res = kp_admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, node, configs={
        "ssl.key.password": "secret"})], incremental=True, raise_on_unknown=False)
    assert "Cannot update these configs dynamically: {ssl.key.password}" in res["broker"][node]
    res = kp_admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, node, configs={
        "log.cleaner.io.buffer.size": "1048576"})], incremental=True, raise_on_unknown=False)
    assert res["broker"][node] == "OK"
    entry = _broker_config(kp_admin, node, "log.cleaner.io.buffer.size")
    assert entry["value"] == "1048576" and not entry["is_sensitive"]


def test_unknown_and_read_only_names_are_refused(kp_admin: Any) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    node = _node(kp_admin)
    typo = RELOGIN.replace("relogin", "relogn")
    res = kp_admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, node, configs={typo: "1"})],
                                 incremental=False, raise_on_unknown=False)
    assert "InvalidConfigurationError" in res["broker"][node]
    assert f"Unknown broker config name: {typo} (did you mean {RELOGIN}?)" in res["broker"][node]
    res = kp_admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, node, configs={
        "delegation.token.expiry.time.ms": "1000"})], incremental=True, raise_on_unknown=False)
    assert "Cannot update these configs dynamically: {delegation.token.expiry.time.ms}" in res["broker"][node]


def test_aiokafka_alters_kafka_broker_and_topic_configs(broker: BrokerProcess, kp_admin: Any,
                                                        topic_name: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    node = _node(kp_admin)

    async def run() -> tuple[list[Any], list[Any], list[Any], list[Any]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic_name, 1, 1)])
            topic = await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name, configs={
                "remote.storage.enable": "false", "local.retention.ms": "60000"})])
            brok = await admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, node, configs={
                "sasl.kerberos.ticket.renew.jitter": "0.1"})])
            bad = await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name, configs={
                "remote.storage.enabled": "false"})])
            described = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)],
                                                     include_synonyms=True)
            return topic, brok, bad, described
        finally:
            await admin.close()

    topic, brok, bad, described = asyncio.run(run())
    results = [r for resp in topic + brok for r in resp.resources]
    assert [r[0] for r in results] == [0, 0]  # error codes
    bad_results = [r for resp in bad for r in resp.resources]
    assert bad_results[0][0] == 40 and "did you mean remote.storage.enable" in bad_results[0][1]
    entries = {e[0]: e for resp in described for r in resp.resources for e in r[4]}
    assert entries["remote.storage.enable"][1] == "false" and entries["remote.storage.enable"][3] == 1
    assert entries["local.retention.ms"][1] == "60000" and entries["local.retention.ms"][3] == 1
    assert entries["compression.zstd.level"][1] == "3" and entries["compression.zstd.level"][3] == 5


def test_kafka_configs_are_kept_in_the_metadata_log(own_broker: BrokerProcess) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=own_broker.bootstrap, request_timeout_ms=20000)
    node = _node(admin)
    admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, node, configs={RELOGIN: "61000"})],
                        raise_on_unknown=False)
    admin.close()
    own_broker.restart()
    admin = KafkaAdminClient(bootstrap_servers=own_broker.bootstrap, request_timeout_ms=20000)
    try:
        entry = _broker_config(admin, node, RELOGIN)
    finally:
        admin.close()
    assert entry["value"] == "61000" and entry["config_source"] == "DYNAMIC_BROKER_CONFIG"


# ------------------------------------------------------------------------------- pylog broker --config


def _start_refused(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [*pylog_command(), "broker", "--data-dir", str(tmp_path / "data"), "--listen", "127.0.0.1:0", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


def test_cli_typo_in_a_config_name_stops_the_start(tmp_path: Path) -> None:
    out = _start_refused(tmp_path, "--config", "num.partition=3")
    assert out.returncode == 2, out
    assert "unknown config 'num.partition'" in out.stderr and "did you mean num.partitions?" in out.stderr
    assert "listening" not in out.stdout
    assert not (tmp_path / "data").exists()  # nothing created for a refused start


def test_cli_bad_value_stops_the_start(tmp_path: Path) -> None:
    out = _start_refused(tmp_path, "--config", "num.partitions=many")
    assert out.returncode == 2 and "Invalid value 'many' for configuration num.partitions" in out.stderr
    out = _start_refused(tmp_path, "--config", "sasl.kerberos.ticket.renew.jitter=lots")
    assert out.returncode == 2 and "sasl.kerberos.ticket.renew.jitter" in out.stderr


def test_cli_data_dir_that_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("not a directory")
    cmd = [*pylog_command(), "broker", "--data-dir", str(path), "--listen", "127.0.0.1:0"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2 and f"data directory {path} is not a directory" in out.stderr
    assert "Errno" not in out.stderr


def test_cli_kafka_config_is_accepted_with_a_warning(tmp_path: Path) -> None:
    from kafka.admin import KafkaAdminClient

    b = BrokerProcess(tmp_path / "data", tmp_path / "broker.log",
                      config={RELOGIN: "45000", "retention.ms": "1000", "num.partitions": "2"})
    try:
        b.start()
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=20000)
        try:
            entry = _broker_config(admin, _node(admin), RELOGIN)
        finally:
            admin.close()
        log = b.log_text()
    finally:
        b.close()
    assert entry["value"] == "45000" and entry["config_source"] == "STATIC_BROKER_CONFIG"
    assert NOT_ACTED_ON in log
    assert "retention.ms is a topic config, not a broker config" in log
    assert log.count("listening on") == 1  # the ready line, once
