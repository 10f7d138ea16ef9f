"""TLS contexts from Kafka's ``ssl.*`` settings (PEM keystores and truststores only).

A listener's keystore is one PEM file holding the private key (encrypted with ``ssl.key.password``
or not) and its certificate chain (``ssl.keystore.location``), or the same as PEM text
(``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``); trusted CAs come from
``ssl.truststore.location`` or ``ssl.truststore.certificates``. ``ssl.enabled.protocols`` bounds
the TLS versions offered.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Callable, Iterator, Sequence

from pylog.config import ConfigError

_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}

Setting = Callable[[str], "str | None"]  # a config value by its Kafka name, as one listener sees it


def _set_protocols(ctx: ssl.SSLContext, enabled: Sequence[str], where: str) -> None:
    versions = []
    for name in enabled:
        v = _VERSIONS.get(name.strip())
        if v is None:
            raise ConfigError(
                f"{where}ssl.enabled.protocols: unknown protocol {name!r} (one of {', '.join(_VERSIONS)})"
            )
        versions.append(v)
    if not versions:
        raise ConfigError(f"{where}ssl.enabled.protocols is empty")
    ctx.minimum_version = min(versions)
    ctx.maximum_version = max(versions)


@contextlib.contextmanager
def _pem_file(text: str) -> Iterator[str]:
    """PEM text as a private temporary file, for OpenSSL calls that read files only."""
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        yield path
    finally:
        os.unlink(path)


def _check_pem_type(get: Setting, key: str, where: str) -> None:
    kind = (get(key) or "JKS").upper()
    if kind != "PEM":
        raise ConfigError(f"{where}{key}={kind} is not supported: pylog reads PEM files (set {key}=PEM)")


def _load_keystore(ctx: ssl.SSLContext, get: Setting, where: str, *, required: bool) -> bool:
    location, key, chain = (
        get("ssl.keystore.location"),
        get("ssl.keystore.key"),
        get("ssl.keystore.certificate.chain"),
    )
    if not (location or key or chain):
        if required:
            raise ConfigError(
                f"{where}ssl.keystore.location is required (a PEM file with the key and its "
                "certificate chain)"
            )
        return False
    _check_pem_type(get, "ssl.keystore.type", where)
    password = get("ssl.key.password")
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
        else:
            if not (key and chain):
                raise ConfigError(f"{where}ssl.keystore.key and ssl.keystore.certificate.chain go together")
            with _pem_file(chain) as cert_path, _pem_file(key) as key_path:
                ctx.load_cert_chain(cert_path, key_path, password=password)
    except (OSError, ssl.SSLError) as exc:
        what = location or "ssl.keystore.key"
        raise ConfigError(
            f"{where}cannot load the keystore {what}: {exc} (a PEM private key, decrypted with "
            "ssl.key.password when encrypted, and its certificate chain)"
        ) from None
    return True


def _load_truststore(ctx: ssl.SSLContext, get: Setting, where: str) -> bool:
    location, certs = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    if not (location or certs):
        return False
    _check_pem_type(get, "ssl.truststore.type", where)
    try:
        if location:
            ctx.load_verify_locations(cafile=location)
        else:
            ctx.load_verify_locations(cadata=certs)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"{where}cannot load the truststore {location or 'ssl.truststore.certificates'}: {exc}"
        ) from None
    return True


def server_context(get: Setting, where: str = "") -> ssl.SSLContext:
    """The TLS context of a listener (``where`` prefixes error messages, e.g. ``listener SSL: ``)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols(ctx, (get("ssl.enabled.protocols") or "").split(","), where)
    _load_keystore(ctx, get, where, required=True)
    client_auth = (get("ssl.client.auth") or "none").strip().lower()
    if client_auth not in CLIENT_AUTH:
        raise ConfigError(f"{where}ssl.client.auth must be required, requested or none, got {client_auth!r}")
    trusted = _load_truststore(ctx, get, where)
    if client_auth != "none" and not trusted:
        raise ConfigError(
            f"{where}ssl.client.auth={client_auth} needs ssl.truststore.location (the CAs of client "
            "certificates)"
        )
    ctx.verify_mode = CLIENT_AUTH[client_auth]
    return ctx


def node_client_context(get: Setting, where: str = "") -> ssl.SSLContext:
    """The context this node uses to connect to another node's TLS listener: the listener's
    truststore verifies the peer, its keystore (if any) is this node's client certificate."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_protocols(ctx, (get("ssl.enabled.protocols") or "").split(","), where)
    if not _load_truststore(ctx, get, where):
        ctx.load_default_certs()
    _load_keystore(ctx, get, where, required=False)
    ctx.check_hostname = (get("ssl.endpoint.identification.algorithm") or "").strip().lower() == "https"
    return ctx


def client_context(
    *,
    cafile: str | None = None,
    cadata: str | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    password: str | None = None,
    check_hostname: bool = True,
) -> ssl.SSLContext:
    """A client's context from PEM files (the SDK's ``ssl.ca.location`` / ``ssl.cafile`` ...)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cafile or cadata:
        ctx.load_verify_locations(cafile=cafile, cadata=cadata)
    else:
        ctx.load_default_certs()
    if certfile:
        ctx.load_cert_chain(certfile, keyfile, password=password)
    ctx.check_hostname = check_hostname
    return ctx
