"""JAAS configuration lines in Kafka's syntax (``sasl.jaas.config``):

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

One login module, a control flag, ``key=value`` options (values quoted with double quotes, where
backslash escapes the next character, or bare words), a closing semicolon.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pylog.config import ConfigError

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def plain_users(self) -> dict[str, str]:
        """PlainLoginModule's ``user_<name>="<password>"`` options: the users a broker accepts."""
        return {k[5:]: v for k, v in self.options.items() if k.startswith("user_") and len(k) > 5}


def _tokens(text: str, where: str) -> list[tuple[str, str]]:
    """(kind, value) with kind in word, string, '=', ';'."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in "=;":
            out.append((ch, ch))
            i += 1
        elif ch == '"':
            i += 1
            buf = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                buf.append(text[i])
                i += 1
            if i >= n:
                raise ConfigError(f"{where}: unterminated quoted value in the JAAS configuration")
            out.append(("string", "".join(buf)))
            i += 1
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in '=;"':
                j += 1
            out.append(("word", text[i:j]))
            i = j
    return out


def parse_jaas(text: str, *, where: str = "sasl.jaas.config") -> JaasEntry:
    """Parse one login module entry; raises ConfigError naming ``where`` when it is malformed."""
    toks = _tokens(text, where)
    if len(toks) < 3 or toks[0][0] != "word" or toks[1][0] != "word":
        raise ConfigError(f"{where}: expected 'LoginModuleClass required key=\"value\" ...;'")
    module, flag = toks[0][1], toks[1][1].lower()
    if flag not in CONTROL_FLAGS:
        raise ConfigError(f"{where}: invalid control flag {toks[1][1]!r} (one of {', '.join(CONTROL_FLAGS)})")
    options: dict[str, str] = {}
    i = 2
    while i < len(toks) and toks[i][0] != ";":
        if i + 2 >= len(toks) or toks[i][0] != "word" or toks[i + 1][0] != "=" or toks[i + 2][0] == ";":
            raise ConfigError(f'{where}: expected key="value" options after the control flag')
        options[toks[i][1]] = toks[i + 2][1]
        i += 3
    if i >= len(toks):
        raise ConfigError(f"{where}: the JAAS configuration must end with ';'")
    if i != len(toks) - 1:
        raise ConfigError(f"{where}: exactly one login module is allowed")
    return JaasEntry(module, flag, options)
