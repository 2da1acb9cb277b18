"""The one HTML shell of report --html and diff --html: a self-contained page, its data embedded safely."""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from typing import Any

from autonvtx.recorder.model import valid_text

# A page is read where it was written, offline: its style and script are inlined from the
# package's assets/ (page.* for both pages, then the page's own).
_ASSETS = "assets"

# Inside a <script> element the HTML parser ends the element at "</script", and "<!--" followed by
# "<script" opens the "script data double escaped state", which swallows the rest of the page
# (HTML Living Standard, 13.2.5.20-27). JSON reads "\u003c" as "<", so no "<" (nor ">" and "&",
# for good measure) needs to reach the element. U+2028/2029 are valid in JSON but were line
# breaks in JavaScript before ES2019: escaped too.
_SCRIPT_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SCRIPT_UNSAFE_PATTERN = re.compile("[<>&\u2028\u2029]")


def script_json(payload: str) -> str:
    """A JSON text made safe to sit inside a <script> element; JSON.parse reads the same value."""
    return _SCRIPT_UNSAFE_PATTERN.sub(lambda match: _SCRIPT_UNSAFE[match.group(0)], valid_text(payload))


def json_text(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def asset(name: str) -> str:
    return (resources.files("autonvtx.report.render") / _ASSETS / name).read_text(encoding="utf-8")


def render_shell(page: str, title: str, payload: str, panes: str) -> str:
    """The page `page` ("report" or "diff"): the shell's header, then `panes` (static markup that the
    page's script fills), with `payload` (a JSON text) embedded as its data."""
    style = asset("page.css") + asset(f"{page}.css")
    script = asset("page.js") + asset(f"{page}.js")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(valid_text(title))}</title>"
        f"<style>\n{style}</style></head><body>"
        f'<script type="application/json" id="page-data">{script_json(payload)}</script>'
        '<header><h1 id="title"></h1><div id="summary"></div><div id="legend"></div><ul id="notes"></ul></header>'
        f"{panes}"
        '<div id="tip" hidden></div>'
        f"<script>\n{script}</script></body></html>\n"
    )
