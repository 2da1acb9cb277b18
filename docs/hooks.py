"""MkDocs hook: a page includes a file of the repository root, so README.md and ARCHITECTURE.md
stay the one copy of what they say and the site shows them.

`<!-- include: FILE -->` puts FILE in whole (the home page is the README, its `docs/` links
made relative to the site); `<!-- include-section: FILE -->` drops FILE's title and moves its
headings one level down, to sit under the including page's own title."""

from __future__ import annotations

import os
import re
from typing import Any

_INCLUDE = re.compile(r"<!-- include(-section)?: (\S+) -->")
# The README's links into the site, as the site spells them.
_LINKS = ((r"\]\(docs/", "]("), (r"\]\(ARCHITECTURE\.md\)", "](internals.md)"))


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    root = os.path.dirname(os.path.abspath(config["config_file_path"]))

    def included(match: re.Match[str]) -> str:
        return _included(os.path.join(root, match.group(2)), section=bool(match.group(1)))

    return _INCLUDE.sub(included, markdown)


def _included(path: str, section: bool) -> str:
    with open(path, encoding="utf-8") as file:
        text = file.read()
    for pattern, replacement in _LINKS:
        text = re.sub(pattern, replacement, text)
    if not section:
        return text
    lines = text.splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    out, fenced = [], False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        out.append("#" + line if not fenced and line.startswith("#") else line)
    return "\n".join(out)
