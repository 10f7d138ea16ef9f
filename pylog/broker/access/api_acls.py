"""The ACL checks of each API, as route-list entries: the checks Kafka's KafkaApis makes before an
API does its work, kept beside the handler list so each API's rule reads in one line. The
decisions themselves come from ``Authorization`` (pylog.broker.access.authorization), which asks
Kafka's StandardAuthorizer (pylog.security.authorizer) over the image's ACLs.

- ``requires(spec, check)``: ``check(ctx, request)`` returns an error code for the whole request
  (GROUP_AUTHORIZATION_FAILED for a JoinGroup on a group the caller may not READ, ...) or None;
  with a code the handler does not run and every entry of the answer carries it.
- ``per_topic(spec, rule)``: for APIs whose request lists topics (Produce, Fetch, ListOffsets,
  OffsetCommit, ...): the topics the caller may not access are taken out of the request, the
  handler serves the rest, and the answer gets TOPIC_AUTHORIZATION_FAILED entries for the ones
  taken out (whether or not they exist, so names do not leak). When every topic is refused the
  handler does not run.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import MetadataRequest, MetadataResponse
from pylog.protocol.schema import Message

from pylog.broker.access.authorization import Authorization
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import CLOSE_CONNECTION, NO_RESPONSE, ErrorResponse, HandlerSpec
from pylog.security.acl import CLUSTER_NAME
from pylog.security.acl_operations import AclOperation, ResourceType, authorized_operations

Check = Callable[[RequestContext, Any], "int | None"]
_ZERO_UUID = uuid.UUID(int=0)
_Op = AclOperation


def top_level(req: Any, code: int) -> dict:
    """An answer with only its top-level error code set."""
    return {"error_code": code}


def requires(
    spec: HandlerSpec, check: Check, answer: Callable[[Any, int], dict] | None = None
) -> HandlerSpec:
    fn = spec.fn

    def gated(ctx: RequestContext, req: Any) -> Any:
        code = check(ctx, req)
        if code:
            if answer is not None:
                return answer(req, code)
            if spec.error_response is None:
                raise RuntimeError(f"no error answer for api {ctx.api_key}")
            return spec.error_response(req, code)
        return fn(ctx, req)

    return replace(spec, fn=gated)


# --- checks ------------------------------------------------------------------------------------


def cluster(authz: Authorization, op: AclOperation) -> Check:
    return lambda ctx, req: None if authz.cluster(ctx, op) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def group(authz: Authorization, op: AclOperation, field: str = "group_id") -> Check:
    def check(ctx: RequestContext, req: Any) -> int | None:
        return None if authz.group(ctx, op, getattr(req, field)) else ErrorCode.GROUP_AUTHORIZATION_FAILED

    return check


def transactional_id(authz: Authorization, op: AclOperation = _Op.WRITE) -> Check:
    def check(ctx: RequestContext, req: Any) -> int | None:
        tid = req.transactional_id
        if authz.transactional_id(ctx, op, tid):
            return None
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    return check


def subscribed_topics(authz: Authorization, field: str = "subscribed_topic_names") -> Check:
    """Every topic a group member subscribes to must be DESCRIBE-able (KIP-848 / KIP-932)."""

    def check(ctx: RequestContext, req: Any) -> int | None:
        names = getattr(req, field, None) or []
        if len(authz.filter(ctx, _Op.DESCRIBE, 2, names)) < len(set(names)):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return None

    return check


def all_of(*checks: Check) -> Check:
    def check(ctx: RequestContext, req: Any) -> int | None:
        for c in checks:
            code = c(ctx, req)
            if code:
                return code
        return None

    return check


def init_producer_id(authz: Authorization) -> Check:
    """A transactional producer needs WRITE on its transactional id; an idempotent one
    IDEMPOTENT_WRITE on the cluster or WRITE on some topic."""

    def check(ctx: RequestContext, req: Any) -> int | None:
        if req.transactional_id is not None:
            return transactional_id(authz)(ctx, req)
        if authz.cluster(ctx, _Op.IDEMPOTENT_WRITE) or authz.any_of_type(ctx, _Op.WRITE, 2):
            return None
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    return check


# --- per-topic splitting -----------------------------------------------------------------------


@dataclass(frozen=True)
class TopicRule:
    """How one API lists topics: the request field, the topic name attribute, the answer field,
    the operation needed, and how an answer for refused topics is built."""

    request_field: str
    name_of: Callable[[Any], str | None]  # a request topic entry -> its name (None: unknown id)
    response_field: str
    operation: AclOperation
    denied: ErrorResponse  # the API's error answer, given a request holding only the refused topics
    pre: Check | None = None  # a whole-request check first (transactional id, group, follower)
    bypass: Callable[[RequestContext, Any], bool] | None = None  # allowed every topic (a follower)


def by_name(attr: str) -> Callable[[Any], str | None]:
    return lambda t: getattr(t, attr)


def _with(req: Any, field: str, value: Any) -> Any:
    return type(req)(**{f: (value if f == field else getattr(req, f)) for f in req._fields})


def per_topic(spec: HandlerSpec, authz: Authorization, rule: TopicRule) -> HandlerSpec:
    fn = spec.fn

    def split(ctx: RequestContext, req: Any) -> Any:
        if not authz.enabled or ctx.internal:
            return fn(ctx, req)
        if rule.pre is not None:
            code = rule.pre(ctx, req)
            if code:
                return _no_answer_if_acks0(req) or rule.denied(req, code)
        if rule.bypass is not None and rule.bypass(ctx, req):
            return fn(ctx, req)
        topics = getattr(req, rule.request_field) or []
        names = [rule.name_of(t) for t in topics]
        allowed = authz.filter(ctx, rule.operation, 2, (n for n in names if n is not None))
        refused = [t for t, n in zip(topics, names) if n is not None and n not in allowed]
        if not refused:
            return fn(ctx, req)
        denied = rule.denied(_with(req, rule.request_field, refused), ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        kept = [t for t, n in zip(topics, names) if n is None or n in allowed]
        if not kept:
            return _no_answer_if_acks0(req) or denied
        result = fn(ctx, _with(req, rule.request_field, kept))
        if inspect.isawaitable(result):
            return _merge_later(result, denied, rule.response_field)
        return _merge(result, denied, rule.response_field)

    return replace(spec, fn=split)


def _no_answer_if_acks0(req: Any) -> Any:
    """A refused acks=0 produce: close the connection, as for any failed acks=0 produce."""
    return CLOSE_CONNECTION if getattr(req, "acks", None) == 0 else None


def _merge(result: Any, denied: Message, field: str) -> Any:
    """The handler's answer for the allowed topics, then the refused ones' entries."""
    if result is NO_RESPONSE:
        return CLOSE_CONNECTION  # acks=0 with refused topics
    if result is CLOSE_CONNECTION:
        return result
    refused = getattr(denied, field)
    if isinstance(result, dict):
        result[field] = [*result[field], *refused]
    else:
        setattr(result, field, [*getattr(result, field), *refused])
    return result


async def _merge_later(result: Any, denied: Message, field: str) -> Any:
    return _merge(await result, denied, field)


# --- Metadata --------------------------------------------------------------------------------------


def _by_topic_id(req: Any) -> bool:
    """A Metadata request that names topics by id (then its names do not count)."""
    return req.topics is not None and any(
        getattr(t, "topic_id", None) not in (None, _ZERO_UUID) for t in req.topics
    )


def metadata(spec: HandlerSpec, authz: Authorization) -> HandlerSpec:
    """Metadata as Kafka authorizes it: a listing of every topic leaves out those the caller may
    not DESCRIBE; a named topic it may not DESCRIBE, or may not CREATE when the request asks for
    auto-creation of a missing one, answers TOPIC_AUTHORIZATION_FAILED (and is not created), and so
    does a topic asked by id (with its id, no name). Authorized operations (KIP-430) are the
    caller's; the cluster's need DESCRIBE on it."""
    fn = spec.fn

    def authorized(ctx: RequestContext, req: Any) -> Any:
        if not authz.enabled or ctx.internal:
            return fn(ctx, req)
        named = req.topics is not None and not (ctx.api_version == 0 and not req.topics)
        refused: list[str] = []
        if named and not _by_topic_id(req):
            names = [t.name for t in req.topics if t.name is not None]
            seen = authz.filter(ctx, _Op.DESCRIBE, 2, names)
            refused = [n for n in names if n not in seen]
            image = authz.image()
            if getattr(req, "allow_auto_topic_creation", True) and not authz.cluster(
                ctx, _Op.CREATE, audit=False
            ):
                refused += [
                    n
                    for n in names
                    if n in seen
                    and image is not None
                    and image.topic(n) is None
                    and not authz.topic(ctx, _Op.CREATE, n)
                ]
            if refused:
                req = _with(req, "topics", [t for t in req.topics if t.name not in refused])
        result = fn(ctx, req)
        if inspect.isawaitable(result):
            return _fix_later(result, ctx, req, named, refused)
        return _fix(result, ctx, req, named, refused)

    def _fix(
        body: MetadataResponse, ctx: RequestContext, req: MetadataRequest, named: bool, refused: list[str]
    ) -> MetadataResponse:
        by_id = named and _by_topic_id(req)
        wanted = {t.name for t in req.topics or () if t.name is not None and not by_id} if named else None
        topics = []
        for entry in body.topics:
            name = entry.name
            if name is not None and not authz.topic(ctx, _Op.DESCRIBE, name, audit=named):
                if by_id:  # ids are not secret: Kafka says the caller may not see it
                    topics.append(
                        MetadataResponse.MetadataResponseTopic(
                            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                            name=None,
                            topic_id=entry.topic_id,
                            partitions=[],
                        )
                    )
                continue
            if (
                named
                and wanted is not None
                and name is not None
                and name not in wanted
                and not entry.error_code
                and ctx.api_version == 0
            ):
                continue  # a v0 request whose named topics were all refused listed everything
            if getattr(req, "include_topic_authorized_operations", False) and name is not None:
                entry.topic_authorized_operations = _ops(ctx, 2, name)
            topics.append(entry)
        for name in dict.fromkeys(refused):
            topics.append(
                MetadataResponse.MetadataResponseTopic(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    name=name,
                    topic_id=_ZERO_UUID,
                    is_internal=False,
                    partitions=[],
                )
            )
        body.topics = topics
        if getattr(req, "include_cluster_authorized_operations", False):
            body.cluster_authorized_operations = (
                _ops(ctx, 4, CLUSTER_NAME) if authz.cluster(ctx, _Op.DESCRIBE) else 0
            )
        return body

    async def _fix_later(
        result: Any, ctx: RequestContext, req: MetadataRequest, named: bool, refused: list[str]
    ) -> MetadataResponse:
        return _fix(await result, ctx, req, named, refused)

    def _ops(ctx: RequestContext, resource_type: int, name: str) -> int:
        rt = ResourceType(resource_type)
        return authorized_operations(rt, authz.allowed(ctx, rt, name))

    return replace(spec, fn=authorized)
