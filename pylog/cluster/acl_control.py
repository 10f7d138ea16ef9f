"""ACL and SCRAM commands of the controller (CreateAcls, DeleteAcls, AlterUserScramCredentials),
sans-IO: validate against the working image, emit metadata records.

Creating an ACL that already exists succeeds without a record. A deletion filter removes every
ACL it matches (an ACL matched by two filters of one request is removed once, reported by both).
Credentials arrive salted by the client (AlterUserScramCredentials carries the salt and the
salted password); only the derived StoredKey and ServerKey are recorded.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pylog.cluster.image import MetadataImage
from pylog.cluster.records import (
    AccessControlEntryRecord,
    MetadataRecord,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from pylog.protocol.errors import ErrorCode
from pylog.security.acl import AclBinding, AclBindingFilter, validate_new_acl
from pylog.security.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramMechanismType,
    credential_from_salted_password,
)


@dataclass(frozen=True)
class AclCreationResult:
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


@dataclass(frozen=True)
class AclDeletionResult:
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    deleted: tuple[AclBinding, ...] = ()


@dataclass(frozen=True)
class ScramDeletion:
    name: str
    mechanism: int


@dataclass(frozen=True)
class ScramUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True)
class ScramAlterResult:
    user: str
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


_TWICE = "A user credential cannot be altered twice in the same request"


class AclControl:
    def __init__(
        self,
        image: Callable[[], MetadataImage],
        collect: Callable[[list[MetadataRecord]], None],
        rng: random.Random,
    ) -> None:
        self._image = image
        self._collect = collect
        self._rng = rng

    def _new_id(self) -> uuid.UUID:
        acls = self._image().acls
        while True:
            acl_id = uuid.UUID(int=self._rng.getrandbits(128), version=4)
            if acl_id not in acls:
                return acl_id

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[AclCreationResult]:
        out = []
        for b in bindings:
            problem = validate_new_acl(b)
            if problem is not None:
                out.append(AclCreationResult(ErrorCode.INVALID_REQUEST, problem))
                continue
            if b not in set(self._image().acls.values()):
                self._collect([AccessControlEntryRecord(self._new_id(), *_fields(b))])
            out.append(AclCreationResult())
        return out

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclDeletionResult]:
        out = []
        for f in filters:
            problem = f.unknown()
            if problem is not None:
                out.append(AclDeletionResult(ErrorCode.INVALID_REQUEST, problem))
                continue
            matched = [(acl_id, b) for acl_id, b in self._image().acls.items() if f.matches(b)]
            self._collect([RemoveAccessControlEntryRecord(acl_id) for acl_id, _ in matched])
            out.append(AclDeletionResult(deleted=tuple(b for _, b in matched)))
        return out

    def alter_scram(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> list[ScramAlterResult]:
        image = self._image()
        errors: dict[str, tuple[int, str]] = {}
        chosen: dict[str, ScramDeletion | ScramUpsertion] = {}
        order: list[str] = []
        items: list[ScramDeletion | ScramUpsertion] = [*deletions, *upsertions]
        for item in items:
            if item.name not in order:
                order.append(item.name)
            if item.name in errors:
                continue
            if chosen.pop(item.name, None) is not None:
                errors[item.name] = (ErrorCode.DUPLICATE_RESOURCE, _TWICE)
                continue
            problem = _validate(item, image)
            if problem is not None:
                errors[item.name] = problem
            else:
                chosen[item.name] = item
        records: list[MetadataRecord] = []
        for item in chosen.values():
            if isinstance(item, ScramDeletion):
                records.append(RemoveUserScramCredentialRecord(item.name, item.mechanism))
            else:
                mechanism = ScramMechanismType(item.mechanism)
                c = credential_from_salted_password(
                    mechanism, item.salt, item.salted_password, item.iterations
                )
                records.append(
                    UserScramCredentialRecord(
                        item.name, item.mechanism, c.salt, c.stored_key, c.server_key, c.iterations
                    )
                )
        self._collect(records)
        return [ScramAlterResult(name, *errors.get(name, (ErrorCode.NONE, None))) for name in order]


def _validate(item: ScramDeletion | ScramUpsertion, image: MetadataImage) -> tuple[int, str] | None:
    if not item.name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if item.mechanism not in (ScramMechanismType.SCRAM_SHA_256, ScramMechanismType.SCRAM_SHA_512):
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {item.mechanism}"
    if isinstance(item, ScramDeletion):
        if image.scram_credential(item.name, item.mechanism) is None:
            return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        return None
    if item.iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if item.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if not item.salt or not item.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return None


def _fields(b: AclBinding) -> tuple[int, str, int, str, str, int, int]:
    return (
        b.resource_type,
        b.resource_name,
        b.pattern_type,
        b.principal,
        b.host,
        b.operation,
        b.permission_type,
    )
