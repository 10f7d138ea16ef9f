"""ACL bindings and filters as Kafka models them (``AclBinding``, ``AclBindingFilter``).

A binding says: ``principal`` from ``host`` is ALLOWed or DENYed ``operation`` on the resources of
``resource_type`` named ``resource_name`` exactly (LITERAL, ``*`` meaning every name) or starting
with it (PREFIXED). Filters select bindings for DescribeAcls and DeleteAcls; ``None`` fields and the
ANY values match everything, and the MATCH pattern type selects the bindings that would apply to
one resource name (its literal, the wildcard, and every prefix of it).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from pylog.security.acl_operations import AclOperation, ResourceType


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"


def _enum_value(cls: type[IntEnum], value: int) -> IntEnum:
    try:
        return cls(value)
    except ValueError:
        return cls(0)  # UNKNOWN


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


def validate_new_acl(b: AclBinding) -> str | None:
    """Why Kafka refuses to create ``b`` (INVALID_REQUEST), or None."""
    if (
        b.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY)
        or b.resource_type not in ResourceType.__members__.values()
    ):
        return f"Invalid resourceType {b.resource_type}"
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {_enum_value(PatternType, b.pattern_type).name}"
    if (
        b.operation in (AclOperation.UNKNOWN, AclOperation.ANY)
        or b.operation not in AclOperation.__members__.values()
    ):
        return f"Invalid operation {_enum_value(AclOperation, b.operation).name}"
    if b.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {_enum_value(AclPermissionType, b.permission_type).name}"
    if not b.resource_name:
        return "Resource name should not be empty"
    if b.resource_type == ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if ":" not in b.principal:
        return (
            f"Could not parse principal from `{b.principal}` (no colon is present separating the principal "
            "type from the principal name)"
        )
    if not b.host:
        return "Invalid empty host"
    return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    resource_type: int = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = AclOperation.ANY
    permission_type: int = AclPermissionType.ANY

    def unknown(self) -> str | None:
        """Why the filter is unusable (a field that is UNKNOWN or out of range), or None."""
        checks = (
            ("resourceType", ResourceType, self.resource_type),
            ("patternType", PatternType, self.pattern_type),
            ("operation", AclOperation, self.operation),
            ("permissionType", AclPermissionType, self.permission_type),
        )
        for what, cls, value in checks:
            if _enum_value(cls, value) == 0:
                return f"Unknown {what} {value} in the filter"
        return None

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        if not self._matches_pattern(b):
            return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != b.operation:
            return False
        return self.permission_type in (AclPermissionType.ANY, b.permission_type)

    def _matches_pattern(self, b: AclBinding) -> bool:
        pt, name = self.pattern_type, self.resource_name
        if pt == PatternType.MATCH:
            if name is None:
                return True
            if b.pattern_type == PatternType.LITERAL:
                return b.resource_name in (name, WILDCARD_RESOURCE)
            return b.pattern_type == PatternType.PREFIXED and name.startswith(b.resource_name)
        if pt != PatternType.ANY and pt != b.pattern_type:
            return False
        return name is None or name == b.resource_name
