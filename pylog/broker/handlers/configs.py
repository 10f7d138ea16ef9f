"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topic and broker resources.

Overrides live in the metadata log as config records (the controller validates
and commits them); values are resolved here with Kafka's precedence and reported
with their sources and synonym chains. Every Apache Kafka config name is accepted;
the ones pylog does not act on are logged once when first stored. Passwords are
described as Kafka describes them: sensitive, without a value. A topic needs
DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, a broker on the cluster
(TOPIC_ / CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.acl_operations import AclOperation
from pylog.broker.authorization import Authorization
from pylog.broker.context import RequestContext
from pylog.broker.handler_table import serves
from pylog.broker.metadata import MetadataView
from pylog.cluster.controller import AlterableConfig, AlterConfigsResource, IncrementalAlterConfigsResource
from pylog.cluster.quorum import MetadataQuorum
from pylog.config import BrokerConfig, ConfigType, ResolvedConfig, note_not_acted_on

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8


def _entry(r: ResolvedConfig, synonyms: bool, docs: bool) -> dict:
    sensitive = r.type is ConfigType.PASSWORD
    return {
        "name": r.name,
        "value": None if sensitive else r.value,
        "read_only": r.read_only,
        "config_source": int(r.source),
        "is_sensitive": sensitive,
        "synonyms": [
            {"name": n, "value": None if sensitive else v, "source": int(s)} for n, v, s in r.synonyms
        ]
        if synonyms
        else [],
        "config_type": int(r.type),
        "documentation": (r.doc or None) if docs else None,
    }


@serves(ApiKey.DESCRIBE_CONFIGS, versions=(0, 4))
def describe_configs(
    ctx: RequestContext,
    req: Any,
    *,
    config: BrokerConfig,
    metadata: MetadataView,
    node_id: int,
    authz: Authorization,
) -> dict:
    cfg = config
    md = metadata
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
        refused = _refused(ctx, authz, AclOperation.DESCRIBE_CONFIGS, res.resource_type, res.resource_name)
        if refused:
            out["error_code"] = refused
        elif res.resource_type == TOPIC:
            if md.topic(res.resource_name) is None:
                out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                out["error_message"] = f"Topic '{res.resource_name}' does not exist."
            else:
                resolved = cfg.describe_topic(md.topic_configs(res.resource_name), keys)
                out["configs"] = [_entry(r, synonyms, docs) for r in resolved]
        elif res.resource_type == BROKER:
            if res.resource_name not in ("", str(node_id)):
                out["error_code"] = ErrorCode.INVALID_REQUEST
                out["error_message"] = f"Unexpected broker id, expected {node_id}"
            else:
                out["configs"] = [_entry(r, synonyms, docs) for r in cfg.describe(keys)]
        elif res.resource_type != BROKER_LOGGER:
            out["error_code"] = ErrorCode.INVALID_REQUEST
            out["error_message"] = f"Unsupported resource type {res.resource_type}"
        results.append(out)
    return {"throttle_time_ms": 0, "results": results}


def _refused(ctx: RequestContext, authz: Authorization, op: AclOperation, kind: int, name: str) -> int:
    if kind == TOPIC:
        return 0 if authz.topic(ctx, op, name) else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if kind in (BROKER, BROKER_LOGGER):
        return 0 if authz.cluster(ctx, op) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return 0


async def _alter_authorized(
    ctx: RequestContext, authz: Authorization, resources: list[Any], run: Any
) -> list[Any]:
    """The results of ``run(allowed resources)``, with the refused ones' authorization errors."""
    op = AclOperation.ALTER_CONFIGS
    codes = [_refused(ctx, authz, op, r.resource_type, r.resource_name) for r in resources]
    done = iter(await run([r for r, c in zip(resources, codes) if not c]) if not all(codes) else [])
    return [
        next(done) if not c else _Refused(c, r.resource_type, r.resource_name)
        for r, c in zip(resources, codes)
    ]


class _Refused:
    def __init__(self, code: int, resource_type: int, resource_name: str) -> None:
        self.error_code, self.error_message = code, None
        self.resource_type, self.resource_name = resource_type, resource_name


def _responses(results: list[Any]) -> dict:
    return {
        "throttle_time_ms": 0,
        "responses": [
            {
                "error_code": r.error_code,
                "error_message": r.error_message,
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
            }
            for r in results
        ],
    }


@serves(ApiKey.ALTER_CONFIGS, versions=(0, 2))
async def alter_configs(
    ctx: RequestContext, req: Any, *, quorum: MetadataQuorum, authz: Authorization
) -> dict:
    resources = [
        AlterConfigsResource(r.resource_type, r.resource_name, {c.name: c.value for c in r.configs})
        for r in req.resources
    ]
    validate_only = bool(req.validate_only)
    results = await _alter_authorized(
        ctx, authz, resources,
        lambda allowed: quorum.execute(lambda c: c.alter_configs(allowed, validate_only=validate_only)),
    )
    if not validate_only:
        _note_stored(results, {(r.resource_type, r.resource_name): list(r.configs) for r in resources})
    return _responses(results)


@serves(ApiKey.INCREMENTAL_ALTER_CONFIGS, versions=(0, 1))
async def incremental_alter_configs(
    ctx: RequestContext, req: Any, *, quorum: MetadataQuorum, authz: Authorization
) -> dict:
    resources = [
        IncrementalAlterConfigsResource(
            r.resource_type,
            r.resource_name,
            [AlterableConfig(c.name, c.config_operation, c.value) for c in r.configs],
        )
        for r in req.resources
    ]
    validate_only = bool(req.validate_only)
    results = await _alter_authorized(
        ctx, authz, resources,
        lambda allowed: quorum.execute(
            lambda c: c.incremental_alter_configs(allowed, validate_only=validate_only)
        ),
    )
    if not validate_only:
        ops = {(r.resource_type, r.resource_name): [o.name for o in r.ops] for r in resources}
        _note_stored(results, ops)
    return _responses(results)


def _note_stored(results: list[Any], names: dict[tuple[int, str], list[str]]) -> None:
    """Log once each stored Kafka config name that pylog does not act on."""
    for r in results:
        if r.error_code == 0:
            note_not_acted_on(names.get((r.resource_type, r.resource_name), ()))
