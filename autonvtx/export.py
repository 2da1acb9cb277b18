"""`autonvtx export`: what a plan selects, written in another tool's format (Nsight Systems'
--python-functions-trace JSON, which `configfile.nsys` reads back)."""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from autonvtx.listing import Plan


def plan_to_nsys_json(plan: Plan) -> str:
    """The functions a plan selects as Nsight Systems' JSON: one entry per (module, domain,
    color), each function named where it is defined (so reading the file back selects the
    same functions)."""
    grouped: dict[tuple[str, str, int], list[str]] = {}
    for rule, planned in plan.selected:
        for p in planned:
            if p.module == "__main__":
                continue  # Nsight Systems cannot name the script's own functions
            style = plan.config.style(rule, p.module)
            grouped.setdefault((p.module, style.domain, style.color), []).append(p.qualname)
    return to_nsys_json(
        (module, sorted(set(names)), domain, color)
        for (module, domain, color), names in sorted(grouped.items())
    )


def to_nsys_json(entries: Iterable[tuple[str, Sequence[str], str | None, int | None]]) -> str:
    """Nsight Systems' JSON for (module, function names, domain, color) entries; a color is
    0xAARRGGBB and is written as "RRGGBB"."""
    out = []
    for module, functions, domain, color in entries:
        entry: dict[str, Any] = {"module": module}
        if domain is not None:
            entry["domain"] = domain
        if color is not None:
            entry["color"] = f"{color & 0xFFFFFF:06X}"
        entry["functions"] = list(functions)
        out.append(entry)
    return json.dumps(out, indent=4) + "\n"

