"""``Authorization``: the authorizer as handlers use it, deciding for the caller of one request.

With ``authorizer.class.name`` unset everything is allowed, as in Kafka without an authorizer (and
the ACL APIs answer SECURITY_DISABLED). With Kafka's ``StandardAuthorizer`` the decisions come from
``pylog.security.authorizer`` over the ACLs of the current metadata image; the index is rebuilt
only when the image's ACLs change. A request this node makes to itself (``ctx.internal``) is never
refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from pylog.protocol.api import ApiKey

from pylog.config import BrokerConfig, ConfigError
from pylog.security.acl import CLUSTER_NAME, AclBinding
from pylog.security.acl_operations import AclOperation, Allowed, ResourceType, allow_all
from pylog.security.authorizer import AclIndex, StandardAuthorizer
from pylog.security.principal import KafkaPrincipal, parse_super_users

if TYPE_CHECKING:
    from pylog.broker.access.audit_shell import AuditShell
    from pylog.broker.network.context import RequestContext
    from pylog.cluster.image import MetadataImage

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

_Op = AclOperation
_RT = ResourceType


class Authorization:
    def __init__(
        self,
        image: Callable[[], MetadataImage | None] = lambda: None,
        *,
        enabled: bool = False,
        super_users: frozenset[KafkaPrincipal] = frozenset(),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.enabled = enabled
        self._image = image
        self.super_users = super_users
        self.allow_everyone = allow_everyone_if_no_acl_found
        self._cached: tuple[int, int, StandardAuthorizer] | None = None
        self.audit: AuditShell | None = None  # told of each refusal of a request's resource

    @classmethod
    def from_config(cls, config: BrokerConfig, image: Callable[[], MetadataImage | None]) -> Authorization:
        name = (config.raw("authorizer.class.name") or "").strip()
        if not name:
            return cls(image)
        if name != STANDARD_AUTHORIZER:
            raise ConfigError(f"authorizer.class.name {name!r} is not served; use {STANDARD_AUTHORIZER}")
        return cls(
            image,
            enabled=True,
            super_users=parse_super_users(config.raw("super.users")),
            allow_everyone_if_no_acl_found=config.bool("allow.everyone.if.no.acl.found"),
        )

    def image(self) -> MetadataImage | None:
        return self._image()

    def authorizer(self) -> StandardAuthorizer:
        image = self._image()
        key = (id(image), image.acl_generation if image is not None else 0)
        cached = self._cached
        if cached is None or cached[:2] != key:
            acls = image.acls.values() if image is not None else ()
            cached = self._cached = (
                *key,
                StandardAuthorizer(AclIndex(acls), self.super_users, self.allow_everyone),
            )
        return cached[2]

    def acls(self) -> tuple[AclBinding, ...]:
        return self.authorizer().index.acls

    # --- decisions for one request ---------------------------------------------------------

    def authorize(
        self, ctx: RequestContext, operation: int, resource_type: int, name: str, *, audit: bool = True
    ) -> bool:
        """``audit`` False: a refusal that only hides something from a listing, not audited."""
        if not self.enabled or ctx.internal:
            return True
        principal, address = ctx.principal, ctx.client_address
        allowed = self.authorizer().authorize(principal, address, operation, resource_type, name)
        if not allowed and audit and self.audit is not None:
            self._audit_denial(ctx, operation, resource_type, name)
        return allowed

    def _audit_denial(self, ctx: RequestContext, operation: int, resource_type: int, name: str) -> None:
        assert self.audit is not None
        try:
            api_name = ApiKey(ctx.api_key).name
        except ValueError:
            api_name = str(ctx.api_key)
        self.audit.denied(
            str(ctx.principal), ctx.client_address, ctx.listener, api_name,
            f"{_RT(resource_type).name}:{name}", _Op(operation).name,
        )

    def cluster(self, ctx: RequestContext, operation: int, *, audit: bool = True) -> bool:
        return self.authorize(ctx, operation, _RT.CLUSTER, CLUSTER_NAME, audit=audit)

    def topic(self, ctx: RequestContext, operation: int, name: str, *, audit: bool = True) -> bool:
        return self.authorize(ctx, operation, _RT.TOPIC, name, audit=audit)

    def group(self, ctx: RequestContext, operation: int, name: str) -> bool:
        return self.authorize(ctx, operation, _RT.GROUP, name)

    def transactional_id(self, ctx: RequestContext, operation: int, name: str) -> bool:
        return self.authorize(ctx, operation, _RT.TRANSACTIONAL_ID, name)

    def filter(
        self, ctx: RequestContext, operation: int, resource_type: int, names: Iterable[str], *,
        audit: bool = True,
    ) -> set[str]:
        """The names among ``names`` the caller may ``operation`` (``audit`` False for a listing)."""
        if not self.enabled or ctx.internal:
            return set(names)
        return {n for n in set(names) if self.authorize(ctx, operation, resource_type, n, audit=audit)}

    def any_of_type(self, ctx: RequestContext, operation: int, resource_type: int) -> bool:
        if not self.enabled or ctx.internal:
            return True
        return self.authorizer().authorize_by_resource_type(
            ctx.principal, ctx.client_address, operation, resource_type
        )

    def allowed(self, ctx: RequestContext, resource_type: int, name: str) -> Allowed:
        """A predicate over operations for ``authorized_operations`` (KIP-430 bitfields)."""
        if not self.enabled or ctx.internal:
            return allow_all
        decide = self.authorizer().authorize  # bitfields of what one may do: no audit of refusals
        return lambda op: decide(ctx.principal, ctx.client_address, op, resource_type, name)


ALLOW_ALL = Authorization()
