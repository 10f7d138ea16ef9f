"""Broker and topic configuration under Kafka's names, types and defaults.

Values are kept as Kafka keeps them: strings on the wire, typed here. A topic
config falls back to its broker synonym (``retention.ms`` <- ``log.retention.ms``
<- ``log.retention.minutes`` <- ``log.retention.hours``), so DescribeConfigs can
report the value, its source and the synonym chain exactly as Kafka does. The
definitions themselves are in ``pylog.config_defs``.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pylog.config_defs import (
    _LISTENER_PREFIX,
    ALL_BROKER_CONFIGS,
    ALL_TOPIC_CONFIGS,
    BROKER_CONFIGS,
    MECHANISM_SCOPED,
    TOPIC_CONFIGS,
    TOPIC_SYNONYMS,
    ConfigDef,
    ConfigError,
    ConfigSource,
    ConfigType,
    broker_config_def,
    check_static_broker_configs,
    note_not_acted_on,
    topic_config_def,
    unknown_config_message,
)

# Broker settings given in other units than the topic config they feed.
_UNIT_MS = {
    "log.retention.minutes": 60_000,
    "log.retention.hours": 3_600_000,
    "log.roll.hours": 3_600_000,
    "log.roll.jitter.hours": 3_600_000,
}


@dataclass(frozen=True)
class ResolvedConfig:
    """One config entry as DescribeConfigs reports it."""

    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    read_only: bool
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...]
    doc: str


class BrokerConfig:
    """Broker settings with Kafka's precedence: dynamic per-broker, dynamic cluster default,
    static (command line / --config), built-in default."""

    def __init__(self, overrides: Mapping[str, str] | None = None) -> None:
        self._static: dict[str, str] = {}
        self._dynamic_default: dict[str, str] = {}
        self._dynamic_broker: dict[str, str] = {}
        for name, value in (overrides or {}).items():
            self.set(name, value)

    def set(self, name: str, value: str) -> None:
        d = broker_config_def(name)
        if d is None:
            raise ConfigError(unknown_config_message("broker", name))
        d.parse(value)
        self._static[name] = value

    def listener_raw(self, listener: str, name: str, mechanism: str | None = None) -> str | None:
        """``name`` as ``listener`` sees it: listener.name.<listener>[.<mechanism>].<name>, else the
        broker-wide value (listener and mechanism names are lower-cased, as Kafka's prefix is)."""
        prefix = f"{_LISTENER_PREFIX}{listener.lower()}."
        if mechanism is not None:
            value = self._static.get(f"{prefix}{mechanism.lower()}.{name}")
            if value is not None or name in MECHANISM_SCOPED:
                return value
        value = self._static.get(prefix + name)
        return value if value is not None else self.raw(name)


    def set_dynamic(self, cluster_default: Mapping[str, str], this_broker: Mapping[str, str]) -> None:
        """Dynamic broker configs from the metadata log (unknown names are ignored)."""
        self._dynamic_default = {k: v for k, v in cluster_default.items() if broker_config_def(k)}
        self._dynamic_broker = {k: v for k, v in this_broker.items() if broker_config_def(k)}

    def _layers(self) -> tuple[tuple[dict[str, str], ConfigSource], ...]:
        return (
            (self._dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self._dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self._static, ConfigSource.STATIC_BROKER_CONFIG),
        )

    def _resolve(self, name: str) -> tuple[str | None, ConfigSource, tuple]:
        """Value, source and synonym chain of one broker config."""
        synonyms = [(name, layer[name], source) for layer, source in self._layers() if name in layer]
        default = _definition(name).default
        if default is not None:
            synonyms.append((name, default, ConfigSource.DEFAULT_CONFIG))
        if synonyms:
            return synonyms[0][1], synonyms[0][2], tuple(synonyms)
        return None, ConfigSource.DEFAULT_CONFIG, ()

    def raw(self, name: str) -> str | None:
        for layer, _ in self._layers():
            if name in layer:
                return layer[name]
        return _definition(name).default

    def get(self, name: str) -> object:
        return _definition(name).parse(self.raw(name))

    def int(self, name: str) -> int:
        v = self.get(name)
        assert isinstance(v, int), name
        return v

    def bool(self, name: str) -> bool:
        return bool(self.get(name))

    @property
    def node_id(self) -> builtins.int:  # the class scope's `int` is the method
        if "node.id" not in self._static and "broker.id" in self._static:
            return self.int("broker.id")
        return self.int("node.id")

    def describe(self, names: Iterable[str] | None = None) -> list[ResolvedConfig]:
        """Broker resource entries in Kafka's shape (value, source, synonyms)."""
        out = []
        if names is None:  # every config, plus listener-prefixed ones that were set
            names = sorted({*ALL_BROKER_CONFIGS, *(n for layer, _ in self._layers() for n in layer)})
        for name in names:
            d = broker_config_def(name)
            if d is None:
                continue
            value, source, synonyms = self._resolve(name)
            out.append(ResolvedConfig(name, value, source, d.type, d.read_only, synonyms, d.doc))
        return out

    # --- topic config resolution -------------------------------------------------------------

    def topic_default(self, name: str) -> tuple[str | None, ConfigSource, tuple]:
        """Value a topic without an override gets, with its source and synonym chain."""
        broker_names = TOPIC_SYNONYMS.get(name, ())
        synonyms = []
        for layer, source in self._layers():
            synonyms += [(b, layer[b], source) for b in broker_names if b in layer]
        synonyms += [
            (b, default, ConfigSource.DEFAULT_CONFIG)
            for b in broker_names
            if (default := ALL_BROKER_CONFIGS[b].default) is not None
        ]
        if synonyms:
            broker_name, raw, source = synonyms[0]
            return to_topic_units(broker_name, raw), source, tuple(synonyms)
        return ALL_TOPIC_CONFIGS[name].default, ConfigSource.DEFAULT_CONFIG, ()

    def topic_configs(self, overrides: Mapping[str, str]) -> dict[str, str]:
        """Effective topic configs: overrides over broker-derived defaults (all names)."""
        out: dict[str, str] = {}
        for name in TOPIC_CONFIGS:
            if name in overrides:
                out[name] = overrides[name]
            else:
                value = self.topic_default(name)[0]
                if value is not None:
                    out[name] = value
        return out

    def describe_topic(
        self, overrides: Mapping[str, str], names: Iterable[str] | None = None
    ) -> list[ResolvedConfig]:
        out = []
        for name in names if names is not None else sorted(ALL_TOPIC_CONFIGS):
            d = ALL_TOPIC_CONFIGS.get(name)
            if d is None:
                continue
            value, source, synonyms = self.topic_default(name)
            if name in overrides:
                value, source = overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
                synonyms = ((name, value, source), *synonyms)
            out.append(ResolvedConfig(name, value, source, d.type, False, synonyms, d.doc))
        return out


def _definition(name: str) -> ConfigDef:
    d = broker_config_def(name)
    if d is None:
        raise KeyError(name)
    return d


def to_topic_units(broker_name: str, raw: str) -> str:
    """A broker setting's value in the units of the topic config it is a synonym of
    (``log.retention.hours`` 168 -> ``retention.ms`` 604800000)."""
    factor = _UNIT_MS.get(broker_name)
    if factor is None:
        return raw
    n = int(raw)
    return str(n * factor if n >= 0 else n)


def validate_topic_configs(configs: Mapping[str, str | None]) -> None:
    """Raise ConfigError for unknown topic config names or badly typed values."""
    for name, value in configs.items():
        d = ALL_TOPIC_CONFIGS.get(name)
        if d is None:
            raise ConfigError(unknown_config_message("topic", name))
        if value is not None:
            d.parse(value)


def parse_key_values(items: Iterable[str]) -> dict[str, str]:
    """``["a=1", "b=x"]`` -> ``{"a": "1", "b": "x"}`` for --config flags."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"Expected KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out

__all__ = [
    "ALL_BROKER_CONFIGS",
    "ALL_TOPIC_CONFIGS",
    "BROKER_CONFIGS",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "ConfigDef",
    "ConfigError",
    "ConfigSource",
    "ConfigType",
    "ResolvedConfig",
    "broker_config_def",
    "check_static_broker_configs",
    "note_not_acted_on",
    "parse_key_values",
    "topic_config_def",
    "unknown_config_message",
    "validate_topic_configs",
]
