"""`autonvtx init`: a commented starter config for the project in the working directory and the
frameworks installed here."""

from __future__ import annotations

import os

from autonvtx.configfile.formats import parse_file
from autonvtx.errors import UsageError
from autonvtx.presets import all_presets

# Frameworks init looks for (top-level module names, found with find_spec: nothing is
# imported), each with the preset that suits it when one is shipped or installed.
FRAMEWORKS = ("torch", "numba", "tensorflow", "jax", "numpy", "pandas", "cupy", "cudf")
_NOT_PROJECT_DIRS = frozenset({"tests", "test", "docs", "doc", "examples", "benchmarks", "build", "dist"})


def installed_frameworks() -> list[str]:
    """The FRAMEWORKS importable here, without importing them."""
    import importlib.util

    found = []
    for name in FRAMEWORKS:
        try:
            if importlib.util.find_spec(name) is not None:
                found.append(name)
        except (ImportError, ValueError):
            pass
    return found


def project_packages(cwd: str) -> list[str]:
    """The Python packages of the project in `cwd` (flat or src/ layout)."""
    found = []
    for root in (cwd, os.path.join(cwd, "src")):
        try:
            entries = sorted(os.listdir(root))
        except OSError:
            continue
        for entry in entries:
            if (
                entry.isidentifier()
                and entry not in _NOT_PROJECT_DIRS
                and os.path.isfile(os.path.join(root, entry, "__init__.py"))
            ):
                found.append(entry)
    return found


def starter_text(cwd: str, *, table: str = "autonvtx", rules: str = "rules") -> str:
    """A commented starter config for the project in `cwd` and the frameworks installed."""
    frameworks = installed_frameworks()
    available = set(all_presets())
    with_preset = [name for name in frameworks if name in available]
    packages = project_packages(cwd)
    # `list` imports modules and cannot show a script's own functions: `run --dry-run` can.
    check = f"autonvtx list {packages[0]}" if packages else "autonvtx run --dry-run SCRIPT"
    lines = [
        "# autonvtx: which functions get NVTX ranges (written by `autonvtx init`).",
        f"# Check what these rules select with `{check}`, then run",
        "# `autonvtx run --summary SCRIPT` (or under `nsys profile -t cuda,nvtx`).",
        "",
    ]
    if frameworks:
        lines.append("# Frameworks installed here: " + ", ".join(frameworks) + ".")
    if with_preset:
        lines.append("# Their presets (`autonvtx presets` lists all) are enabled below. Each acts")
        lines.append("# only in a program that imports its framework; remove those you do not want.")
    lines += [f"[{table}]"]
    presets_line = "presets = [" + ", ".join(f'"{n}"' for n in with_preset) + "]"
    lines.append(presets_line if with_preset else '# presets = ["torch"]')
    lines += [
        '# domain = "autonvtx"       # NVTX domain of every range unless a rule says otherwise',
        '# message = "{qualname}"    # fields: {module} {qualname} {name} {class} {file} {line}',
        '# color = "auto"            # "auto": a stable color per module; or a name, or "#rrggbb"',
        "",
    ]
    modules = [glob for name in packages for glob in (name, f"{name}.*")] or ["__main__"]
    what = "your project's packages" if packages else "the functions your script defines (__main__)"
    lines += [
        f"# One rule: {what}.",
        f"[[{rules}]]",
        "modules = [" + ", ".join(f'"{m}"' for m in modules) + "]   # globs over dotted module names",
        '# include = ["*"]             # globs over qualified names: "train", "Trainer.*", "*.forward"',
        'exclude = ["_*", "*._*"]      # private helpers stay quiet',
        '# color = "green"',
        '# category = "model"',
        "",
    ]
    return "\n".join(lines)


def write_starter(cwd: str, *, pyproject: bool = False) -> str:
    """Write ./autonvtx.toml (or append [tool.autonvtx] to ./pyproject.toml); refuse to
    overwrite. Returns the line to print."""
    if pyproject:
        path = os.path.join(cwd, "pyproject.toml")
        existing = ""
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                existing = f.read()
            tool = parse_file("pyproject.toml", path, "toml").get("tool")
            if isinstance(tool, dict) and "autonvtx" in tool:
                raise UsageError("init: pyproject.toml: already has a [tool.autonvtx] table; left as it is")
        text = starter_text(cwd, table="tool.autonvtx", rules="tool.autonvtx.rules")
        separator = "" if not existing or existing.endswith("\n\n") else ("\n" if existing.endswith("\n") else "\n\n")
        with open(path, "a", encoding="utf-8") as f:
            f.write(separator + text)
        return "autonvtx: added [tool.autonvtx] to pyproject.toml"
    path = os.path.join(cwd, "autonvtx.toml")
    text = starter_text(cwd)
    try:
        with open(path, "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        raise UsageError("init: autonvtx.toml: already exists; left as it is") from None
    return "autonvtx: wrote autonvtx.toml"
