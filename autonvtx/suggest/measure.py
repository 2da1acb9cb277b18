"""The measured run of `autonvtx suggest`: the broad rules it runs under, the child process that
runs the program (`suggest.child`; recorded, or under Nsight Systems), and what it measured,
read into a `calls.Measurement`."""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autonvtx.errors import AutonvtxError
from autonvtx.suggest.calls import MARKS_MODULE, PROBE_MARKS, Measurement, build_tree, settle

if TYPE_CHECKING:
    from autonvtx.cli.ruleargs import RuleArgs
    from autonvtx.config import Config

# The measuring run's ranges: a domain of their own and a name that says where the function is.
DOMAIN = "autonvtx-suggest"
MESSAGE = "{module}:{qualname}"
# Never measured: autonvtx and what its ranges are made with (the walk refuses them too).
NEVER = ("autonvtx", "wrapt", "nvtx")


class MeasurementError(AutonvtxError):
    """The run measured nothing to suggest from; the exit status is the program's when it failed."""

    def __init__(self, message: str, exit_status: int = 2) -> None:
        super().__init__(message)
        self.exit_status = exit_status


_START = "import sys; sys.path[0] = {home!r}; from autonvtx.suggest.child import main; main()"


@dataclass(frozen=True)
class MeasureRequest:
    """What to run and under which rules: the rule options given, or none for the broad ones."""

    target: tuple[str, str, tuple[str, ...]]  # (kind, value, args) as `run` parses it
    rules: RuleArgs
    nsys: bool = False


def broad_modules(target: tuple[str, str, tuple[str, ...]]) -> list[str]:
    """`__main__`, and every top-level module or package the program could import from its own
    directory and this interpreter's sys.path, outside the standard library and autonvtx:
    only those the program imports are walked, so naming the others costs nothing."""
    kind, value, _ = target
    first = os.path.dirname(os.path.abspath(value)) if kind == "script" else os.getcwd()
    stdlib = {os.path.realpath(sysconfig.get_paths()[key]) for key in ("stdlib", "platstdlib")}
    entries = [first]
    for entry in sys.path[1:]:
        real = os.path.realpath(entry or ".")
        if real in stdlib or os.path.basename(real) == "lib-dynload" or real.endswith(".zip"):
            continue  # lib/python3.x and lib-dynload: the standard library
        entries.append(entry)
    excluded = set(sys.stdlib_module_names) | set(sys.builtin_module_names) | set(NEVER)
    names = {
        info.name
        for info in pkgutil.iter_modules([entry for entry in entries if os.path.isdir(entry)])
        if info.name not in excluded and not info.name.startswith("_") and info.name.isidentifier()
    }
    return ["__main__", *sorted(names)]


