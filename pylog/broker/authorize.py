"""Authorization around handlers, as table entries: the checks Kafka's KafkaApis makes before an
API does its work, kept beside the handler list so each API's rule reads in one line.

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pylog.protocol.errors import ErrorCode

from pylog.broker.acl_operations import AclOperation
from pylog.broker.authorization import Authorization
from pylog.broker.context import RequestContext
from pylog.broker.error_response import error_response
from pylog.broker.registry import CLOSE_CONNECTION, NO_RESPONSE, HandlerSpec

Check = Callable[[RequestContext, Any], "int | None"]
_Op = AclOperation


def requires(spec: HandlerSpec, check: Check) -> HandlerSpec:
    fn = spec.fn

    def gated(ctx: RequestContext, req: Any) -> Any:
        code = check(ctx, req)
        if code:
            answer = error_response(ctx.api_key, ctx.api_version, req, code)
            if answer is None:
                raise RuntimeError(f"no error answer for api {ctx.api_key}")
            return answer
        return fn(ctx, req)

    return HandlerSpec(spec.api_key, spec.min_version, spec.max_version, gated, spec.name)


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
    name_attr: str
    response_field: str
    operation: AclOperation
    denied: Callable[[Any, int], dict]  # (request holding only the refused topics, code) -> answer
    pre: Check | None = None  # a whole-request check first (transactional id, group, follower)


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
        topics = getattr(req, rule.request_field) or []
        allowed = authz.filter(ctx, rule.operation, 2, (getattr(t, rule.name_attr) for t in topics))
        refused = [t for t in topics if getattr(t, rule.name_attr) not in allowed]
        if not refused:
            return fn(ctx, req)
        denied = rule.denied(_with(req, rule.request_field, refused), ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        kept = [t for t in topics if getattr(t, rule.name_attr) in allowed]
        if not kept:
            return _no_answer_if_acks0(req) or denied
        result = fn(ctx, _with(req, rule.request_field, kept))
        if inspect.isawaitable(result):
            return _merge_later(result, denied, rule.response_field)
        return _merge(result, denied, rule.response_field)

    return HandlerSpec(spec.api_key, spec.min_version, spec.max_version, split, spec.name)


def _no_answer_if_acks0(req: Any) -> Any:
    """A refused acks=0 produce: close the connection, as for any failed acks=0 produce."""
    return CLOSE_CONNECTION if getattr(req, "acks", None) == 0 else None


def _merge(result: Any, denied: dict, field: str) -> Any:
    if result is NO_RESPONSE:
        return CLOSE_CONNECTION  # acks=0 with refused topics
    if result is CLOSE_CONNECTION:
        return result
    result[field] = [*result[field], *denied[field]]
    return result


async def _merge_later(result: Any, denied: dict, field: str) -> Any:
    return _merge(await result, denied, field)
