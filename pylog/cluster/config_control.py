"""The controller's config commands, AlterConfigs and IncrementalAlterConfigs (Kafka's
ConfigurationControlManager), and the validation and resolution of config changes they use
(sans-IO).

Names, types and defaults come from ``pylog.config`` (pylog's definitions, and every other
Apache Kafka config name, which is accepted and stored but not acted on); this module adds
Kafka's value ranges and the semantics of
AlterConfigs (replace the whole set) and IncrementalAlterConfigs
(SET / DELETE / APPEND / SUBTRACT, where APPEND and SUBTRACT work on list configs
starting from the current value, the default when there is no override).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pylog.cluster.image import MetadataImage
from pylog.cluster.records import ConfigRecord, ConfigResourceType, MetadataRecord
from pylog.cluster.resource_configs import (
    CLIENT_METRICS_CONFIGS,
    GROUP_CONFIGS,
    ConfigValidationError,
    validate_client_metrics,
    validate_group_configs,
)
from pylog.config import (
    TOPIC_SYNONYMS,
    ConfigDef,
    ConfigError,
    ConfigType,
    broker_config_def,
    to_topic_units,
    topic_config_def,
    unknown_config_message,
)
from pylog.protocol.errors import ErrorCode


class AlterConfigOp(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class AlterableConfig:
    """One IncrementalAlterConfigs operation on a config key."""

    name: str
    op: int
    value: str | None = None


# Kafka's lower (and a few upper) bounds of topic config values (LogConfig's ConfigDef).
_TOPIC_RANGES: dict[str, tuple[float | None, float | None]] = {
    "segment.bytes": (14, None),
    "segment.ms": (1, None),
    "segment.jitter.ms": (0, None),
    "segment.index.bytes": (4, None),
    "flush.messages": (1, None),
    "flush.ms": (0, None),
    "retention.ms": (-1, None),
    "max.message.bytes": (0, None),
    "index.interval.bytes": (0, None),
    "delete.retention.ms": (0, None),
    "min.compaction.lag.ms": (0, None),
    "max.compaction.lag.ms": (1, None),
    "file.delete.delay.ms": (0, None),
    "min.cleanable.dirty.ratio": (0, 1),
    "min.insync.replicas": (1, None),
    "message.timestamp.before.max.ms": (0, None),
    "message.timestamp.after.max.ms": (0, None),
    "local.retention.ms": (-2, None),
    "local.retention.bytes": (-2, None),
    "compression.lz4.level": (1, 17),
    "compression.zstd.level": (-131072, 22),
}


def _definition(resource_type: int, name: str) -> ConfigDef:
    if resource_type in (ConfigResourceType.GROUP, ConfigResourceType.CLIENT_METRICS):
        group = resource_type == ConfigResourceType.GROUP
        r = (GROUP_CONFIGS if group else CLIENT_METRICS_CONFIGS).get(name)
        if r is None:
            if group:
                raise ConfigValidationError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
            raise ConfigValidationError(
                ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {name}"
            )
        return ConfigDef(r.name, r.type, r.default)
    if resource_type == ConfigResourceType.TOPIC:
        d = topic_config_def(name)
        if d is None:
            raise ConfigValidationError(ErrorCode.INVALID_CONFIG, unknown_config_message("topic", name))
        return d
    d = broker_config_def(name)
    if d is None:
        raise ConfigValidationError(ErrorCode.INVALID_CONFIG, unknown_config_message("broker", name))
    if d.read_only:
        raise ConfigValidationError(
            ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: {{{name}}}"
        )
    return d


def validate_value(resource_type: int, name: str, value: str | None) -> None:
    """Raise ConfigValidationError when ``name`` is unknown or ``value`` does not fit it."""
    d = _definition(resource_type, name)
    if value is None or resource_type in (ConfigResourceType.GROUP, ConfigResourceType.CLIENT_METRICS):
        return  # checked as a whole set (``validate_resource``)
    try:
        parsed = d.parse(value)
    except ConfigError as e:
        raise ConfigValidationError(ErrorCode.INVALID_CONFIG, str(e)) from None
    if d.choices:  # checked here too: ConfigDef.parse returns list values before checking choices
        bad = [p for p in value.split(",") if p.strip() not in d.choices]
        if bad:
            choices = ", ".join(d.choices)
            message = f"Invalid value {value} for configuration {name}: String must be one of: {choices}"
            raise ConfigValidationError(ErrorCode.INVALID_CONFIG, message)
    bounds = _TOPIC_RANGES.get(name) if resource_type == ConfigResourceType.TOPIC else None
    if bounds is not None and isinstance(parsed, (int, float)):
        lo, hi = bounds
        if (lo is not None and parsed < lo) or (hi is not None and parsed > hi):
            rng = f"at least {lo}" if hi is None else f"between {lo} and {hi}"
            raise ConfigValidationError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {value} for configuration {name}: Value must be {rng}",
            )


def validate_resource_name(resource_type: int, name: str) -> None:
    if resource_type == ConfigResourceType.BROKER:
        if name != "" and not (name.isdigit() and int(name) >= 0):
            raise ConfigValidationError(ErrorCode.INVALID_REQUEST, f"Invalid broker name {name!r}")
    elif resource_type not in (
        ConfigResourceType.TOPIC,
        ConfigResourceType.GROUP,
        ConfigResourceType.CLIENT_METRICS,
    ):
        raise ConfigValidationError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")


def validate_resource(
    resource_type: int, name: str, configs: Mapping[str, str], broker: Callable[[str], str | None]
) -> None:
    """Checks on a resource's whole override set after a change (GROUP and CLIENT_METRICS);
    ``broker`` reads the validating node's settings (the bounds of group configs)."""
    if resource_type == ConfigResourceType.GROUP:
        validate_group_configs(name, configs, broker)
    elif resource_type == ConfigResourceType.CLIENT_METRICS:
        validate_client_metrics(name, configs)