def measuring_config(request: MeasureRequest) -> str:
    """The measuring run's rules as TOML: the user's rule options (their modules and name
    patterns, not their styles: the ranges must be named `module:qualname`), else the broad
    rules; and the marks module of `suggest.child`."""
    rules: list[tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = []
    given = request.rules
    if given.configs or given.presets or given.targets:
        config: Config = given.load()
        rules = [(rule.modules, rule.include, rule.exclude) for rule in config.rules]
        if not rules:
            raise AutonvtxError("suggest: the rule options select no module; expected -t, --config or --preset rules")
    else:
        rules = [(tuple(f"{name}{tail}" for name in broad_modules(request.target) for tail in ("", ".*")), ("*",), ())]
    rules.append(((MARKS_MODULE,), ("probe", "Probe.method", "importing"), ()))
    lines = ["[autonvtx]", f"domain = {json.dumps(DOMAIN)}", f"message = {json.dumps(MESSAGE)}"]
    for modules, include, exclude in rules:
        modules = tuple(module for module in modules if module.split(".")[0] not in NEVER or module == "*")
        lines += ["", "[[rules]]", f"modules = {json.dumps(list(modules))}", f"include = {json.dumps(list(include))}"]
        if exclude:
            lines.append(f"exclude = {json.dumps(list(exclude))}")
    return "\n".join(lines) + "\n"


def _package_home() -> str:
    import autonvtx

    return os.path.dirname(os.path.dirname(os.path.abspath(autonvtx.__file__)))


def measure(request: MeasureRequest, workdir: str | None = None) -> Measurement:
    """Run the program once in a child process under the measuring rules and read what it measured."""
    with tempfile.TemporaryDirectory(prefix="autonvtx-suggest-", dir=workdir) as scratch:
        config_path = os.path.join(scratch, "measure.toml")
        with open(config_path, "w", encoding="utf-8") as f:
            f.write(measuring_config(request))
        summary = None if request.nsys else os.path.join(scratch, "calls.json")
        facts_path = os.path.join(scratch, "facts.json")
        spec = {
            "config": config_path,
            "summary": summary,
            "facts": facts_path,
            "engine": request.rules.engine,
        }
        spec_path = os.path.join(scratch, "spec.json")
        with open(spec_path, "w", encoding="utf-8") as f:
            json.dump(spec, f)
        kind, value, args = request.target
        command = [sys.executable, "-c", _START.format(home=_package_home()), spec_path, kind, value, *args]
        inside = None
        medians: dict[str, float] = {}
        if request.nsys:
            status, rows, gpu = _run_under_nsys(command, os.path.join(scratch, "suggest"))
        else:
            status = _run(command)
            rows, gpu = _summary_rows(summary), False
            inside = _probe_median(summary)
            medians = _call_medians(summary)
        facts = _facts(facts_path, status)
    measurement = Measurement(
        roots=build_tree(rows),
        range_cost_ns=float(facts["range_cost_ns"]),
        run_ns=int(facts.get("run_ns", 0)),
        status=status,
        gpu=gpu,
        inside_median_ns=inside,
        median_ns=medians,
    )
    if "run_ns" not in facts:
        measurement.notes.append("the program ended without Python's exit (its run time is the ranges' time)")
        measurement.run_ns = sum(node.total_ns for node in measurement.roots)
    return settle(measurement)


def _run(command: list[str]) -> int:
    """The child in the foreground, with our standard streams; its status, as a shell gives it."""
    process = subprocess.Popen(command)
    while True:
        try:
            status = process.wait()
            break
        except KeyboardInterrupt:
            continue  # the child got it too (same process group): wait for its exit
    return 128 - status if status < 0 else status


def _facts(path: str, status: int) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            facts: dict[str, Any] = json.load(f)
    except (OSError, ValueError):
        raise MeasurementError(
            f"suggest: the program's run measured nothing (status {status}); expected it to start"
            " (its messages are above)",
            exit_status=status or 2,
        ) from None
    return facts


def _summary_rows(path: str | None) -> list[tuple[tuple[str, ...], int, int, int]]:
    """Call paths from the recorder's tree summary: our ranges only (others' ranges on a path,
    the program's own NVTX ranges, are left out of it and paths that then meet are summed)."""
    assert path is not None
    try:
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
    except (OSError, ValueError):
        raise MeasurementError("suggest: the recorder wrote no summary of the run; expected its calls") from None
    merged: dict[tuple[str, ...], list[int]] = {}
    prefix = DOMAIN + ":"
    for row in document.get("ranges", []):
        if row.get("domain") != DOMAIN:
            continue
        labels = row["path"].split(" > ") if row.get("path") else [prefix + row["name"]]
        names = tuple(label[len(prefix) :] for label in labels if label.startswith(prefix))
        figures = merged.setdefault(names, [0, 0])
        figures[0] += int(row["count"])
        figures[1] += int(row["total_ns"])
    return [(path, count, total, 0) for path, (count, total) in merged.items()]


def _call_medians(path: str | None) -> dict[str, float]:
    """Per function, its calls' median duration: the median of each call path's calls of it,
    weighted by their counts (the tree summary has a median per path, not per function)."""
    assert path is not None
    with open(path, encoding="utf-8") as f:
        rows = json.load(f).get("ranges", [])
    sums: dict[str, list[float]] = {}
    for row in rows:
        if row.get("domain") == DOMAIN and row.get("median_ns") is not None and row.get("count"):
            figures = sums.setdefault(row["name"], [0.0, 0.0])
            figures[0] += float(row["median_ns"]) * int(row["count"])
            figures[1] += int(row["count"])
    return {name: total / count for name, (total, count) in sums.items() if count}


def _probe_median(path: str | None) -> float | None:
    """The median duration of the calibration probes' ranges (the dearer of function and
    method): the part of a range's cost inside it, from the calls the machine's other work did
    not interrupt."""
    assert path is not None
    with open(path, encoding="utf-8") as f:
        medians = [
            float(row["median_ns"])
            for row in json.load(f).get("ranges", [])
            if row.get("domain") == DOMAIN and row.get("name") in PROBE_MARKS
        ]
    return max(medians) if medians else None


def _run_under_nsys(command: list[str], output: str) -> tuple[int, list[tuple[tuple[str, ...], int, int, int]], bool]:
    """The child under `nsys profile` as `autonvtx profile` runs it; call paths and the GPU time
    launched inside each, from the export, by the report's attribution."""
    from autonvtx import nsight
    from autonvtx.cli.profile import export_of_capture, run_nsys

    nsys = nsight.find_nsys()
    plan = nsight.plan_profile(
        nsys,
        output=output,
        force=True,
        capture=False,
        cuda=nsight.is_cuda_traceable(),
        nsys_args=(),
        run_command=command,
    )
    started = time.time()
    status = run_nsys(plan.command)
    export = export_of_capture(nsys, nsight.report_paths(output), started, status)
    rows, gpu = export_rows(export, DOMAIN)
    return (128 - status if status < 0 else status), rows, gpu


def export_rows(export: str, domain: str) -> tuple[list[tuple[tuple[str, ...], int, int, int]], bool]:
    """Call paths of one domain's ranges in an Nsight Systems export, with the CPU time and the
    GPU time launched inside each (the report's attribution, `report.nsys.sweep`), and whether the
    export holds GPU work. Other domains' ranges on a path are left out of it, as in a summary."""
    from autonvtx.report.profile import ReportOptions, read_profile
    from autonvtx.stats.model import ViewOptions

    report = read_profile(export, ReportOptions(ViewOptions(each=True)))
    merged: dict[tuple[str, ...], list[int]] = {}
    stack: list[tuple[Any, tuple[str, ...]]] = [(node, ()) for node in report.tree]
    while stack:
        node, above = stack.pop()
        path = (*above, node.name) if node.domain == domain else above
        if node.domain == domain:
            figures = merged.setdefault(path, [0, 0, 0])
            figures[0] += node.instances
            figures[1] += node.cpu_ns
            figures[2] += node.work.gpu_ns
        stack.extend((child, path) for child in node.children)
    return [(path, count, total, gpu) for path, (count, total, gpu) in merged.items()], report.has_gpu
