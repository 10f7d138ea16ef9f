"""SCRAM credentials (RFC 5802 / 7677) as Kafka stores them, and the server side of an exchange.

A credential is what the broker keeps instead of a password: a random salt, an iteration count,
``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and ``ServerKey = HMAC(SaltedPassword,
"Server Key")``. Credentials live in the metadata log (``UserScramCredentialRecord``) so every
node of a cluster checks the same ones. The exchange itself is ``scramp``'s.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from scramp import ScramException, ScramMechanism

from pylog.config import ConfigError


class ScramMechanismType(IntEnum):
    """Kafka's ``ScramMechanism`` ids (AlterUserScramCredentials, UserScramCredentialRecord)."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        return self.name.replace("_", "-")

    @classmethod
    def from_name(cls, name: str) -> ScramMechanismType:
        try:
            return cls[name.strip().upper().replace("-", "_")]
        except KeyError:
            return cls.UNKNOWN


SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
_HASHES = {ScramMechanismType.SCRAM_SHA_256: hashlib.sha256, ScramMechanismType.SCRAM_SHA_512: hashlib.sha512}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: ScramMechanismType
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def credential_from_salted_password(
    mechanism: ScramMechanismType, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """What AlterUserScramCredentials sends (the client salts) turned into what the broker keeps."""
    hf = _HASHES[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", hf).digest()
    server_key = hmac.new(salted_password, b"Server Key", hf).digest()
    return ScramCredential(mechanism, salt, hf(client_key).digest(), server_key, iterations)


def salted_password(mechanism: ScramMechanismType, password: str, salt: bytes, iterations: int) -> bytes:
    """``Hi(password, salt, i)`` (PBKDF2 with the mechanism's HMAC)."""
    return hashlib.pbkdf2_hmac(_HASHES[mechanism]().name, password.encode(), salt, iterations)


def make_credential(
    mechanism: ScramMechanismType,
    password: str,
    *,
    iterations: int = DEFAULT_ITERATIONS,
    salt: bytes | None = None,
) -> ScramCredential:
    salt = salt if salt is not None else os.urandom(32)
    return credential_from_salted_password(
        mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations
    )


def verify_password(cred: ScramCredential, password: str) -> bool:
    """Whether ``password`` is the one ``cred`` was made from: the salted password derived with the
    stored salt and iterations gives the stored StoredKey and ServerKey (compared in constant time).
    For checks outside a SCRAM exchange, such as HTTP Basic on the schema registry."""
    if cred.mechanism not in _HASHES:
        return False
    derived = credential_from_salted_password(
        cred.mechanism, cred.salt, salted_password(cred.mechanism, password, cred.salt, cred.iterations),
        cred.iterations,
    )
    stored_ok = hmac.compare_digest(derived.stored_key, cred.stored_key)
    return hmac.compare_digest(derived.server_key, cred.server_key) and stored_ok


def check_iterations(iterations: int) -> str | None:
    """Kafka's bounds for a stored credential; the message when out of them."""
    if iterations < MIN_ITERATIONS:
        return f"Iterations {iterations} is less than the minimum of {MIN_ITERATIONS}"
    if iterations > MAX_ITERATIONS:
        return f"Iterations {iterations} is more than the maximum of {MAX_ITERATIONS}"
    return None


def sasl_name_to_username(name: str) -> str:
    """SCRAM escapes ',' and '=' in user names as '=2C' and '=3D'."""
    return name.replace("=2C", ",").replace("=3D", "=")


class AuthenticationFailed(Exception):
    """The client's credentials were refused; the message is what the client is told, ``reason``
    what the broker logs."""

    reason: str = ""


CredentialLookup = Callable[[str, ScramMechanismType], "ScramCredential | None"]


class ScramServerExchange:
    """One SCRAM exchange on the server: client-first -> server-first, client-final -> server-final.

    ``step`` returns the server's answer and raises AuthenticationFailed for an unknown user, a
    wrong proof or a malformed message. ``username`` is known after the first step."""

    def __init__(self, mechanism: str, lookup: CredentialLookup) -> None:
        self.mechanism = mechanism
        self._type = ScramMechanismType.from_name(mechanism)
        self._lookup = lookup
        self._server = ScramMechanism(mechanism).make_server(self._auth_info)
        self.username: str | None = None
        self.complete = False

    def _failed(self, reason: str) -> AuthenticationFailed:
        failed = AuthenticationFailed(
            "Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {self.mechanism}"
        )
        failed.reason = reason  # for the broker's log, not for the client
        return failed

    def _auth_info(self, sasl_name: str) -> tuple[bytes, bytes, bytes, int]:
        name = sasl_name_to_username(sasl_name)
        cred = self._lookup(name, self._type)
        if cred is None:
            raise ScramException(f"unknown user {name!r}")
        self.username = name
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def _tolerate_repeated_client_nonce(self, client_final: str) -> None:
        """Kafka accepts a client-final nonce that *ends with* the server's nonce (librdkafka up to
        2.0 sends its own nonce again in front of it and signs that message); the proof is then
        checked over the message as sent, exactly as for a conforming client."""
        nonce = next((a[2:] for a in client_final.split(",") if a.startswith("r=")), None)
        expected = self._server.nonce
        if nonce is not None and nonce != str(expected) and nonce.endswith(str(expected)):
            self._server.nonce = type(expected)(nonce)

    def step(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Authentication failed: the SCRAM message is not UTF-8") from None
        try:
            if self._server.stage is None:
                self._server.set_client_first(text)  # (an authorization id is refused)
                return self._server.get_server_first().encode()
            self._tolerate_repeated_client_nonce(text)
            self._server.set_client_final(text)
            final = self._server.get_server_final().encode()
        except ScramException as exc:
            raise self._failed(str(exc)) from None
        except (KeyError, ValueError, IndexError):
            raise AuthenticationFailed("Authentication failed: malformed SCRAM message") from None
        self.complete = True
        return final


# --- kafka-storage format --add-scram ---------------------------------------------------------

_ADD_SCRAM = re.compile(r"^\s*(SCRAM-SHA-256|SCRAM-SHA-512)\s*=\s*\[(.*)\]\s*$", re.IGNORECASE)


def parse_add_scram(spec: str) -> tuple[str, ScramCredential]:
    """``SCRAM-SHA-256=[name=alice,password=alice-secret]`` (also ``iterations=``, ``salt=`` and
    ``saltedpassword=`` in base64, as ``kafka-storage format --add-scram`` takes) -> (user, credential)."""
    m = _ADD_SCRAM.match(spec)
    if m is None:
        raise ConfigError(
            f"--add-scram {spec!r}: expected MECHANISM=[name=USER,password=PASSWORD] with MECHANISM "
            "SCRAM-SHA-256 or SCRAM-SHA-512"
        )
    mechanism = ScramMechanismType.from_name(m.group(1))
    fields: dict[str, str] = {}
    for part in _split_fields(m.group(2)):
        key, sep, value = part.partition("=")
        if not sep:
            raise ConfigError(f"--add-scram {spec!r}: {part!r} is not key=value")
        fields[key.strip().lower()] = _unquote(value.strip())
    name = fields.get("name")
    if not name:
        raise ConfigError(f"--add-scram {spec!r}: name= is required")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise ConfigError(f"--add-scram {spec!r}: iterations must be a number") from None
    bad = check_iterations(iterations)
    if bad:
        raise ConfigError(f"--add-scram {spec!r}: {bad}")
    salt = _bytes_field(fields, "salt", spec)
    if "saltedpassword" in fields:
        salted = _bytes_field(fields, "saltedpassword", spec)
        if salt is None or salted is None:
            raise ConfigError(f"--add-scram {spec!r}: saltedpassword= needs salt=")
        return name, credential_from_salted_password(mechanism, salt, salted, iterations)
    if "password" not in fields:
        raise ConfigError(f"--add-scram {spec!r}: password= (or salt= and saltedpassword=) is required")
    return name, make_credential(mechanism, fields["password"], iterations=iterations, salt=salt)


def _split_fields(text: str) -> list[str]:
    out: list[str] = []
    buf: list[str] = []
    quoted = False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            out.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
    if "".join(buf).strip():
        out.append("".join(buf))
    return [p.strip() for p in out if p.strip()]


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value


def _bytes_field(fields: dict[str, str], key: str, spec: str) -> bytes | None:
    value = fields.get(key)
    if value is None:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (ValueError, binascii.Error):
        raise ConfigError(f"--add-scram {spec!r}: {key}= must be base64") from None
