"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for Kafka's config resources: TOPIC,
BROKER, BROKER_LOGGER, CLIENT_METRICS and GROUP.

Overrides of topics, brokers, groups and client-metrics subscriptions live in the metadata log as
config records (the controller validates and commits them); values are resolved here with Kafka's
precedence and reported with their sources and synonym chains. Every Apache Kafka config name is
accepted; the ones pylog does not act on are logged once when first stored. Passwords are
described as Kafka describes them: sensitive, without a value. BROKER_LOGGER is the exception: a
node's log levels change on that node alone (``pylog.broker.control.broker_loggers``), so a broker answers
that part of an IncrementalAlterConfigs itself and forwards the rest; legacy AlterConfigs does not
know it. A topic needs DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, a group on the group, the
other resources on the cluster (TOPIC_ / GROUP_ / CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, TypeVar

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

from pylog.broker.access.authorization import Authorization
from pylog.broker.control import broker_loggers
from pylog.broker.control.controller_channel import ControllerChannel, ControllerUnavailable
from pylog.broker.control.metadata import MetadataView
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.cluster.controller import AlterableConfig, AlterConfigsResource, IncrementalAlterConfigsResource
from pylog.cluster.quorum import MetadataQuorum
from pylog.cluster.records import ConfigResourceType
from pylog.cluster.resource_configs import CLIENT_METRICS_CONFIGS, GROUP_CONFIGS, group_config_value
from pylog.config import BrokerConfig, ConfigSource, ConfigType, ResolvedConfig, note_not_acted_on
from pylog.security.acl_operations import AclOperation

log = logging.getLogger(__name__)

TOPIC = ConfigResourceType.TOPIC
BROKER = ConfigResourceType.BROKER
BROKER_LOGGER = ConfigResourceType.BROKER_LOGGER
CLIENT_METRICS = ConfigResourceType.CLIENT_METRICS
GROUP = ConfigResourceType.GROUP


Described = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym


def _entry(r: ResolvedConfig, synonyms: bool, docs: bool) -> Described:
    sensitive = r.type is ConfigType.PASSWORD
    return Described(
        name=r.name,
        value=None if sensitive else r.value,
        read_only=r.read_only,
        config_source=int(r.source),
        is_sensitive=sensitive,
        synonyms=[Synonym(name=n, value=None if sensitive else v, source=int(s)) for n, v, s in r.synonyms]
        if synonyms
        else [],
        config_type=int(r.type),
        documentation=(r.doc or None) if docs else None,
    )


def describe_configs_error(req: DescribeConfigsRequest, code: int) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(
        results=[
            DescribeConfigsResponse.DescribeConfigsResult(
                error_code=code,
                error_message=None,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=[],
            )
            for r in req.resources
        ]
    )


@serves(ApiKey.DESCRIBE_CONFIGS, versions=(0, 4), error_response=describe_configs_error)
def describe_configs(
    ctx: RequestContext,
    req: DescribeConfigsRequest,
    *,
    config: BrokerConfig,
    metadata: MetadataView,
    node_id: int,
    authz: Authorization,
) -> DescribeConfigsResponse:
    cfg = config
    md = metadata
    synonyms = bool(getattr(req, "include_synonyms", False))
    docs = bool(getattr(req, "include_documentation", False))
    results = []
    for res in req.resources:
        keys = res.configuration_keys
        out = DescribeConfigsResponse.DescribeConfigsResult(
            error_code=0,
            error_message=None,
            resource_type=res.resource_type,
            resource_name=res.resource_name,
            configs=[],
        )
        refused = _refused(ctx, authz, AclOperation.DESCRIBE_CONFIGS, res.resource_type, res.resource_name)
        if refused:
            out.error_code = refused
        elif res.resource_type in (BROKER_LOGGER, GROUP, CLIENT_METRICS):
            _describe_other(out, res, keys, cfg, md, node_id, synonyms, docs)
        elif res.resource_type == TOPIC:
            if md.topic(res.resource_name) is None:
                out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                out.error_message = f"Topic '{res.resource_name}' does not exist."
            else:
                resolved = cfg.describe_topic(md.topic_configs(res.resource_name), keys)
                out.configs = [_entry(r, synonyms, docs) for r in resolved]
        elif res.resource_type == BROKER:
            if res.resource_name not in ("", str(node_id)):
                out.error_code = ErrorCode.INVALID_REQUEST
                out.error_message = f"Unexpected broker id, expected {node_id}"
            else:
                out.configs = [_entry(r, synonyms, docs) for r in cfg.describe(keys)]
        else:
            out.error_code = ErrorCode.INVALID_REQUEST
            out.error_message = f"Unsupported resource type {res.resource_type}"
        results.append(out)
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _describe_other(
    out: DescribeConfigsResponse.DescribeConfigsResult,
    res: Any,
    keys: list[str] | None,
    cfg: BrokerConfig,
    md: MetadataView,
    node_id: int,
    synonyms: bool,
    docs: bool,
) -> None:
    """BROKER_LOGGER, GROUP and CLIENT_METRICS entries (Kafka's ConfigHelper)."""
    name = res.resource_name
    wanted = (lambda n: True) if not keys else (lambda n: n in keys)
    if res.resource_type == BROKER_LOGGER:
        try:
            broker_loggers.check_node(name, node_id)
        except broker_loggers.LoggerConfigError as e:
            out.error_code, out.error_message = e.code, e.message
            return
        out.configs = [
            _plain(n, level, ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, ConfigType.UNKNOWN)
            for n, level in broker_loggers.describe().items()
            if wanted(n)
        ]
        return
    if not name:
        what = "Group name" if res.resource_type == GROUP else "Client metrics subscription name"
        out.error_code, out.error_message = ErrorCode.INVALID_REQUEST, f"{what} must not be empty"
        return
    overrides = md.image.configs(res.resource_type, name)
    entries = []
    if res.resource_type == GROUP:
        for n, d in GROUP_CONFIGS.items():
            if wanted(n):
                value = group_config_value(n, overrides, cfg.raw)
                source = ConfigSource.GROUP_CONFIG if n in overrides else ConfigSource.DEFAULT_CONFIG
                entries.append(_plain(n, value, source, d.type, synonyms, d.doc if docs else None))
    else:
        for n, d in CLIENT_METRICS_CONFIGS.items():
            if wanted(n):
                value = overrides.get(n, d.default)
                source = ConfigSource.CLIENT_METRICS_CONFIG if n in overrides else ConfigSource.DEFAULT_CONFIG
                entries.append(_plain(n, value, source, d.type, synonyms, d.doc if docs else None))
    out.configs = entries


def _plain(
    name: str,
    value: str,
    source: ConfigSource,
    type_: ConfigType,
    synonyms: bool = False,
    doc: str | None = None,
) -> Described:
    return Described(
        name=name,
        value=value,
        read_only=False,
        config_source=int(source),
        is_sensitive=False,
        synonyms=[Synonym(name=name, value=value, source=int(source))] if synonyms else [],
        config_type=int(type_),
        documentation=doc or None,
    )


def _refused(ctx: RequestContext, authz: Authorization, op: AclOperation, kind: int, name: str) -> int:
    if kind == TOPIC:
        return 0 if authz.topic(ctx, op, name) else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if kind == GROUP:
        return 0 if authz.group(ctx, op, name) else ErrorCode.GROUP_AUTHORIZATION_FAILED
    if kind in (BROKER, BROKER_LOGGER, CLIENT_METRICS):
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
    def __init__(self, code: int, resource_type: int, resource_name: str, message: str | None = None) -> None:
        self.error_code, self.error_message = code, message
        self.resource_type, self.resource_name = resource_type, resource_name


AlterResponse = TypeVar("AlterResponse", AlterConfigsResponse, IncrementalAlterConfigsResponse)


def _alter_response(
    kind: type[AlterResponse], results: Iterable[Any], code: int | None = None
) -> AlterResponse:
    """One answer per resource: its own result, or `code` for every resource of a refused request."""
    return kind(
        throttle_time_ms=0,
        responses=[
            kind.AlterConfigsResourceResponse(
                error_code=r.error_code if code is None else code,
                error_message=r.error_message if code is None else None,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in results
        ],
    )


def alter_configs_error(req: AlterConfigsRequest, code: int) -> AlterConfigsResponse:
    return _alter_response(AlterConfigsResponse, req.resources, code)


@serves(ApiKey.ALTER_CONFIGS, versions=(0, 2), error_response=alter_configs_error)
async def alter_configs(
    ctx: RequestContext, req: AlterConfigsRequest, *, quorum: MetadataQuorum, authz: Authorization
) -> AlterConfigsResponse:
    resources = [
        AlterConfigsResource(r.resource_type, r.resource_name, {c.name: c.value for c in r.configs})
        for r in req.resources
    ]  # BROKER_LOGGER is refused by the controller: legacy AlterConfigs does not know it
    validate_only = bool(req.validate_only)
    results = await _alter_authorized(
        ctx, authz, resources,
        lambda allowed: quorum.execute(lambda c: c.alter_configs(allowed, validate_only=validate_only)),
    )
    if not validate_only:
        _note_stored(results, {(r.resource_type, r.resource_name): list(r.configs) for r in resources})
    return _alter_response(AlterConfigsResponse, results)


def incremental_alter_configs_error(
    req: IncrementalAlterConfigsRequest, code: int
) -> IncrementalAlterConfigsResponse:
    return _alter_response(IncrementalAlterConfigsResponse, req.resources, code)


@serves(ApiKey.INCREMENTAL_ALTER_CONFIGS, versions=(0, 1), error_response=incremental_alter_configs_error)
async def incremental_alter_configs(
    ctx: RequestContext, req: IncrementalAlterConfigsRequest, *, quorum: MetadataQuorum, authz: Authorization
) -> IncrementalAlterConfigsResponse:
    """The controller's IncrementalAlterConfigs (its own loggers answered here, like a broker's)."""
    local = _alter_loggers(ctx, req, quorum.node_id, authz)
    resources = [
        IncrementalAlterConfigsResource(
            r.resource_type,
            r.resource_name,
            [AlterableConfig(c.name, c.config_operation, c.value) for c in r.configs],
        )
        for r in req.resources
        if r.resource_type != BROKER_LOGGER
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
    return _alter_response(IncrementalAlterConfigsResponse, _in_request_order(req, local, results))


@serves(ApiKey.INCREMENTAL_ALTER_CONFIGS, versions=(0, 1), error_response=incremental_alter_configs_error)
async def incremental_alter_configs_forwarded(
    ctx: RequestContext,
    req: IncrementalAlterConfigsRequest,
    *,
    channel: ControllerChannel,
    node_id: int,
    authz: Authorization,
) -> IncrementalAlterConfigsResponse:
    """A broker's IncrementalAlterConfigs: BROKER_LOGGER resources are this broker's to change;
    the rest goes to the active controller (Kafka's ConfigAdminManager.preprocess)."""
    local = _alter_loggers(ctx, req, node_id, authz)
    rest = [r for r in req.resources if r.resource_type != BROKER_LOGGER]
    forwarded: list[Any] = []
    if rest:
        body = type(req)(**{**{f: getattr(req, f) for f in req._fields}, "resources": rest})
        try:
            answer = await channel.call(
                ctx.api_key, ctx.api_version, body, caller=ctx, error_response=incremental_alter_configs_error
            )
            forwarded = list(answer.responses)
        except ControllerUnavailable as exc:
            log.warning("forwarding IncrementalAlterConfigs: %s", exc)
            timed_out = ErrorCode.REQUEST_TIMED_OUT
            forwarded = [_Refused(timed_out, r.resource_type, r.resource_name) for r in rest]
    if not local:
        return _alter_response(IncrementalAlterConfigsResponse, forwarded)
    return _alter_response(IncrementalAlterConfigsResponse, _in_request_order(req, local, forwarded))


def _alter_loggers(ctx: RequestContext, req: Any, node_id: int, authz: Authorization) -> dict[int, Any]:
    """Apply the request's BROKER_LOGGER resources here; their results by position."""
    out: dict[int, Any] = {}
    for i, r in enumerate(req.resources):
        if r.resource_type != BROKER_LOGGER:
            continue
        code, message = 0, None
        if not authz.cluster(ctx, AclOperation.ALTER_CONFIGS):
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        else:
            try:
                only = bool(req.validate_only)
                broker_loggers.alter(r.resource_name, r.configs, node_id, validate_only=only)
            except broker_loggers.LoggerConfigError as e:
                code, message = e.code, e.message
        out[i] = _Refused(code, r.resource_type, r.resource_name, message)
    return out


def _in_request_order(req: Any, local: dict[int, Any], others: list[Any]) -> list[Any]:
    rest = iter(others)
    return [local[i] if i in local else next(rest) for i in range(len(req.resources))]


def _note_stored(results: list[Any], names: dict[tuple[int, str], list[str]]) -> None:
    """Log once each stored Kafka config name that pylog does not act on."""
    for r in results:
        if r.error_code == 0 and r.resource_type in (TOPIC, BROKER):
            note_not_acted_on(names.get((r.resource_type, r.resource_name), ()))
        elif r.error_code == 0 and r.resource_type == GROUP:
            for n in names.get((r.resource_type, r.resource_name), ()):
                d = GROUP_CONFIGS.get(n)
                if d is not None and not d.acted_on:
                    log.warning("group config %s is stored but pylog does not act on it", n)
