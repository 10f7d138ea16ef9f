"""Kafka's ``StandardAuthorizer`` decision logic over a set of ACLs, sans-IO.

``authorize(principal, host, operation, resource_type, name)``:

1. A super user (``super.users``) may do anything.
2. The ACLs that apply to the resource are its LITERAL ACLs, the LITERAL ``*`` ACLs of its type
   and the PREFIXED ACLs whose prefix starts its name.
3. Of those, an ACL matches when its principal is the caller's or ``User:*``, its host is the
   caller's address or ``*``, and its operation is ALL or the one asked. An ALLOW of READ, WRITE,
   DELETE or ALTER also allows DESCRIBE, and an ALLOW of ALTER_CONFIGS allows DESCRIBE_CONFIGS
   (denies imply nothing).
4. Any matching DENY denies (deny wins); else any matching ALLOW allows; else, when no ACL at all
   applies to the resource, ``allow.everyone.if.no.acl.found`` decides; else denied.

``authorize_by_resource_type`` answers "could this caller do ``operation`` on *some* resource of
this type" (Kafka's ``Authorizer.authorizeByResourceType``, used by InitProducerId).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pylog.security.acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclPermissionType,
    PatternType,
)
from pylog.security.acl_operations import AclOperation
from pylog.security.principal import KafkaPrincipal

_IMPLIES_DESCRIBE = frozenset(
    {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
)
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


@dataclass
class _TypeIndex:
    literal: dict[str, list[AclBinding]] = field(default_factory=dict)
    prefixed: dict[str, list[AclBinding]] = field(default_factory=dict)
    prefix_lengths: set[int] = field(default_factory=set)


class AclIndex:
    """ACLs by resource type, literal name and prefix, for lookups in O(length of the name)."""

    def __init__(self, acls: Iterable[AclBinding] = ()) -> None:
        self._types: dict[int, _TypeIndex] = {}
        self.acls: tuple[AclBinding, ...] = tuple(acls)
        for acl in self.acls:
            idx = self._types.setdefault(acl.resource_type, _TypeIndex())
            if acl.pattern_type == PatternType.PREFIXED:
                idx.prefixed.setdefault(acl.resource_name, []).append(acl)
                idx.prefix_lengths.add(len(acl.resource_name))
            else:
                idx.literal.setdefault(acl.resource_name, []).append(acl)

    def applicable(self, resource_type: int, name: str) -> list[AclBinding]:
        idx = self._types.get(resource_type)
        if idx is None:
            return []
        out = list(idx.literal.get(name, ()))
        if name != WILDCARD_RESOURCE:
            out += idx.literal.get(WILDCARD_RESOURCE, ())
        for n in idx.prefix_lengths:
            if n <= len(name):
                out += idx.prefixed.get(name[:n], ())
        return out

    def of_type(self, resource_type: int) -> list[AclBinding]:
        idx = self._types.get(resource_type)
        if idx is None:
            return []
        return [a for group in (*idx.literal.values(), *idx.prefixed.values()) for a in group]


def _match(acl: AclBinding, principal: str, host: str, op: int) -> int | None:
    """The permission of ``acl`` for this caller and operation, or None when it does not match."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD_HOST and acl.host != host:
        return None
    if acl.operation != AclOperation.ALL:
        if acl.permission_type == AclPermissionType.ALLOW:
            if op == AclOperation.DESCRIBE:
                if acl.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif op == AclOperation.DESCRIBE_CONFIGS:
                if acl.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif acl.operation != op:
                return None
        elif acl.operation != op:
            return None
    return acl.permission_type


@dataclass(frozen=True)
class StandardAuthorizer:
    index: AclIndex
    super_users: frozenset[KafkaPrincipal] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    def authorize(
        self, principal: KafkaPrincipal, host: str, operation: int, resource_type: int, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        who = str(principal)
        found = allowed = False
        for acl in self.index.applicable(resource_type, name):
            found = True
            result = _match(acl, who, host, operation)
            if result == AclPermissionType.DENY:
                return False
            if result == AclPermissionType.ALLOW:
                allowed = True
        if allowed:
            return True
        return not found and self.allow_everyone_if_no_acl_found

    def authorize_by_resource_type(
        self, principal: KafkaPrincipal, host: str, operation: int, resource_type: int
    ) -> bool:
        # A hard-coded name first: super users, and allow.everyone when nothing applies to it.
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        who = str(principal)
        deny_literal: set[str] = set()
        deny_prefixed: list[str] = []
        allows: list[AclBinding] = []
        for acl in self.index.of_type(resource_type):
            if acl.principal not in (who, WILDCARD_PRINCIPAL) or acl.host not in (host, WILDCARD_HOST):
                continue
            if acl.operation not in (operation, AclOperation.ALL):
                continue
            if acl.permission_type == AclPermissionType.DENY:
                if acl.pattern_type == PatternType.LITERAL:
                    if acl.resource_name == WILDCARD_RESOURCE:
                        return False
                    deny_literal.add(acl.resource_name)
                else:
                    deny_prefixed.append(acl.resource_name)
            else:
                allows.append(acl)
        for acl in allows:
            name = acl.resource_name
            if any(name.startswith(p) for p in deny_prefixed):
                continue
            if acl.pattern_type == PatternType.LITERAL and (name in deny_literal):
                continue
            return True
        return False
