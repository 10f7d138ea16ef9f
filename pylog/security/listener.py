"""A node's security settings, per listener and for its own connections to other nodes.

Every value is looked up as the listener sees it (``listener.name.<listener>.<config>`` before
``<config>``), and everything is checked when the node starts: a PEM file that does not load, a
mechanism pylog does not serve, a PLAIN listener without users, an OAUTHBEARER listener without a
JWKS endpoint, a SASL inter-node listener without credentials for this node, each stops the start
with one sentence naming the setting.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from pylog.config import BrokerConfig, ConfigError
from pylog.security.client import ClientSecurity
from pylog.security.jaas import PLAIN_LOGIN_MODULE, JaasEntry, parse_jaas
from pylog.security.jwks import JwksKeys
from pylog.security.oauth_client import ClientCredentialsTokens
from pylog.security.oauthbearer import (
    OAUTHBEARER,
    UNSECURED_VALIDATOR_CALLBACK_HANDLERS,
    VALIDATOR_CALLBACK_HANDLER,
    VALIDATOR_CALLBACK_HANDLERS,
    JwtRules,
    OAuthBearerValidation,
)
from pylog.security.principal import parse_mapping_rules
from pylog.security.sasl_server import PLAIN, SERVED_MECHANISMS, SaslServerSettings
from pylog.security.scram import CredentialLookup
from pylog.security.tls import node_client_context, server_context

log = logging.getLogger(__name__)

SSL_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class ListenerSecurity:
    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    principal_rules: tuple = ()
    sasl: SaslServerSettings | None = None
    max_receive_size: int = 524288  # frames accepted before SASL completes
    failed_auth_delay_ms: int = 100


PLAINTEXT_LISTENER = ListenerSecurity("PLAINTEXT", "PLAINTEXT")


def _getter(config: BrokerConfig, listener: str) -> Callable[[str], str | None]:
    return lambda name: config.listener_raw(listener, name)


def jaas_entry(config: BrokerConfig, listener: str, mechanism: str) -> JaasEntry | None:
    name = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    raw = config.listener_raw(listener, "sasl.jaas.config", mechanism)
    return parse_jaas(raw, where=name) if raw else None


def enabled_mechanisms(config: BrokerConfig, listener: str) -> tuple[str, ...]:
    raw = config.listener_raw(listener, "sasl.enabled.mechanisms") or ""
    mechanisms = tuple(m.strip().upper() for m in raw.split(",") if m.strip())
    for m in mechanisms:
        if m not in SERVED_MECHANISMS:
            raise ConfigError(
                f"listener {listener}: sasl.enabled.mechanisms names {m}, which pylog does not serve "
                f"(served: {', '.join(SERVED_MECHANISMS)})"
            )
    if not mechanisms:
        raise ConfigError(f"listener {listener}: sasl.enabled.mechanisms is empty")
    return mechanisms


def oauth_validation(config: BrokerConfig, listener: str) -> OAuthBearerValidation:
    """How ``listener`` checks OAUTHBEARER tokens (settings as Kafka's, each also under
    ``listener.name.<listener>.oauthbearer.``)."""

    def get(name: str) -> str | None:
        return config.listener_raw(listener, name, OAUTHBEARER)

    prefix = f"listener.name.{listener.lower()}.oauthbearer."
    handler = (get("sasl.server.callback.handler.class") or "").strip()
    audience = tuple(
        a.strip() for a in (get("sasl.oauthbearer.expected.audience") or "").split(",") if a.strip()
    )
    try:
        rules = JwtRules(
            audience,
            get("sasl.oauthbearer.expected.issuer") or None,
            get("sasl.oauthbearer.sub.claim.name") or "sub",
            get("sasl.oauthbearer.scope.claim.name") or "scope",
            int(get("sasl.oauthbearer.clock.skew.seconds") or 30),
        )
    except ValueError as exc:
        raise ConfigError(f"listener {listener}: sasl.oauthbearer.clock.skew.seconds: {exc}") from None
    if handler in UNSECURED_VALIDATOR_CALLBACK_HANDLERS:  # unsigned tokens, for tests only
        log.warning("listener %s accepts unsigned OAUTHBEARER tokens (%s)", listener, handler)
        entry = jaas_entry(config, listener, OAUTHBEARER)
        options = entry.options if entry is not None else {}
        skew_ms = int(options.get("unsecuredValidatorAllowableClockSkewMs") or 0)
        return OAuthBearerValidation(
            JwtRules(
                sub_claim=options.get("unsecuredValidatorPrincipalClaimName") or "sub",
                scope_claim=options.get("unsecuredValidatorScopeClaimName") or "scope",
                clock_skew_s=skew_ms // 1000,
            ),
            None,
        )
    if handler and handler not in VALIDATOR_CALLBACK_HANDLERS:
        raise ConfigError(
            f"{prefix}sasl.server.callback.handler.class={handler}: pylog validates OAUTHBEARER tokens "
            f"with {VALIDATOR_CALLBACK_HANDLER} (signed, against a JWKS endpoint) only"
        )
    url = get("sasl.oauthbearer.jwks.endpoint.url")
    if not url:
        raise ConfigError(
            f"listener {listener}: OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url (the identity "
            f"provider's keys) and {prefix}sasl.server.callback.handler.class={VALIDATOR_CALLBACK_HANDLER}"
        )
    try:
        keys = JwksKeys(
            url,
            int(get("sasl.oauthbearer.jwks.endpoint.refresh.ms") or 3600000),
            int(get("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms") or 100),
            int(get("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms") or 10000),
        )
    except ValueError as exc:
        raise ConfigError(f"listener {listener}: sasl.oauthbearer.jwks.endpoint.*: {exc}") from None
    return OAuthBearerValidation(rules, keys)


def listener_security(
    config: BrokerConfig, name: str, protocol: str, scram_credentials: CredentialLookup
) -> ListenerSecurity:
    """The server side of one listener; raises ConfigError naming what is wrong."""
    where = f"listener {name}: "
    get = _getter(config, name)
    ctx = server_context(get, where) if protocol in SSL_PROTOCOLS else None
    sasl = None
    if protocol in SASL_PROTOCOLS:
        mechanisms = enabled_mechanisms(config, name)
        users: dict[str, str] = {}
        if PLAIN in mechanisms:
            entry = jaas_entry(config, name, PLAIN)
            if entry is None or entry.login_module != PLAIN_LOGIN_MODULE:
                raise ConfigError(
                    f"{where}PLAIN needs listener.name.{name.lower()}.plain.sasl.jaas.config="
                    f'{PLAIN_LOGIN_MODULE} required user_<name>="<password>" ...;'
                )
            users = entry.plain_users
        sasl = SaslServerSettings(
            mechanisms,
            users,
            scram_credentials,
            int(config.listener_raw(name, "connections.max.reauth.ms") or 0),
            oauth_validation(config, name) if OAUTHBEARER in mechanisms else None,
        )
    return ListenerSecurity(
        name,
        protocol,
        ctx,
        parse_mapping_rules(get("ssl.principal.mapping.rules")),
        sasl,
        int(get("sasl.server.max.receive.size") or 524288),
        int(get("connection.failed.authentication.delay.ms") or 0),
    )


def node_token_source(config: BrokerConfig, listener: str) -> ClientCredentialsTokens:
    """This node's OAUTHBEARER tokens for ``listener`` of other nodes: the token endpoint
    (``sasl.oauthbearer.token.endpoint.url``) and this node's client credentials
    (``sasl.oauthbearer.client.credentials.client.id`` / ``...secret``, or ``clientId`` /
    ``clientSecret`` / ``scope`` in the listener's OAuthBearerLoginModule JAAS line)."""

    def get(name: str) -> str | None:
        return config.listener_raw(listener, name, OAUTHBEARER)

    entry = jaas_entry(config, listener, OAUTHBEARER)
    options = entry.options if entry is not None else {}
    url = get("sasl.oauthbearer.token.endpoint.url")
    client_id = get("sasl.oauthbearer.client.credentials.client.id") or options.get("clientId")
    secret = get("sasl.oauthbearer.client.credentials.client.secret") or options.get("clientSecret")
    if not url or not client_id or secret is None:
        raise ConfigError(
            f"listener {listener}: this node connects to other nodes with OAUTHBEARER, so it needs "
            "sasl.oauthbearer.token.endpoint.url and its client credentials (clientId=\"...\" "
            f'clientSecret="..." in listener.name.{listener.lower()}.oauthbearer.sasl.jaas.config)'
        )
    scope = get("sasl.oauthbearer.scope") or options.get("scope")
    return ClientCredentialsTokens(url, client_id, secret, scope)


def node_client_security(
    config: BrokerConfig, listener: str, protocol: str, mechanism_config: str
) -> ClientSecurity:
    """How this node connects to ``listener`` of another node: TLS with the listener's truststore
    (and keystore, for mutual TLS), SASL with ``mechanism_config``'s mechanism and this node's
    credentials from the listener's JAAS line (``username=`` / ``password=``)."""
    where = f"listener {listener}: "
    ctx = node_client_context(_getter(config, listener), where) if protocol in SSL_PROTOCOLS else None
    mechanism = username = password = None
    if protocol in SASL_PROTOCOLS:
        mechanism = (config.raw(mechanism_config) or "").strip().upper()
        if mechanism not in SERVED_MECHANISMS:
            raise ConfigError(
                f"{mechanism_config}={mechanism}: nodes connect to the {protocol} listener {listener} with "
                f"SASL, so set it to one of {', '.join(SERVED_MECHANISMS)}"
            )
        if mechanism == OAUTHBEARER:
            return ClientSecurity(protocol, ctx, mechanism, oauth=node_token_source(config, listener))
        entry = jaas_entry(config, listener, mechanism)
        if entry is None or "username" not in entry.options or "password" not in entry.options:
            raise ConfigError(
                f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config must give this "
                'node\'s own username="..." password="..." (it connects to other nodes on that listener)'
            )
        username, password = entry.options["username"], entry.options["password"]
    return ClientSecurity(protocol, ctx, mechanism, username, password)