def replace_configs(
    resource_type: int, current: Mapping[str, str], configs: Mapping[str, str | None]
) -> dict[str, str | None]:
    """AlterConfigs: the new set replaces the old. Returns the changes (None = delete)."""
    for name, value in configs.items():
        if value is None:
            raise ConfigValidationError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
        validate_value(resource_type, name, value)
    changes: dict[str, str | None] = {k: None for k in current if k not in configs}
    changes.update({k: v for k, v in configs.items() if current.get(k) != v})
    return changes


def incremental_changes(
    resource_type: int, current: Mapping[str, str], ops: Sequence[AlterableConfig]
) -> dict[str, str | None]:
    """IncrementalAlterConfigs: apply the operations. Returns the changes (None = delete)."""
    seen: set[str] = set()
    changes: dict[str, str | None] = {}
    for op in ops:
        if op.name in seen:
            raise ConfigValidationError(ErrorCode.INVALID_REQUEST, f"Duplicate config key {op.name}")
        seen.add(op.name)
        d = _definition(resource_type, op.name)
        if op.op == AlterConfigOp.DELETE:
            changes[op.name] = None
            continue
        if op.op not in (AlterConfigOp.SET, AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
            raise ConfigValidationError(ErrorCode.INVALID_REQUEST, f"Unknown alter config operation {op.op}")
        if op.value is None:
            raise ConfigValidationError(
                ErrorCode.INVALID_REQUEST, f"Null value not supported for : {op.name}"
            )
        if op.op == AlterConfigOp.SET:
            new = op.value
        else:
            if d.type is not ConfigType.LIST:
                raise ConfigValidationError(
                    ErrorCode.INVALID_CONFIG,
                    f"Can't {AlterConfigOp(op.op).name} to key {op.name} because its type is not LIST.",
                )
            old = current.get(op.name, d.default)
            parts = [p.strip() for p in (old or "").split(",") if p.strip()]
            values = [v.strip() for v in op.value.split(",") if v.strip()]
            if op.op == AlterConfigOp.APPEND:
                parts += [v for v in values if v not in parts]
            else:
                parts = [p for p in parts if p not in values]
            new = ",".join(parts)
        validate_value(resource_type, op.name, new)
        changes[op.name] = new
    return {k: v for k, v in changes.items() if current.get(k) != v}


def validate_new_topic_configs(configs: Mapping[str, str | None]) -> None:
    for name, value in configs.items():
        if value is None:
            raise ConfigValidationError(
                ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {name}"
            )
        validate_value(ConfigResourceType.TOPIC, name, value)


_REMOTE_DISABLED = (
    "Tiered Storage functionality is disabled in the broker. "
    "Topic cannot be configured with remote log storage."
)
_REMOTE_COMPACTED = (
    "Remote log storage only supports topics with cleanup.policy=delete "
    "or cleanup.policy being an empty list."
)
_REMOTE_TURN_OFF = (
    "It is invalid to disable remote storage without deleting remote data. If you want to keep the remote "
    "data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. If "
    "you want to disable remote storage and delete all remote data, please set "
    "`remote.storage.enable=false,remote.log.delete.on.disable=true`."
)


def _topic_value(name: str, overrides: Mapping[str, str], broker: Callable[[str], str | None]) -> str | None:
    if name in overrides:
        return overrides[name]
    d = topic_config_def(name)
    for synonym in TOPIC_SYNONYMS.get(name, ()):
        value = broker(synonym)
        if value is not None:
            return to_topic_units(synonym, value)
    return d.default if d is not None else None


def validate_topic_set(
    overrides: Mapping[str, str],
    broker: Callable[[str], str | None],
    previous: Mapping[str, str] | None = None,
) -> None:
    """Checks across a topic's whole config set (Kafka's LogConfig.validate): the remote tier's
    rules and local retention within retention. ``broker`` reads the validating node's settings;
    ``previous`` is the set before an alteration (None at creation)."""
    def value(name: str, over: Mapping[str, str] = overrides) -> str | None:
        return _topic_value(name, over, broker)

    remote = (value("remote.storage.enable") or "false").lower() == "true"
    if remote:
        if (broker("remote.log.storage.system.enable") or "false").lower() != "true":
            raise ConfigValidationError(ErrorCode.INVALID_CONFIG, _REMOTE_DISABLED)
        policy = {p.strip().lower() for p in (value("cleanup.policy") or "").split(",") if p.strip()}
        if policy and policy != {"delete"}:
            raise ConfigValidationError(ErrorCode.INVALID_CONFIG, _REMOTE_COMPACTED)
    elif (
        previous is not None
        and (value("remote.storage.enable", previous) or "false").lower() == "true"
        and (value("remote.log.delete.on.disable") or "false").lower() != "true"
    ):
        raise ConfigValidationError(ErrorCode.INVALID_CONFIG, _REMOTE_TURN_OFF)
    pairs = (("local.retention.ms", "retention.ms"), ("local.retention.bytes", "retention.bytes"))
    for local, total in pairs:
        lv, tv = int(value(local) or -2), int(value(total) or -1)
        if lv == -2 or tv == -1:
            continue
        if lv == -1:
            raise ConfigValidationError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {lv} for configuration {local}: Value must not be -1 as {total} value "
                f"is set as {tv}",
            )
        if lv > tv:
            raise ConfigValidationError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {lv} for configuration {local}: Value must not be more than {total} "
                f"property value: {tv}",
            )


