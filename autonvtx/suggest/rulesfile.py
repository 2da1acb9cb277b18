"""A suggestion written as an `autonvtx.toml` a person can review: a rule per module, each
pattern with a comment giving its measured share of the run, its calls and their mean."""

from __future__ import annotations

import json

from autonvtx.suggest.calls import Measurement
from autonvtx.suggest.choice import Entry, Suggestion


def render(suggestion: Suggestion, measurement: Measurement, command: str, conditions: str) -> str:
    """The config text; `command`: how the run was made; `conditions`: where (Python, engine)."""
    run_ns = measurement.net_run_ns
    lines = [
        f"# Suggested by: {command}",
        f"# Measured on: {conditions}; one range cost {_duration(measurement.range_cost_ns)} there.",
        f"# The run took {_duration(measurement.run_ns)}, {_duration(measurement.import_ns)} of it importing"
        f" (left out below); {measurement.ranged_calls:,} calls measured.",
        f"# These rules put {suggestion.coverage:.1%} of the rest inside a range"
        + (
            f" and {suggestion.gpu_coverage:.1%} of its GPU time"
            if suggestion.gpu_coverage is not None and suggestion.by_gpu
            else ""
        )
        + f", at an estimated {percent(suggestion.cost_share)} of its time,"
        f" with {suggestion.patterns} patterns.",
    ]
    if suggestion.left_out:
        reasons = "; ".join(f"{n} {why}" for why, n in suggestion.left_out.items())
        lines.append(f"# Functions left out: {reasons}.")
    for note in measurement.notes:
        lines.append(f"# Note: {note}")
    lines.append(
        "# Review it: autonvtx run --dry-run --config FILE SCRIPT (or autonvtx list --config FILE MODULE...)"
        " says what each rule selects."
    )
    if not suggestion.rules:
        lines.append("# No function was long and heavy enough for a range: no rules.")
        lines.append("rules = []")
        return "\n".join(lines) + "\n"
    for rule in suggestion.rules:
        lines += [
            "",
            f"# {rule.module}: its ranges hold {rule.covered_ns / run_ns:.1%} of the run's time",
            "[[rules]]",
            f"modules = [{_string(rule.module)}]",
            "include = [",
        ]
        width = max(len(_string(entry.pattern)) for entry in rule.entries) + 1
        for entry in rule.entries:
            text = f"{_string(entry.pattern)},"
            lines.append(f"    {text:<{width}}  # {_describe(entry, run_ns, suggestion.by_gpu, measurement)}")
        lines.append("]")
    return "\n".join(lines) + "\n"


def _describe(entry: Entry, run_ns: float, by_gpu: bool, measurement: Measurement) -> str:
    calls = entry.calls
    mean = entry.net_ns / calls if calls else 0.0
    text = f"{entry.covered_ns / run_ns:.1%} of time, {calls:,} call{'s' if calls != 1 else ''}, mean {_duration(mean)}"
    if by_gpu:
        gpu_total = sum(node.gpu_ns for node in measurement.roots if not node.under_import) or 1
        text = f"{entry.covered_gpu_ns / gpu_total:.1%} of GPU time, " + text
    if len(entry.members) > 1:
        names = ", ".join(member.qualname for member in entry.members[:3])
        more = f" and {len(entry.members) - 3} more" if len(entry.members) > 3 else ""
        text += f"; {len(entry.members)} functions: {names}{more}"
    return text


def percent(share: float) -> str:
    """A small share as a percentage that does not round to a misleading zero."""
    return f"{share:.2%}" if share >= 0.0001 or share == 0 else "under 0.01%"


def _string(value: str) -> str:
    # A JSON string is a TOML basic string (same escapes, \uXXXX included).
    return json.dumps(value, ensure_ascii=False)


def _duration(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"
