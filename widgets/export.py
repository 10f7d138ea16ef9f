"""A widget as one self-contained HTML page: its ESM, CSS and current state inlined, drawn by the same
front-end code a notebook runs, through a small stand-in for the widget model. No network: the page
works offline and from ``file://`` (a report, an e-mail attachment, a headless browser test)."""

from __future__ import annotations

import json
import os
from html import escape
from typing import Any

_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>body {{ margin: 16px; }}
{css}</style></head>
<body><div id="pylog-root"></div>
<script type="application/json" id="pylog-state">{state}</script>
<script type="application/json" id="pylog-esm">{esm}</script>
<script type="module">
const state = JSON.parse(document.getElementById("pylog-state").textContent);
const esm = JSON.parse(document.getElementById("pylog-esm").textContent);
const listeners = {{}};
const model = {{
  get: (name) => state[name],
  set(name, value) {{
    state[name] = value;
    (listeners["change:" + name] || []).slice().forEach((f) => f());
  }},
  save_changes() {{}},
  send() {{}},
  on(event, f) {{ (listeners[event] = listeners[event] || []).push(f); }},
  off(event, f) {{ listeners[event] = (listeners[event] || []).filter((g) => g !== f); }},
}};
try {{
  const url = URL.createObjectURL(new Blob([esm], {{ type: "text/javascript" }}));
  const mod = await import(url);
  const widget = typeof mod.default === "function" ? await mod.default() : mod.default;
  // anywidget's lifecycle: initialize once per model, then render into each view
  if (typeof widget.initialize === "function") await widget.initialize({{ model }});
  await widget.render({{ model, el: document.getElementById("pylog-root") }});
  document.body.setAttribute("data-rendered", "ok");
}} catch (err) {{
  document.body.setAttribute("data-rendered", "error");
  document.getElementById("pylog-root").textContent = "render failed: " + err;
}}
</script></body></html>
"""


def _script_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":")).replace("</", "<\\/")


def to_html(widget: Any, *, title: str | None = None) -> str:
    """`widget` (an anywidget) as a standalone HTML page of its current state."""
    state = dict(widget.get_state())
    esm = state.pop("_esm", "")
    css = state.pop("_css", "") or ""
    state = {k: v for k, v in state.items() if not isinstance(v, (bytes, bytearray, memoryview))}
    return _PAGE.format(title=escape(title or type(widget).__name__), css=css.replace("</", "<\\/"),
                        state=_script_json(state), esm=_script_json(esm))


def save_html(widget: Any, path: str | os.PathLike[str], *, title: str | None = None) -> str:
    """Write `to_html(widget)` to `path`; returns the path."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(to_html(widget, title=title))
    return os.fspath(path)
