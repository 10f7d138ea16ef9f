"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topic and broker resources.

Topic overrides live in the metadata log (config records); broker settings are
static (command line) and reported with their sources and synonyms. Changing
broker settings at run time is not supported and answered with INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.context import RequestContext
from pylog.broker.metadata import Outcome
from pylog.broker.registry import handles
from pylog.config import TOPIC_CONFIGS, ConfigError, ConfigType, ResolvedConfig, validate_topic_configs

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _entry(r: ResolvedConfig, synonyms: bool, docs: bool) -> dict:
    return {
        "name": r.name,
        "value": r.value,
        "read_only": r.read_only,
        "config_source": int(r.source),
        "is_sensitive": False,
        "synonyms": [{"name": n, "value": v, "source": int(s)} for n, v, s in r.synonyms] if synonyms else [],
        "config_type": int(r.type),
        "documentation": (r.doc or None) if docs else None,
    }


def _broker_name_ok(ctx: RequestContext, name: str) -> bool:
    return name == "" or name == str(ctx.broker.node_id)


@handles(ApiKey.DESCRIBE_CONFIGS, versions=(0, 4))
def describe_configs(ctx: RequestContext, req: Any) -> dict:
    cfg = ctx.broker.config
    md = ctx.broker.metadata
    synonyms = bool(getattr(req, "include_synonyms", False))
    docs = bool(getattr(req, "include_documentation", False))
    results = []
    for res in req.resources:
        keys = res.configuration_keys
        out: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": res.resource_type,
            "resource_name": res.resource_name,
            "configs": [],
        }
        if res.resource_type == TOPIC:
            info = md.topic(res.resource_name)
            if info is None:
                out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                out["error_message"] = f"Topic '{res.resource_name}' does not exist."
            else:
                out["configs"] = [_entry(r, synonyms, docs) for r in cfg.describe_topic(info.configs, keys)]
        elif res.resource_type == BROKER:
            if not _broker_name_ok(ctx, res.resource_name):
                out["error_code"] = ErrorCode.INVALID_REQUEST
                out["error_message"] = f"Unexpected broker id, expected {ctx.broker.node_id}"
            else:
                out["configs"] = [_entry(r, synonyms, docs) for r in cfg.describe(keys)]
        elif res.resource_type == BROKER_LOGGER:
            out["configs"] = []
        else:
            out["error_code"] = ErrorCode.INVALID_REQUEST
            out["error_message"] = f"Unsupported resource type {res.resource_type}"
        results.append(out)
    return {"throttle_time_ms": 0, "results": results}


def _check_topic(ctx: RequestContext, name: str, configs: dict[str, str | None]) -> Outcome:
    if ctx.broker.metadata.topic(name) is None:
        return Outcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
    try:
        validate_topic_configs(configs)
    except ConfigError as exc:
        return Outcome(ErrorCode.INVALID_CONFIG, str(exc))
    return Outcome()


def _broker_refusal(ctx: RequestContext, name: str) -> Outcome:
    if not _broker_name_ok(ctx, name):
        return Outcome(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {ctx.broker.node_id}")
    return Outcome(ErrorCode.INVALID_REQUEST, "Dynamic broker configs are not supported; use --config")


@handles(ApiKey.ALTER_CONFIGS, versions=(0, 2))
async def alter_configs(ctx: RequestContext, req: Any) -> dict:
    validate_only = bool(req.validate_only)
    responses = []
    for res in req.resources:
        changes = {c.name: c.value for c in res.configs}
        if res.resource_type == TOPIC:
            outcome = _check_topic(ctx, res.resource_name, changes)
            if outcome.ok:
                outcome = await ctx.broker.metadata.alter_topic_configs(
                    res.resource_name, changes, replace=True, validate_only=validate_only
                )
        elif res.resource_type == BROKER:
            outcome = _broker_refusal(ctx, res.resource_name)
        else:
            outcome = Outcome(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")
        responses.append(
            {
                "error_code": outcome.error,
                "error_message": outcome.message,
                "resource_type": res.resource_type,
                "resource_name": res.resource_name,
            }
        )
    return {"throttle_time_ms": 0, "responses": responses}


def incremental_changes(current: dict[str, str], ops: list[Any]) -> tuple[dict[str, str | None], Outcome]:
    """Kafka's SET / DELETE / APPEND / SUBTRACT applied to a topic's overrides -> changes to make."""
    changes: dict[str, str | None] = {}
    for op in ops:
        d = TOPIC_CONFIGS.get(op.name)
        if d is None:
            return {}, Outcome(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {op.name}")
        kind = op.config_operation
        if kind == SET:
            changes[op.name] = op.value
        elif kind == DELETE:
            changes[op.name] = None
        elif kind in (APPEND, SUBTRACT):
            if d.type is not ConfigType.LIST:
                return {}, Outcome(
                    ErrorCode.INVALID_CONFIG, f"Config value append is not allowed for config key: {op.name}"
                )
            base = changes.get(op.name, current.get(op.name, d.default))
            items = [v for v in (base or "").split(",") if v]
            values = [v.strip() for v in (op.value or "").split(",") if v.strip()]
            if kind == APPEND:
                items += [v for v in values if v not in items]
            else:
                items = [v for v in items if v not in values]
            changes[op.name] = ",".join(items)
        else:
            return {}, Outcome(ErrorCode.INVALID_REQUEST, f"Unknown config operation {kind}")
    return changes, Outcome()


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS, versions=(0, 1))
async def incremental_alter_configs(ctx: RequestContext, req: Any) -> dict:
    validate_only = bool(req.validate_only)
    md = ctx.broker.metadata
    responses = []
    for res in req.resources:
        if res.resource_type == TOPIC:
            info = md.topic(res.resource_name)
            if info is None:
                outcome = Outcome(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{res.resource_name}' does not exist."
                )
            else:
                changes, outcome = incremental_changes(dict(info.configs), list(res.configs))
                if outcome.ok:
                    outcome = _check_topic(ctx, res.resource_name, changes)
                if outcome.ok:
                    outcome = await md.alter_topic_configs(
                        res.resource_name, changes, replace=False, validate_only=validate_only
                    )
        elif res.resource_type == BROKER:
            outcome = _broker_refusal(ctx, res.resource_name)
        elif res.resource_type == BROKER_LOGGER:
            outcome = Outcome()
        else:
            outcome = Outcome(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")
        responses.append(
            {
                "error_code": outcome.error,
                "error_message": outcome.message,
                "resource_type": res.resource_type,
                "resource_name": res.resource_name,
            }
        )
    return {"throttle_time_ms": 0, "responses": responses}
