"""Certificates made in the test (``trustme``) and the security settings of each real client.

``Pki`` writes a CA, the broker's PEM keystore (key + chain for localhost / 127.0.0.1) and client
certificates. ``client_config`` spells one set of settings (protocol, mechanism, user, password,
CA, client certificate) the way each client wants it, for ``compat_clients``' ``config=``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trustme

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
LISTENER_RE = re.compile(r"pylog listener (\w+) on ([\d.]+):(\d+)")


@dataclass
class Pki:
    dir: Path
    ca: Path
    server: Path  # key + certificate chain (ssl.keystore.location)

    @classmethod
    def make(cls, directory: Path) -> Pki:
        directory.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA(organization_name="pylog test CA")
        ca.cert_pem.write_to_path(str(directory / "ca.pem"))
        server = ca.issue_cert("localhost", "127.0.0.1")
        server.private_key_and_cert_chain_pem.write_to_path(str(directory / "server.pem"))
        pki = cls(directory, directory / "ca.pem", directory / "server.pem")
        pki._ca = ca  # type: ignore[attr-defined]
        return pki

    def client_cert(self, common_name: str) -> tuple[Path, Path]:
        """(certificate chain, private key) of a client whose subject is CN=<name>,O=pylog tests."""
        cert = self._ca.issue_cert(
            f"{common_name}.clients.test",
            common_name=common_name,  # type: ignore[attr-defined]
            organization_name="pylog tests",
        )
        chain = self.dir / f"{common_name}.crt"
        key = self.dir / f"{common_name}.key"
        chain.write_bytes(b"".join(b.bytes() for b in cert.cert_chain_pems))
        key.write_bytes(cert.private_key_pem.bytes())
        return chain, key

    def other_ca(self) -> Path:
        """A CA that did not sign the broker's certificate."""
        path = self.dir / "other-ca.pem"
        trustme.CA().cert_pem.write_to_path(str(path))
        return path


def listener_ports(log_text: str) -> dict[str, int]:
    """The ports the broker printed for its listeners other than the first."""
    return {m.group(1): int(m.group(3)) for m in LISTENER_RE.finditer(log_text)}


def broker_config(pki: Pki, **extra: str) -> dict[str, str]:
    """A broker with PLAINTEXT (the --listen one), SSL (mutual TLS), SASL_PLAINTEXT and SASL_SSL
    listeners, PLAIN users bob and eve, SCRAM, the standard authorizer and ANONYMOUS (PLAINTEXT) as
    a super user."""
    jaas = f'{PLAIN_MODULE} required user_bob="bob-secret" user_eve="eve-secret";'
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:ANONYMOUS;User:admin",
        "auto.create.topics.enable": "false",
    }
    config.update(extra)
    return config


def client_config(
    client: str,
    protocol: str,
    *,
    mechanism: str | None = None,
    user: str | None = None,
    password: str | None = None,
    ca: Path | None = None,
    cert: tuple[Path, Path] | None = None,
) -> dict[str, Any]:
    sasl = protocol.startswith("SASL")
    tls = protocol.endswith("SSL")
    if client in ("confluent-kafka", "kcat"):
        out: dict[str, Any] = {"security.protocol": protocol.lower() if client == "kcat" else protocol}
        if sasl:
            out.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
        if tls:
            out["ssl.ca.location"] = str(ca)
            if cert:
                out.update({"ssl.certificate.location": str(cert[0]), "ssl.key.location": str(cert[1])})
        return out
    if client in ("kafka-python", "aiokafka"):
        out = {"security_protocol": protocol}
        if sasl:
            out.update(
                {"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
            )
        if tls:
            if client == "kafka-python":
                out["ssl_cafile"] = str(ca)
                if cert:
                    out.update({"ssl_certfile": str(cert[0]), "ssl_keyfile": str(cert[1])})
            else:
                from aiokafka.helpers import create_ssl_context

                kw = {"certfile": str(cert[0]), "keyfile": str(cert[1])} if cert else {}
                out["ssl_context"] = create_ssl_context(cafile=str(ca), **kw)
        return out
    if client == "kafkajs":
        out = {}
        if sasl:
            out["sasl"] = {"mechanism": (mechanism or "").lower(), "username": user, "password": password}
        if tls:
            out["ssl"] = {"ca": str(ca), **({"cert": str(cert[0]), "key": str(cert[1])} if cert else {})}
        return out
    raise ValueError(client)
