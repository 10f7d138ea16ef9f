"""Java ``.properties`` files (Kafka's ``server.properties``): ``key=value``, ``key: value`` or
``key value``, ``#`` / ``!`` comments, backslash line continuations and escapes."""

from __future__ import annotations

import re
from pathlib import Path

from pylog.config import ConfigError

_SEPARATOR = re.compile(r"(?<!\\)[=:\s]")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 5 < len(text) + 1:
                try:
                    out.append(chr(int(text[i + 2 : i + 6], 16)))
                    i += 6
                    continue
                except ValueError:
                    pass
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """The settings of a properties file's text, later keys winning."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    out: dict[str, str] = {}
    for line in logical:
        m = _SEPARATOR.search(line)
        if m is None:
            key, value = line, ""
        else:
            key, rest = line[: m.start()], line[m.end() :].lstrip()
            if m.group() not in "=:" and rest[:1] in ("=", ":"):
                rest = rest[1:].lstrip()
            value = rest
        out[_unescape(key.strip())] = _unescape(value.rstrip())
    return out


def read_properties(path: str | Path) -> dict[str, str]:
    try:
        text = Path(path).read_text("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    return parse_properties(text)
