"""The remote tier's configs: Kafka's names, defaults and refusals at CreateTopics and
IncrementalAlterConfigs (compacted topics, a broker without the remote tier, local retention
beyond retention)."""

from __future__ import annotations

import random
import uuid

import pytest
from pylog.protocol.errors import ErrorCode
from pylog.storage import LogConfig

from pylog.cluster.controller import (
    AlterableConfig,
    AlterConfigOp,
    IncrementalAlterConfigsResource,
    NewTopic,
    QuorumController,
)
from pylog.cluster.records import BrokerEndpoint, ConfigResourceType
from pylog.config import BrokerConfig, ConfigError
from pylog.tiered.settings import RemoteTierSettings

TOPIC = ConfigResourceType.TOPIC


def controller(*, tiered: bool) -> QuorumController:
    settings = BrokerConfig({"remote.log.storage.system.enable": "true"} if tiered else {})
    c = QuorumController(rng=random.Random(1), broker_settings=settings.raw)
    res = c.register_broker(1, uuid.UUID(int=1), [BrokerEndpoint("PLAINTEXT", "localhost", 9091)])
    assert res.response.error_code == ErrorCode.NONE
    c.broker_heartbeat(1, 1, 10**9, want_fence=False, want_shutdown=False, now_ms=0)
    return c


def create(c: QuorumController, configs: dict[str, str]) -> tuple[int, str | None]:
    r = c.create_topics([NewTopic("t", 1, 1, configs=configs)]).response[0]
    return r.error_code, r.error_message


def alter(c: QuorumController, **ops: str | None) -> tuple[int, str | None]:
    items = [AlterableConfig(k.replace("_", "."), AlterConfigOp.DELETE if v is None else AlterConfigOp.SET, v)
             for k, v in ops.items()]
    r = c.incremental_alter_configs([IncrementalAlterConfigsResource(TOPIC, "t", items)]).response[0]
    return r.error_code, r.error_message


def test_remote_storage_needs_the_broker_side() -> None:
    code, message = create(controller(tiered=False), {"remote.storage.enable": "true"})
    assert code == ErrorCode.INVALID_CONFIG
    assert message == ("Tiered Storage functionality is disabled in the broker. "
                       "Topic cannot be configured with remote log storage.")
    assert create(controller(tiered=True), {"remote.storage.enable": "true"}) == (ErrorCode.NONE, None)


@pytest.mark.parametrize("policy", ["compact", "delete,compact"])
def test_compacted_topics_are_refused_remote_storage(policy: str) -> None:
    c = controller(tiered=True)
    code, message = create(c, {"remote.storage.enable": "true", "cleanup.policy": policy})
    assert code == ErrorCode.INVALID_CONFIG
    assert message is not None and "cleanup.policy=delete" in message
    assert create(c, {"cleanup.policy": policy})[0] == ErrorCode.NONE
    assert alter(c, remote_storage_enable="true")[0] == ErrorCode.INVALID_CONFIG


def test_alter_turns_remote_on_and_refuses_turning_it_off_silently() -> None:
    c = controller(tiered=True)
    assert create(c, {})[0] == ErrorCode.NONE
    assert alter(c, remote_storage_enable="true") == (ErrorCode.NONE, None)
    assert c.image.topic_configs("t")["remote.storage.enable"] == "true"
    assert alter(c, cleanup_policy="compact")[0] == ErrorCode.INVALID_CONFIG
    code, message = alter(c, remote_storage_enable="false")
    assert code == ErrorCode.INVALID_CONFIG
    assert message is not None and "remote.log.delete.on.disable" in message


def test_local_retention_within_retention() -> None:
    c = controller(tiered=True)
    code, message = create(c, {"retention.ms": "1000", "local.retention.ms": "2000"})
    assert code == ErrorCode.INVALID_CONFIG
    assert message == ("Invalid value 2000 for configuration local.retention.ms: Value must not be more "
                       "than retention.ms property value: 1000")
    assert create(c, {"retention.bytes": "100", "local.retention.bytes": "50"})[0] == ErrorCode.NONE
    assert alter(c, local_retention_bytes="-3")[0] == ErrorCode.INVALID_CONFIG
    assert alter(c, local_retention_bytes="101")[0] == ErrorCode.INVALID_CONFIG


def test_log_config_reads_the_remote_configs() -> None:
    c = LogConfig.from_kafka({"remote.storage.enable": "true", "retention.ms": "100",
                              "local.retention.ms": "-2", "local.retention.bytes": "7"})
    assert c.remote_storage_enable and c.effective_local_retention_ms == 100
    assert c.effective_local_retention_bytes == 7
    assert c.to_kafka()["remote.storage.enable"] == "true"
    with pytest.raises(ValueError):
        LogConfig.from_kafka({"remote.storage.enable": "yes"})
    assert BrokerConfig().topic_configs({})["local.retention.ms"] == "-2"


def test_broker_settings_refuse_a_missing_or_bad_store_uri(tmp_path: object) -> None:
    assert RemoteTierSettings.from_config(BrokerConfig()) is None
    with pytest.raises(ConfigError, match=r"remote\.log\.storage\.uri"):
        RemoteTierSettings.from_config(BrokerConfig({"remote.log.storage.system.enable": "true"}))
    with pytest.raises(ConfigError, match=r"remote\.log\.storage\.uri"):
        RemoteTierSettings.from_config(BrokerConfig({"remote.log.storage.system.enable": "true",
                                                     "remote.log.storage.uri": "ftp://x/y"}))
    s = RemoteTierSettings.from_config(BrokerConfig({
        "remote.log.storage.system.enable": "true", "remote.log.storage.uri": "s3://b/p",
        "remote.log.storage.s3.endpoint": "http://127.0.0.1:1", "remote.log.storage.s3.region": "eu-west-1",
        "remote.log.reader.grace.ms": "5"}))
    assert s is not None and s.uri == "s3://b/p" and s.grace_ms == 5
    assert s.store_options == {"endpoint_url": "http://127.0.0.1:1", "region": "eu-west-1",
                               "request_timeout_s": "30.0"}


def test_local_retention_is_compared_with_retention_in_milliseconds() -> None:
    """retention.ms falls back to log.retention.hours (168 by default): 7 days, not 168 ms."""
    from pylog.cluster.config_control import ConfigValidationError, validate_topic_set

    broker = {"log.retention.hours": "168"}.get
    validate_topic_set({"local.retention.ms": "60000"}, broker)
    with pytest.raises(ConfigValidationError, match=r"must not be more than retention\.ms"):
        validate_topic_set({"local.retention.ms": str(8 * 24 * 3_600_000)}, broker)