@dataclass(frozen=True)
class AlterConfigsResource:
    resource_type: int
    resource_name: str
    configs: Mapping[str, str | None]


@dataclass(frozen=True)
class IncrementalAlterConfigsResource:
    resource_type: int
    resource_name: str
    ops: Sequence[AlterableConfig]


@dataclass(frozen=True)
class ConfigResult:
    resource_type: int
    resource_name: str
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


class ConfigControl:
    """AlterConfigs and IncrementalAlterConfigs against the working image: each resource is
    validated whole (its merged overrides) and its changes handed to ``collect``."""

    def __init__(
        self,
        image: Callable[[], MetadataImage],
        collect: Callable[[list[MetadataRecord]], None],
        broker_settings: Callable[[str], str | None],
    ) -> None:
        self._image = image
        self._collect = collect
        self.broker_settings = broker_settings

    def alter_configs(
        self, resources: Sequence[AlterConfigsResource], validate_only: bool
    ) -> list[ConfigResult]:
        """AlterConfigs: each resource's overrides become exactly ``configs``."""
        return self._alter(
            [(r.resource_type, r.resource_name, r) for r in resources],
            lambda rt, cur, r: replace_configs(rt, cur, r.configs),
            validate_only,
        )

    def incremental_alter_configs(
        self, resources: Sequence[IncrementalAlterConfigsResource], validate_only: bool
    ) -> list[ConfigResult]:
        return self._alter(
            [(r.resource_type, r.resource_name, r) for r in resources],
            lambda rt, cur, r: incremental_changes(rt, cur, r.ops),
            validate_only,
        )

    def _alter(
        self, items: list[tuple[int, str, Any]], changes_of: Any, validate_only: bool
    ) -> list[ConfigResult]:
        counts = Counter((rt, name) for rt, name, _ in items)
        results = []
        for rt, name, req in items:
            try:
                if counts[(rt, name)] > 1:
                    raise ConfigValidationError(
                        ErrorCode.INVALID_REQUEST, f"Duplicate resource {name!r} in request"
                    )
                validate_resource_name(rt, name)
                if rt == ConfigResourceType.TOPIC and self._image().topic(name) is None:
                    raise ConfigValidationError(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist."
                    )
                current = self._image().configs(rt, name)
                changes = changes_of(rt, current, req)
                merged = {k: v for k, v in {**current, **changes}.items() if v is not None}
                validate_resource(rt, name, merged, self.broker_settings)
                if rt == ConfigResourceType.TOPIC:
                    validate_topic_set(merged, self.broker_settings, current)
            except ConfigValidationError as e:
                results.append(ConfigResult(rt, name, e.code, e.message))
                continue
            if not validate_only:
                self._collect([ConfigRecord(int(rt), name, k, v) for k, v in changes.items()])
            results.append(ConfigResult(rt, name))
        return results
