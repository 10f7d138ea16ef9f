"""``KafkaPrincipal``: who a connection is, as ACLs and ``super.users`` name it (``User:alice``).

A PLAINTEXT connection, or an SSL one without a client certificate, is ``User:ANONYMOUS``. SASL
gives ``User:<authorization id>``. Mutual TLS gives the certificate's subject as RFC 2253 (the
string Java's ``X500Principal.getName()`` prints: most specific attribute first,
``CN=alice,OU=eng,O=Example,C=US``), mapped through ``ssl.principal.mapping.rules`` (Kafka's
syntax: ``RULE:pattern/replacement/[LU]``, then ``DEFAULT``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pylog.config import ConfigError

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``"User:alice"``; raises ValueError without a type (``SecurityUtils.parseKafkaPrincipal``)."""
        kind, sep, name = text.partition(":")
        if not sep or not kind:
            raise ValueError(f"expected a principal as Type:name (e.g. User:alice), got {text!r}")
        return cls(kind, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal(USER_TYPE, name)


def parse_super_users(value: str | None) -> frozenset[KafkaPrincipal]:
    """``super.users``: principals separated by semicolons (``User:admin;User:ops``)."""
    out = set()
    for item in (value or "").split(";"):
        item = item.strip()
        if not item:
            continue
        try:
            out.add(KafkaPrincipal.parse(item))
        except ValueError as exc:
            raise ConfigError(f"super.users: {exc}") from None
    return frozenset(out)


# Attribute keywords Java's RFC 2253 output uses (others print as their OID in Java; by name here).
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def distinguished_name(peercert: Mapping[str, Any]) -> str:
    """The RFC 2253 subject of a certificate as ``ssl`` decodes it (``SSLObject.getpeercert()``)."""
    rdns = []
    for rdn in reversed(peercert.get("subject", ())):
        rdns.append("+".join(f"{_KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        m = self.pattern.fullmatch(dn)
        if m is None:
            return None
        out = m.expand(re.sub(r"\$(\d)", r"\\\1", self.replacement))
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


_RULE = re.compile(r"\s*RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?)\s*(?:,|$)|\s*DEFAULT\s*(?:,|$)")


def parse_mapping_rules(value: str | None) -> tuple[_Rule, ...]:
    """``ssl.principal.mapping.rules`` (Kafka's ``SslPrincipalMapper``)."""
    text = (value or "DEFAULT").strip()
    rules: list[_Rule] = []
    pos = 0
    while pos < len(text):
        m = _RULE.match(text, pos)
        if m is None or m.end() == pos:
            raise ConfigError(f"ssl.principal.mapping.rules: cannot parse {text[pos:]!r}")
        if m.group(0).strip().startswith("DEFAULT"):
            rules.append(_Rule(None))
        else:
            pattern = m.group(1).replace("\\/", "/")
            try:
                rules.append(_Rule(re.compile(pattern), m.group(2).replace("\\/", "/"), m.group(3)))
            except re.error as exc:
                raise ConfigError(f"ssl.principal.mapping.rules: bad pattern {pattern!r}: {exc}") from None
        pos = m.end()
    return tuple(rules)


def ssl_principal(
    peercert: Mapping[str, Any] | None, rules: Iterable[_Rule] = (_Rule(None),)
) -> KafkaPrincipal:
    """The principal of a TLS connection: ANONYMOUS without a client certificate, else its mapped
    subject (a subject no rule matches is refused, as Kafka refuses it)."""
    if not peercert:
        return ANONYMOUS
    dn = distinguished_name(peercert)
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return user(name)
    raise PermissionError(f"no ssl.principal.mapping.rules rule matches the certificate subject {dn!r}")
