"""A real OpenID Connect provider for the OAUTHBEARER tests: ``oidc-provider`` (npm, installed in
compat-tests/oidc by ``make oidc``) run by compat-tests/oidc/provider.js on 127.0.0.1, issuing
signed JWT access tokens to client_credentials clients. Its RSA keys are made here, so a test can
also sign tokens of its own with them (or with a key the provider never had), and rotate them by
restarting the provider on the same port with a new key."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from joserfc import jwt
from joserfc.jwk import RSAKey

from pylog.local import free_port

OIDC_DIR = Path(__file__).resolve().parent / "oidc"
AUDIENCE = "urn:pylog:cluster"
SCOPE = "kafka"
START_TIMEOUT_S = 30


def new_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "alg": "RS256", "use": "sig"}, private=True)


def sign(key: RSAKey, claims: dict[str, Any], kid: str | None = None) -> str:
    """A JWT signed with ``key`` (kid: ``kid`` or the key's own)."""
    return jwt.encode({"alg": "RS256", "typ": "at+jwt", "kid": kid or key.kid}, claims, key)


def unsigned(claims: dict[str, Any]) -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims)}."


@dataclass
class OidcProvider:
    workdir: Path
    clients: dict[str, str]  # client_id -> secret
    ttl_s: int = 300
    port: int = field(default_factory=free_port)
    key: RSAKey = field(default_factory=lambda: new_key("k1"))
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token_url(self) -> str:
        return f"{self.issuer}/token"

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/jwks"

    def start(self) -> OidcProvider:
        node = shutil.which("node")
        if node is None or not (OIDC_DIR / "node_modules" / "oidc-provider").is_dir():
            raise RuntimeError("the OIDC provider is not installed: run `make oidc` (node and npm)")
        self.starts += 1
        config = self.workdir / f"oidc-{self.starts}.json"
        config.write_text(
            json.dumps(
                {
                    "keys": [self.key.as_dict(private=True)],
                    "audience": AUDIENCE,
                    "scope": SCOPE,
                    "ttl": self.ttl_s,
                    "clients": [{"client_id": c, "client_secret": s} for c, s in self.clients.items()],
                }
            )
        )
        log = open(self.workdir / "oidc.log", "ab")  # noqa: SIM115 - the child holds it
        self.proc = subprocess.Popen(
            [node, str(OIDC_DIR / "provider.js"), str(self.port), str(config)],
            stdout=subprocess.PIPE,
            stderr=log,
            cwd=OIDC_DIR,
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith(b"ready "):
                return self
            if not line and self.proc.poll() is not None:
                break
        self.stop()
        raise RuntimeError(f"the OIDC provider did not start; see {self.workdir / 'oidc.log'}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def rotate(self, kid: str) -> None:
        """The provider signs with a new key from now on (and publishes only that one)."""
        self.stop()
        self.key = new_key(kid)
        self.start()

    def token(self, client_id: str, secret: str | None = None) -> str:
        """An access token from the token endpoint (client_credentials, secret in a Basic header)."""
        data = urllib.parse.urlencode({"grant_type": "client_credentials", "scope": SCOPE}).encode()
        basic = base64.b64encode(f"{client_id}:{secret or self.clients[client_id]}".encode()).decode()
        req = urllib.request.Request(self.token_url, data, headers={"Authorization": f"Basic {basic}"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return str(json.load(resp)["access_token"])

    def claims(self, sub: str, **overrides: Any) -> dict[str, Any]:
        """The claims the provider would put in ``sub``'s token, with ``overrides``."""
        now = int(time.time())
        claims = {"sub": sub, "client_id": sub, "iat": now, "exp": now + self.ttl_s, "scope": SCOPE,
                  "iss": self.issuer, "aud": AUDIENCE}
        claims.update(overrides)
        return claims
