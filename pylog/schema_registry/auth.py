"""Who calls the registry and what they may do: the broker's listener security applied to HTTP.

The registry follows one of the broker's client listeners (`choose_listener`): the first SASL_SSL
one, else the first SASL_PLAINTEXT one, else the first SSL one. On an SSL / SASL_SSL listener it
serves https with that listener's TLS context; on a SASL listener every request must carry HTTP
Basic credentials of a user the listener accepts (PlainLoginModule's ``user_<name>`` and the SCRAM
credentials of the metadata log); with OAUTHBEARER enabled there, ``Authorization: Bearer <JWT>``
is checked by the listener's own OAUTHBEARER validation (same JWKS, audience, issuer and principal
claim); with ``ssl.client.auth`` set, a client certificate, mapped by
``ssl.principal.mapping.rules``, identifies the caller too. A broker whose listeners do not
authenticate keeps an open registry.

Authenticated callers are authorized with the cluster's ACLs (`SubjectAccess`). This module only
decides; the HTTP shell reads headers and certificates and answers 401 / 403.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.security.acl import CLUSTER_NAME
from pylog.security.acl_operations import AclOperation, ResourceType
from pylog.security.oauthbearer import InvalidToken, OAuthBearerValidation, token_key_id
from pylog.security.principal import KafkaPrincipal, parse_mapping_rules, ssl_principal, user
from pylog.security.sasl_server import PLAIN, SaslServerSettings
from pylog.security.scram import SCRAM_MECHANISMS, ScramCredential, ScramMechanismType, verify_password

REALM = "pylog schema registry"
FORBIDDEN = 40301
SUBJECT_SUFFIXES = ("-value", "-key")  # Confluent's TopicNameStrategy: <topic>-value, <topic>-key


class Unauthenticated(Exception):
    """No valid credentials: the registry answers 401 with this message."""


class Forbidden(Exception):
    """An authenticated caller the ACLs refuse: the registry answers 403 with this message.
    ``resource`` and ``operation`` say what was refused (for the audit trail)."""

    def __init__(self, message: str, resource: str = "", operation: str = "") -> None:
        super().__init__(message)
        self.resource, self.operation = resource, operation


class TokenValidator(Protocol):
    """Validates the credentials of one ``Authorization`` scheme (e.g. ``Bearer`` tokens for
    OAUTHBEARER): the principal, or raises Unauthenticated."""

    def __call__(self, credentials: str) -> KafkaPrincipal: ...


def parse_basic(credentials: str) -> tuple[str, str]:
    """``base64(user:password)`` -> (user, password); raises Unauthenticated when malformed."""
    try:
        text = base64.b64decode(credentials.strip(), validate=True).decode("utf-8")
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise Unauthenticated("malformed Basic credentials") from None
    name, sep, password = text.partition(":")
    if not sep or not name:
        raise Unauthenticated("Basic credentials must be user:password")
    return name, password


_VERIFIED_MAX = 1024


@dataclass(frozen=True)
class BasicValidator:
    """HTTP Basic against the users of a SASL listener: PLAIN's JAAS users, then the SCRAM
    credentials of the metadata log (each enabled SCRAM mechanism).

    Clients send their password with every request, and checking it against a SCRAM credential
    costs thousands of HMAC rounds, so a password that verified is remembered (as a keyed digest,
    never in clear) for as long as the user's credential stays the same."""

    sasl: SaslServerSettings
    _key: bytes = field(default_factory=lambda: os.urandom(32))
    _verified: dict[tuple[str, int, bytes], ScramCredential] = field(default_factory=dict)

    def __call__(self, credentials: str) -> KafkaPrincipal:
        name, password = parse_basic(credentials)
        if PLAIN in self.sasl.mechanisms:
            expected = self.sasl.plain_users.get(name)
            if expected is not None and hmac.compare_digest(expected.encode(), password.encode()):
                return user(name)
        digest = hmac.new(self._key, password.encode(), hashlib.sha256).digest()
        for mechanism in self.sasl.mechanisms:
            if mechanism not in SCRAM_MECHANISMS:
                continue
            kind = ScramMechanismType.from_name(mechanism)
            cred = self.sasl.scram_credentials(name, kind)
            if cred is None:
                continue
            key = (name, int(kind), digest)
            if self._verified.get(key) == cred:
                return user(name)
            if verify_password(cred, password):
                if len(self._verified) >= _VERIFIED_MAX:
                    self._verified.clear()
                self._verified[key] = cred
                return user(name)
        raise Unauthenticated(f"invalid credentials for user {name!r}")


