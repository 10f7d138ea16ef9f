"""Configs of Kafka's GROUP (32) and CLIENT_METRICS (16) resources: names, types, defaults and
validation (sans-IO).

A GROUP resource overrides, for one group, the broker-wide ``group.*`` setting it names
(``consumer.session.timeout.ms`` <- ``group.consumer.session.timeout.ms``); the overrides are
ConfigRecords of resource type GROUP in the metadata log, which the group and share coordinators
read. Values are checked as Kafka's GroupConfig checks them: each within the broker's min/max
bounds, session timeouts above heartbeat intervals. A CLIENT_METRICS resource is a telemetry
subscription (KIP-714): ``metrics`` (name prefixes), ``interval.ms`` (100 ms to 1 hour) and
``match`` (``selector=regex`` pairs on the client's identity).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pylog.config import ConfigType
from pylog.protocol.errors import ErrorCode


class ConfigValidationError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ResourceConfigDef:
    name: str
    type: ConfigType
    default: str  # a GROUP config's default is the broker setting ``broker_name`` when that is set
    broker_name: str | None = None
    at_least: int | None = None
    choices: tuple[str, ...] = ()
    acted_on: bool = True
    doc: str = ""


_INT, _STR, _BOOL, _LIST = ConfigType.INT, ConfigType.STRING, ConfigType.BOOLEAN, ConfigType.LIST

GROUP_CONFIGS: dict[str, ResourceConfigDef] = {
    d.name: d
    for d in (
        ResourceConfigDef(
            "consumer.session.timeout.ms", _INT, "45000", "group.consumer.session.timeout.ms", 1
        ),
        ResourceConfigDef(
            "consumer.heartbeat.interval.ms", _INT, "5000", "group.consumer.heartbeat.interval.ms", 1
        ),
        ResourceConfigDef("share.session.timeout.ms", _INT, "45000", "group.share.session.timeout.ms", 1),
        ResourceConfigDef(
            "share.heartbeat.interval.ms", _INT, "5000", "group.share.heartbeat.interval.ms", 1
        ),
        ResourceConfigDef(
            "share.record.lock.duration.ms", _INT, "30000", "group.share.record.lock.duration.ms", 1000
        ),
        ResourceConfigDef("share.delivery.count.limit", _INT, "5", "group.share.delivery.count.limit", 2),
        ResourceConfigDef(
            "share.partition.max.record.locks", _INT, "2000", "group.share.partition.max.record.locks", 100
        ),
        ResourceConfigDef(
            "share.auto.offset.reset", _STR, "latest", "share.auto.offset.reset", doc="earliest, latest"
        ),
        ResourceConfigDef(
            "share.isolation.level",
            _STR,
            "read_uncommitted",
            choices=("read_committed", "read_uncommitted"),
        ),
        ResourceConfigDef("share.renew.acknowledge.enable", _BOOL, "true", acted_on=False),
        ResourceConfigDef("streams.session.timeout.ms", _INT, "45000", "group.streams.session.timeout.ms", 1),
        ResourceConfigDef(
            "streams.heartbeat.interval.ms",
            _INT,
            "5000",
            "group.streams.heartbeat.interval.ms",
            1,
        ),
        ResourceConfigDef(
            "streams.num.standby.replicas", _INT, "0", "group.streams.num.standby.replicas", 0, acted_on=False
        ),
        ResourceConfigDef(
            "streams.initial.rebalance.delay.ms", _INT, "3000", "group.streams.initial.rebalance.delay.ms", 0
        ),
    )
}

# (group config, lower-bound broker setting, upper-bound broker setting) as Kafka's GroupConfig
# validates them: consumer.session.timeout.ms lies within group.consumer.{min,max}.session.timeout.ms.
_BOUNDED = (
    "consumer.heartbeat.interval.ms",
    "consumer.session.timeout.ms",
    "share.heartbeat.interval.ms",
    "share.session.timeout.ms",
    "share.record.lock.duration.ms",
    "streams.heartbeat.interval.ms",
    "streams.session.timeout.ms",
)


def _bounds(name: str) -> tuple[str, str | None, str]:
    kind, rest = name.split(".", 1)
    return name, f"group.{kind}.min.{rest}", f"group.{kind}.max.{rest}"


_GROUP_BOUNDS: tuple[tuple[str, str | None, str], ...] = (
    *(_bounds(n) for n in _BOUNDED),
    ("streams.num.standby.replicas", None, "group.streams.max.standby.replicas"),
)
_SESSION_OVER_HEARTBEAT = (
    ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
    ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"),
)
BROKER_GROUP_SETTINGS = tuple(
    sorted(
        {d.broker_name for d in GROUP_CONFIGS.values() if d.broker_name}
        | {b for _, lo, hi in _GROUP_BOUNDS for b in (lo, hi) if b}
    )
)
"""The broker settings group configs default to or are bounded by."""

MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
CLIENT_SELECTORS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)
CLIENT_METRICS_CONFIGS: dict[str, ResourceConfigDef] = {
    d.name: d
    for d in (
        ResourceConfigDef("metrics", _LIST, "", doc="Metric name prefixes the subscription asks for."),
        ResourceConfigDef("interval.ms", _INT, "300000", doc="How often matching clients push metrics."),
        ResourceConfigDef("match", _LIST, "", doc="selector=regex pairs a client must match."),
    )
}


# --------------------------------------------------------------------------- GROUP


def group_config_value(name: str, overrides: Mapping[str, str], broker: Callable[[str], str | None]) -> str:
    """The value of group config ``name``: the group's override, else the broker setting it
    defaults to, else Kafka's default."""
    if name in overrides:
        return overrides[name]
    d = GROUP_CONFIGS[name]
    value = broker(d.broker_name) if d.broker_name else None
    return value if value is not None else d.default


