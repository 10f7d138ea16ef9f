"""Kafka's ACL operations and resource types, and the authorized-operations bitfield (KIP-430).

Metadata, DescribeCluster and DescribeGroups can ask which operations the caller may perform on a
topic, the cluster or a group. The answer is a 32-bit field with bit ``1 << code`` set for each
allowed operation (Kafka's ``Utils.to32BitField``), drawn from the operations valid for that
resource type (Kafka's ``AclEntry.supportedOperations``). An authorizer plugs in as the
``allowed`` predicate; without one every valid operation is allowed, as Kafka answers when no
authorizer is configured. A request that did not ask gets ``NOT_REQUESTED`` (Integer.MIN_VALUE).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import IntEnum

NOT_REQUESTED = -(2**31)


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


_Op = AclOperation
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {_Op.READ, _Op.WRITE, _Op.CREATE, _Op.DESCRIBE, _Op.DELETE, _Op.ALTER, _Op.DESCRIBE_CONFIGS,
         _Op.ALTER_CONFIGS}
    ),
    ResourceType.GROUP: frozenset(
        {_Op.READ, _Op.DESCRIBE, _Op.DELETE, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}
    ),
    ResourceType.CLUSTER: frozenset(
        {_Op.CREATE, _Op.CLUSTER_ACTION, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS, _Op.IDEMPOTENT_WRITE,
         _Op.ALTER, _Op.DESCRIBE}
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({_Op.DESCRIBE, _Op.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_Op.DESCRIBE}),
    ResourceType.USER: frozenset({_Op.CREATE_TOKENS, _Op.DESCRIBE_TOKENS}),
}

Allowed = Callable[[AclOperation], bool]


def allow_all(operation: AclOperation) -> bool:
    """The predicate when no authorizer is configured."""
    return True


def to_bitfield(operations: Iterable[AclOperation]) -> int:
    """Bit ``1 << code`` per operation (codes stay below 31)."""
    field = 0
    for op in operations:
        field |= 1 << op
    return field


def authorized_operations(resource_type: ResourceType, allowed: Allowed = allow_all) -> int:
    """The bitfield of the operations valid for ``resource_type`` that ``allowed`` permits."""
    return to_bitfield(op for op in SUPPORTED_OPERATIONS[resource_type] if allowed(op))


def operations_if_requested(
    requested: bool, resource_type: ResourceType, allowed: Allowed = allow_all
) -> int:
    """``authorized_operations`` when the request asked for it, else ``NOT_REQUESTED``."""
    return authorized_operations(resource_type, allowed) if requested else NOT_REQUESTED