@dataclass(frozen=True)
class BearerValidator:
    """``Authorization: Bearer <JWT>`` checked as the listener's SASL OAUTHBEARER checks tokens;
    the principal is the listener's principal claim. ``now_ms``: the wall clock, from the shell."""

    validation: OAuthBearerValidation
    now_ms: Callable[[], int]

    def __call__(self, credentials: str) -> KafkaPrincipal:
        token = credentials.strip()
        if not token:
            raise Unauthenticated("no bearer token")
        try:
            valid = self.validation.validate(token, self.now_ms())
        except InvalidToken as exc:
            raise Unauthenticated(f"invalid bearer token: {exc}") from None
        return user(valid.principal)

    def wait_before(self, credentials: str) -> Awaitable[None] | None:
        """A JWKS refresh to wait for when the token names a key not known yet."""
        keys = self.validation.keys
        if keys is None:
            return None
        return keys.refresh_for(token_key_id(credentials.strip()))


@dataclass(frozen=True)
class Authenticator:
    """The caller of one request from its ``Authorization`` header and TLS client certificate.

    ``validators`` maps a scheme (lower case: ``basic``, ``bearer``) to its validator;
    ``certificates`` says whether a client certificate alone identifies the caller (mutual TLS)."""

    validators: Mapping[str, TokenValidator] = field(default_factory=dict)
    certificates: bool = False
    principal_rules: tuple = field(default_factory=lambda: parse_mapping_rules(None))  # DEFAULT

    @property
    def challenge(self) -> str:
        """The ``WWW-Authenticate`` header of a 401: a challenge per accepted scheme."""
        schemes = [s.capitalize() for s in self.validators] or ["Basic"]
        return ", ".join(f'{s} realm="{REALM}"' for s in schemes)

    def wait_before(self, authorization: str | None) -> Awaitable[None] | None:
        """What to wait for before `authenticate` can decide (a bearer token's key being fetched)."""
        if not authorization:
            return None
        scheme, _, credentials = authorization.strip().partition(" ")
        wait = getattr(self.validators.get(scheme.lower()), "wait_before", None)
        return wait(credentials) if wait is not None else None

    def authenticate(self, authorization: str | None, peercert: Mapping[str, Any] | None) -> KafkaPrincipal:
        if authorization:
            scheme, _, credentials = authorization.strip().partition(" ")
            validator = self.validators.get(scheme.lower())
            if validator is None:
                raise Unauthenticated(f"the {scheme} authentication scheme is not accepted here")
            return validator(credentials)
        if self.certificates and peercert:
            try:
                return ssl_principal(peercert, self.principal_rules)
            except PermissionError as exc:
                raise Unauthenticated(str(exc)) from None
        raise Unauthenticated("authentication required")


class ListenerView(Protocol):
    """What the registry reads of a listener's security (``pylog.security.listener.ListenerSecurity``)."""

    @property
    def name(self) -> str: ...
    @property
    def protocol(self) -> str: ...
    @property
    def ssl_context(self) -> ssl.SSLContext | None: ...
    @property
    def principal_rules(self) -> tuple: ...
    @property
    def sasl(self) -> SaslServerSettings | None: ...


class AuthorizerSource(Protocol):
    """The broker's authorization (``pylog.broker.access.authorization.Authorization``)."""

    enabled: bool

    def authorizer(self) -> Any: ...