def validate_group_configs(
    group: str, configs: Mapping[str, str], broker: Callable[[str], str | None]
) -> None:
    """Check a group's whole override set (``broker`` reads the validating node's settings)."""
    if not group:
        raise ConfigValidationError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise ConfigValidationError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
    values = {name: group_config_value(name, configs, broker) for name in GROUP_CONFIGS}
    ints: dict[str, int] = {}
    for name, d in GROUP_CONFIGS.items():
        value = values[name]
        if d.type is _INT:
            try:
                ints[name] = int(value.strip())
            except ValueError:
                raise _invalid(name, value, "Not a number of type INT") from None
            if d.at_least is not None and ints[name] < d.at_least:
                raise _invalid(name, value, f"Value must be at least {d.at_least}")
        elif d.type is _BOOL and value.strip().lower() not in ("true", "false"):
            raise _invalid(name, value, "Expected value to be either true or false")
        elif d.choices and value not in d.choices:
            raise _invalid(name, value, "String must be one of: " + ", ".join(d.choices))
        elif name == "share.auto.offset.reset":
            _check_auto_offset_reset(value)
    for name, lo_name, hi_name in _GROUP_BOUNDS:
        lo = _int_or_none(broker(lo_name)) if lo_name else None
        hi = _int_or_none(broker(hi_name))
        if lo is not None and ints[name] < lo:
            raise ConfigValidationError(
                ErrorCode.INVALID_CONFIG, f"{name} must be greater than or equal to {lo_name}"
            )
        if hi is not None and ints[name] > hi:
            raise ConfigValidationError(
                ErrorCode.INVALID_CONFIG, f"{name} must be less than or equal to {hi_name}"
            )
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if ints[session] <= ints[heartbeat]:
            raise ConfigValidationError(
                ErrorCode.INVALID_CONFIG, f"{session} must be greater than {heartbeat}"
            )


def _check_auto_offset_reset(value: str) -> None:
    low = value.strip().lower()
    if low in ("earliest", "latest"):
        return
    if low.startswith("by_duration:"):
        try:
            iso_duration_ms(low.removeprefix("by_duration:"))
            return
        except ValueError:
            pass
    why = "must be earliest, latest or by_duration:<ISO-8601 duration>"
    raise _invalid("share.auto.offset.reset", value, why)


def iso_duration_ms(text: str) -> int:
    """An ISO-8601 duration of days, hours, minutes and seconds (``P1DT2H3M4.5S``) in ms, as
    ``share.auto.offset.reset=by_duration:`` takes it; ValueError for anything else."""
    m = _DURATION.fullmatch(text.strip().upper())
    if m is None or not any(m.groups()):
        raise ValueError(f"not an ISO-8601 duration: {text}")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?")


def _invalid(name: str, value: str, why: str) -> ConfigValidationError:
    return ConfigValidationError(
        ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: {why}"
    )


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


# --------------------------------------------------------------------------- CLIENT_METRICS


def validate_client_metrics(name: str, configs: Mapping[str, str]) -> None:
    """Kafka's ClientMetricsConfigs.validate."""
    if not name:
        raise ConfigValidationError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key in configs:
        if key not in CLIENT_METRICS_CONFIGS:
            raise ConfigValidationError(
                ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}"
            )
    if "interval.ms" in configs:
        raw = configs["interval.ms"]
        try:
            interval = int(raw)
        except ValueError:
            raise ConfigValidationError(
                ErrorCode.INVALID_CONFIG, f"Invalid value {raw} for configuration interval.ms"
            ) from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise ConfigValidationError(
                ErrorCode.INVALID_REQUEST,
                f"Invalid value {interval} for interval.ms, "
                "interval must be between 100 and 3600000 (1 hour)",
            )
    for pattern in _items(configs.get("match", "")):
        selector, sep, regex = pattern.partition("=")
        if not sep or not selector.strip() or not regex.strip():
            raise ConfigValidationError(
                ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}"
            )
        if selector.strip() not in CLIENT_SELECTORS:
            raise ConfigValidationError(
                ErrorCode.INVALID_CONFIG, f"Invalid client selector {selector.strip()}"
            )
        try:
            re.compile(regex.strip())
        except re.error:
            raise ConfigValidationError(
                ErrorCode.INVALID_CONFIG, f"Illegal regex pattern: {regex.strip()}"
            ) from None


def _items(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]