@dataclass(frozen=True)
class RegistrySecurity:
    """How the registry serves: ``ssl_context`` (https), ``authenticator`` (None: open) and the
    ACLs (``authorization``, None or disabled: an authenticated caller may do anything).
    ``client_ssl_context`` is how this node reaches another node's registry (forwarded writes)."""

    listener: str = ""
    ssl_context: ssl.SSLContext | None = None
    authenticator: Authenticator | None = None
    authorization: AuthorizerSource | None = None
    client_ssl_context: ssl.SSLContext | None = None
    audit: Any = None  # pylog.broker.access.audit_shell.AuditShell: told of 401s, 403s and who called

    @property
    def scheme(self) -> str:
        return "https" if self.ssl_context is not None else "http"

    def access(self, principal: KafkaPrincipal, host: str) -> SubjectAccess:
        auth = self.authorization
        if auth is None or not auth.enabled:
            return ALLOW_ALL
        authorizer = auth.authorizer()
        return SubjectAccess(
            lambda op, rt, name: authorizer.authorize(principal, host, op, rt, name), principal
        )


OPEN = RegistrySecurity()


def choose_listener(listeners: Iterable[ListenerView | None]) -> ListenerView | None:
    """The listener whose security the registry takes: the first SASL_SSL one (passwords travel
    inside TLS), else the first SASL_PLAINTEXT one, else the first SSL one."""
    present = [li for li in listeners if li is not None]
    for protocols in (("SASL_SSL",), ("SASL_PLAINTEXT",), ("SSL",)):
        for li in present:
            if li.protocol in protocols:
                return li
    return None


def registry_security(
    listeners: Sequence[ListenerView | None],
    authorization: AuthorizerSource | None,
    client_ssl_context: Callable[[str], ssl.SSLContext] | None = None,
    *,
    audit: Any = None,
    clock: Clock = SYSTEM_CLOCK,
) -> RegistrySecurity:
    """The registry's security from the broker's client listeners (in ``listeners`` order).
    ``client_ssl_context(listener name)``: the node's client context for that listener;
    ``clock``: its wall time is what bearer tokens are checked against."""
    li = choose_listener(listeners)
    if li is None:
        return OPEN
    validators: dict[str, TokenValidator] = {}
    if li.sasl is not None:
        validators["basic"] = BasicValidator(li.sasl)
        if li.sasl.oauth is not None:
            validators["bearer"] = BearerValidator(li.sasl.oauth, clock.wall_ms)
    ctx = li.ssl_context
    certificates = ctx is not None and ctx.verify_mode != ssl.CERT_NONE
    authenticator = Authenticator(validators, certificates, li.principal_rules) if (
        validators or certificates
    ) else None
    client_ctx = client_ssl_context(li.name) if ctx is not None and client_ssl_context else None
    return RegistrySecurity(
        li.name, ctx, authenticator, authorization if authenticator is not None else None, client_ctx,
        audit if authenticator is not None else None,
    )


# --- what a request may do ---------------------------------------------------------------------

_Check = Callable[[int, int, str], bool]  # (operation, resource type, name) -> allowed


def subject_topics(subject: str) -> tuple[str, ...]:
    """The topic resources a subject is authorized by: the topic it designates (``orders-value`` ->
    ``orders``) and the subject name itself (so literal or prefixed topic ACLs on it apply)."""
    for suffix in SUBJECT_SUFFIXES:
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return (subject[: -len(suffix)], subject)
    return (subject,)


class SubjectAccess:
    """The ACL decisions of one caller: subjects need READ / WRITE / ALTER on their topics, global
    config and mode need ALTER on the cluster."""

    def __init__(self, check: _Check | None, principal: KafkaPrincipal | None = None) -> None:
        self._check = check
        self.principal = principal

    def may(self, operation: int, subject: str) -> bool:
        if self._check is None:
            return True
        return any(self._check(operation, ResourceType.TOPIC, t) for t in subject_topics(subject))

    def require(self, operation: int, subject: str) -> None:
        if not self.may(operation, subject):
            op = AclOperation(operation).name
            raise Forbidden(
                f"User {self.principal} is not authorized to {op} subject {subject!r}",
                f"SUBJECT:{subject}", op,
            )

    def readable(self, subjects: Iterable[str]) -> list[str]:
        return [s for s in subjects if self.may(AclOperation.READ, s)]

    def require_cluster_alter(self) -> None:
        if self._check is None or self._check(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
            return
        raise Forbidden(
            f"User {self.principal} is not authorized to ALTER the cluster (global config and mode)",
            f"CLUSTER:{CLUSTER_NAME}", "ALTER",
        )


ALLOW_ALL = SubjectAccess(None)
