"""Third-party test suites run plainly and under `autonvtx run`, compared test by test.

The transparency check of issue 7: a pinned package's own test suite (from its sdist) runs
twice in a dedicated virtual environment, once as `python -m pytest` and once as
`autonvtx run --config <package-wide rules> -m pytest` with the recorder attached; the
per-test outcomes must be identical, and the annotation must demonstrably have been active
(minimum counts of wrapped functions and recorded ranges).

Used by tests/test_thirdparty.py (quick mode in CI) and benchmarks/transparency.py (full).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - autonvtx depends on tomli before 3.11
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE.parents[1]
SUITES_FILE = HERE / "suites.toml"
PLUGIN_DIRECTORY = HERE / "plugin"
PLUGIN = "autonvtx_thirdparty_plugin"

# Where sdists, unpacked suites and the suites' virtual environments are kept between runs.
CACHE_ENV = "AUTONVTX_THIRDPARTY_CACHE"
# Read by the plugin (tests/thirdparty/plugin): where to write its census, which modules to count.
CENSUS_ENV = "AUTONVTX_THIRDPARTY_CENSUS"
MODULES_ENV = "AUTONVTX_THIRDPARTY_MODULES"

# Variables of the caller that would change how the suites run; the two runs get neither.
SCRUBBED_ENV = (
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONDONTWRITEBYTECODE",
    "PYTEST_ADDOPTS",
    "PYTEST_PLUGINS",
    "PYTEST_CURRENT_TEST",
    "PYTEST_XDIST_WORKER",
    "VIRTUAL_ENV",
    "NVTX_INJECTION64_PATH",
    "COVERAGE_PROCESS_START",
)


class HarnessError(Exception):
    """The check could not be carried out (as opposed to: it ran and found differences)."""


class NetworkUnavailable(HarnessError):
    """The package index cannot be reached, so nothing can be installed."""


@dataclass(frozen=True)
class Suite:
    """One pinned package whose own tests are run."""

    name: str
    version: str
    sha256: str
    requires_python: tuple[int, int]
    modules: tuple[str, ...]
    strip: tuple[str, ...]
    rules: Path
    pytest_args: tuple[str, ...]
    quick_args: tuple[str, ...]
    min_wrapped: int
    min_ranges: int
    quick_min_wrapped: int
    quick_min_ranges: int

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"

    def arguments(self, quick: bool) -> tuple[str, ...]:
        return self.quick_args if quick else self.pytest_args

    def thresholds(self, quick: bool) -> tuple[int, int]:
        if quick:
            return self.quick_min_wrapped, self.quick_min_ranges
        return self.min_wrapped, self.min_ranges


@dataclass(frozen=True)
class Pins:
    suites: tuple[Suite, ...]
    test_requires: tuple[str, ...]

    def select(self, names: Sequence[str] | None) -> tuple[Suite, ...]:
        if not names:
            return self.suites
        known = {suite.name: suite for suite in self.suites}
        unknown = [name for name in names if name not in known]
        if unknown:
            raise HarnessError(f"unknown suite(s) {', '.join(map(repr, unknown))}; expected one of {sorted(known)}")
        return tuple(known[name] for name in names)


def load_pins(path: Path = SUITES_FILE) -> Pins:
    with open(path, "rb") as stream:
        data = tomllib.load(stream)
    suites = tuple(
        Suite(
            name=entry["name"],
            version=entry["version"],
            sha256=entry["sha256"],
            requires_python=(entry["requires_python"][0], entry["requires_python"][1]),
            modules=tuple(entry["modules"]),
            strip=tuple(entry["strip"]),
            rules=path.parent / entry["rules"],
            pytest_args=tuple(entry["pytest_args"]),
            quick_args=tuple(entry["quick_args"]),
            min_wrapped=entry["min_wrapped"],
            min_ranges=entry["min_ranges"],
            quick_min_wrapped=entry["quick_min_wrapped"],
            quick_min_ranges=entry["quick_min_ranges"],
        )
        for entry in data["suites"]
    )
    return Pins(suites=suites, test_requires=tuple(data["test_requires"]))


def default_cache() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser().resolve()
    return Path(tempfile.gettempdir()) / "autonvtx-thirdparty"


def index_unreachable(timeout: float = 10.0) -> str | None:
    """Why the package index cannot be reached, or None when it can."""
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    try:
        with urllib.request.urlopen(f"{index}/pip/", timeout=timeout) as response:
            response.read(1)
    except (urllib.error.URLError, OSError) as error:
        return f"package index {index} unreachable: {error}"
    return None


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock between concurrent harness runs sharing one cache."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _pip(python: Path | str, *arguments: str, cwd: Path | None = None) -> None:
    command = [str(python), "-m", "pip", "--disable-pip-version-check", "--no-input", "-q", *arguments]
    completed = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=_clean_env())
    if completed.returncode != 0:
        output = (completed.stdout + completed.stderr).strip()
        reason = index_unreachable()
        if reason is not None:
            raise NetworkUnavailable(reason)
        lines = [line for line in output.splitlines() if "is ignored: it is neither a file" not in line]
        raise HarnessError(f"{' '.join(command)} failed ({completed.returncode}):\n" + "\n".join(lines[-30:]))


def fetch_sdist(suite: Suite, cache: Path) -> Path:
    """The suite's sdist in the cache, downloaded by pip and checked against its pinned sha256."""
    directory = cache / "sdists"
    directory.mkdir(parents=True, exist_ok=True)
    for candidate in directory.glob(f"*-{suite.version}.tar.gz"):
        if (
            _normalize(candidate.name.rsplit("-", 1)[0]) == _normalize(suite.name)
            and _sha256(candidate) == suite.sha256
        ):
            return candidate
    with tempfile.TemporaryDirectory(dir=directory) as scratch:
        requirements = Path(scratch) / "requirements.txt"
        requirements.write_text(f"{suite.requirement} --hash=sha256:{suite.sha256}\n")
        _pip(
            sys.executable, "download", "--no-deps", "--no-binary", suite.name,
            "-r", str(requirements), "-d", scratch,
        )  # fmt: skip
        archives = [path for path in Path(scratch).glob("*.tar.gz")]
        if len(archives) != 1:
            raise HarnessError(f"{suite.requirement}: expected one sdist from pip, got {archives}")
        archive = archives[0]
        if _sha256(archive) != suite.sha256:
            raise HarnessError(f"{suite.requirement}: sha256 of {archive.name} does not match the pin")
        target = directory / archive.name
        os.replace(archive, target)
    return target


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _normalize(name: str) -> str:
    """A project name as PEP 503 compares them (more_itertools == more-itertools)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def unpack_suite(suite: Suite, archive: Path, cache: Path) -> Path:
    """The unpacked sdist without its package sources, so the installed package is imported."""
    target = cache / "suites" / f"{suite.name}-{suite.version}"
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{suite.name}-"))
    try:
        with tarfile.open(archive) as tar:
            if sys.version_info >= (3, 12):
                tar.extractall(scratch, filter="data")
            else:
                tar.extractall(scratch)  # sdist from a hash-pinned download
        (root,) = list(scratch.iterdir())
        for name in suite.strip:
            shutil.rmtree(root / name)
        (root / ".complete").write_text(archive.name)
        try:
            os.replace(root, target)
        except OSError:
            if not (target / ".complete").exists():  # another run won the race, or a stale partial tree
                shutil.rmtree(target, ignore_errors=True)
                os.replace(root, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


@dataclass(frozen=True)
class Environment:
    """The suites' virtual environment."""

    root: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def autonvtx(self) -> Path:
        return self.root / "bin" / "autonvtx"


def python_tag(python: str) -> str:
    completed = subprocess.run(
        [python, "-c", "import sys, platform; print(platform.python_implementation(), platform.python_version())"],
        capture_output=True, text=True, check=True, env=_clean_env(),
    )  # fmt: skip
    return completed.stdout.strip()


def python_version(python: str) -> tuple[int, int]:
    implementation, version = python_tag(python).split()
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def ensure_environment(
    python: str, pins: Pins, suites: Sequence[Suite], archives: dict[str, Path], cache: Path
) -> Environment:
    """A virtual environment of `python` with autonvtx (editable, this checkout), the suites' test
    dependencies and the pinned packages installed from their sdists.

    The environment is kept in the cache under a key of the interpreter and the pins; autonvtx is
    reinstalled on every call so that its native recorder matches this checkout. It is installed
    from a copy of the checkout: an editable install builds the native parts in place, and
    rewriting the checkout's own libraries in place would pull them from under the processes
    that have them loaded (the rest of the test suite runs beside this, under pytest-xdist).
    """
    tag = python_tag(python)
    installed = [tag, os.path.realpath(python), *pins.test_requires, *sorted(path.name for path in archives.values())]
    key = hashlib.sha256("\n".join(installed).encode()).hexdigest()[:12]
    root = cache / "venvs" / f"{tag.replace(' ', '-').lower()}-{key}"
    environment = Environment(root)
    with locked(cache / "venvs" / f".{root.name}.lock"):
        if not (root / ".complete").exists():
            shutil.rmtree(root, ignore_errors=True)
            # A virtual environment is not relocatable, so it is built in place under the lock
            # and marked complete last instead of being renamed into place.
            subprocess.run([python, "-m", "venv", str(root)], check=True, env=_clean_env())
            _pip(environment.python, "install", *pins.test_requires)
            _pip(environment.python, "install", "--no-deps", *(str(archives[suite.name]) for suite in suites))
            (root / ".complete").write_text(tag)
        source = root / "autonvtx-source"
        shutil.rmtree(source, ignore_errors=True)
        shutil.copytree(REPOSITORY, source, symlinks=True, ignore=_NOT_SOURCE)
        _pip(environment.python, "install", "-e", str(source))
    return environment


# What a copy of the checkout leaves out: version control, environments, build outputs.
_NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv*",
    "build",
    "dist",
    "site",
    "*.egg-info",
    "__pycache__",
    "*.so",
    ".pytest_cache",
    ".mypy_cache",
)


def prepare(python: str, suites: Sequence[Suite], pins: Pins, cache: Path) -> tuple[Environment, dict[str, Path]]:
    """Download, unpack and install everything; the directory of each suite by name."""
    archives = {suite.name: fetch_sdist(suite, cache) for suite in suites}
    trees = {suite.name: unpack_suite(suite, archives[suite.name], cache) for suite in suites}
    environment = ensure_environment(python, pins, suites, archives, cache)
    return environment, trees


@dataclass(frozen=True)
class Run:
    """One run of a suite: its per-test outcomes and what it left behind."""

    mode: str  # "plain" or "annotated"
    command: tuple[str, ...]
    status: int
    seconds: float
    outcomes: dict[str, str]
    census: dict[str, Any]
    output: str
    log: Path
    trace: Path | None = None
    summary: Path | None = None


def _clean_env() -> dict[str, str]:
    env = {
        key: value for key, value in os.environ.items() if key not in SCRUBBED_ENV and not key.startswith("AUTONVTX_")
    }
    return env


def run_suite(
    environment: Environment,
    suite: Suite,
    tree: Path,
    workdir: Path,
    mode: str,
    quick: bool,
    trace_too: bool = False,
    extra_env: dict[str, str] | None = None,
) -> Run:
    """Run the suite's tests once, plainly or under `autonvtx run`, from its unpacked sdist.

    The annotated run always writes a summary (what the range count is read from); a trace
    only with `trace_too`, since a full suite records millions of ranges (gigabytes of JSON).
    `extra_env` goes to both runs (AUTONVTX_PURE_PYTHON=1 checks the pure-Python range path).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    junit = workdir / f"{mode}.junit.xml"
    census = workdir / f"{mode}.census.json"
    trace = workdir / f"{mode}.trace.json"
    summary = workdir / f"{mode}.summary.json"
    for stale in (junit, census, trace, summary):
        stale.unlink(missing_ok=True)
    pytest_arguments = (
        "-p", "no:cacheprovider", "-p", PLUGIN, "-q", "--junitxml", str(junit), *suite.arguments(quick),
    )  # fmt: skip
    if mode == "plain":
        command: tuple[str, ...] = (str(environment.python), "-m", "pytest", *pytest_arguments)
    else:
        command = (
            str(environment.autonvtx), "run", "--config", str(suite.rules),
            *(("--trace", str(trace)) if trace_too else ()), "--summary", str(summary), "--verbose",
            "-m", "pytest", *pytest_arguments,
        )  # fmt: skip
    env = _clean_env()
    env.update(
        {
            "PYTHONPATH": str(PLUGIN_DIRECTORY),
            "PYTHONHASHSEED": "0",
            CENSUS_ENV: str(census),
            MODULES_ENV: ",".join(suite.modules),
            **(extra_env or {}),
        }
    )
    # Hypothesis keeps examples in ./.hypothesis; neither run may see what the other saved.
    shutil.rmtree(tree / ".hypothesis", ignore_errors=True)
    start = time.perf_counter()
    completed = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    log = workdir / f"{mode}.output.txt"
    log.write_text(completed.stdout + completed.stderr)
    if not junit.exists():
        raise HarnessError(
            f"{suite.name}: the {mode} run wrote no JUnit XML (exit status {completed.returncode}):\n"
            + _tail(completed.stdout + completed.stderr)
        )
    return Run(
        mode=mode,
        command=command,
        status=completed.returncode,
        seconds=seconds,
        outcomes=parse_junit(junit),
        census=json.loads(census.read_text()) if census.exists() else {},
        output=completed.stdout + completed.stderr,
        log=log,
        trace=trace if trace.exists() else None,
        summary=summary if summary.exists() else None,
    )


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def parse_junit(path: Path) -> dict[str, str]:
    """Outcome of every test in a pytest JUnit XML file, by `classname::name`.

    A test reported more than once (failing subtests, an error in teardown after a failure)
    gets all its outcomes, counted and joined with '+' in order of appearance.
    """
    outcomes: dict[str, list[str]] = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        test = f"{case.get('classname', '')}::{case.get('name', '')}"
        found = []
        for child in case:
            if child.tag == "failure":
                found.append("failed")
            elif child.tag == "error":
                found.append("error")
            elif child.tag == "skipped":
                found.append("xfailed" if child.get("type") == "pytest.xfail" else "skipped")
        outcomes.setdefault(test, []).extend(found or ["passed"])
    return {test: _joined(found) for test, found in outcomes.items()}


def _joined(outcomes: list[str]) -> str:
    """['failed', 'failed', 'error'] -> 'failed x2+error'."""
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome] = counts.get(outcome, 0) + 1
    return "+".join(outcome if count == 1 else f"{outcome} x{count}" for outcome, count in counts.items())


@dataclass(frozen=True)
class Difference:
    test: str
    plain: str
    annotated: str

    def __str__(self) -> str:
        return f"{self.test}: {self.plain} plainly, {self.annotated} annotated"


def compare(plain: dict[str, str], annotated: dict[str, str]) -> list[Difference]:
    missing = "not run"
    tests = sorted(set(plain) | set(annotated))
    return [
        Difference(test, plain.get(test, missing), annotated.get(test, missing))
        for test in tests
        if plain.get(test, missing) != annotated.get(test, missing)
    ]


def recorder_notes(summary: Path | None) -> list[str]:
    """What the recorder noted about the recording (dropped events, ranges left open)."""
    if summary is None:
        return []
    data = json.loads(summary.read_text())
    return [str(note) for note in data.get("notes", [])] if isinstance(data, dict) else []


def count_ranges(summary: Path | None, trace: Path | None) -> int | None:
    """Ranges recorded: the sum of the summary's counts, or else the trace's complete events."""
    if summary is not None:
        rows = json.loads(summary.read_text())
        if isinstance(rows, dict):  # {"ranges": [...], "notes": [...]}
            rows = rows.get("ranges", [])
        counts = [row.get("count") for row in rows if isinstance(row, dict)]
        if counts and all(isinstance(count, int) for count in counts):
            return sum(counts)
    if trace is not None:
        data = json.loads(trace.read_text())
        events = data.get("traceEvents", []) if isinstance(data, dict) else data
        return sum(1 for event in events if isinstance(event, dict) and event.get("ph") == "X")
    return None


# autonvtx's --verbose total line (autonvtx/control.py, report_lines), by either engine:
#   "autonvtx: wrapped 246 functions in 3 modules (38 skipped)", or "monitored ..."
_VERBOSE_TOTAL = re.compile(r"^autonvtx: (?:wrapped|monitored) (\d+) functions? in \d+ modules?", re.MULTILINE)


def verbose_wrapped(output: str) -> int | None:
    """The total of wrapped functions autonvtx reported with --verbose, when it can be read.

    Several totals (child processes report their own) count as the largest.
    """
    totals = [int(match.group(1)) for match in _VERBOSE_TOTAL.finditer(output)]
    return max(totals) if totals else None


@dataclass
class SuiteResult:
    suite: Suite
    python: str
    quick: bool
    plain: Run
    annotated: Run
    differences: list[Difference]
    ranges: int | None
    reported_wrapped: int | None
    problems: list[str] = field(default_factory=list)

    @property
    def wrapped(self) -> int:
        """Wrapped functions found in the modules after the annotated run (the plugin's census)."""
        return int(self.annotated.census.get("wrapped", 0))

    @property
    def slowdown(self) -> float:
        return self.annotated.seconds / self.plain.seconds if self.plain.seconds else float("nan")

    @property
    def ok(self) -> bool:
        return not self.problems


def check_suite(
    environment: Environment,
    suite: Suite,
    tree: Path,
    workdir: Path,
    python: str,
    quick: bool,
    trace_too: bool = False,
    extra_env: dict[str, str] | None = None,
) -> SuiteResult:
    plain = run_suite(environment, suite, tree, workdir, "plain", quick, extra_env=extra_env)
    annotated = run_suite(environment, suite, tree, workdir, "annotated", quick, trace_too, extra_env)
    result = SuiteResult(
        suite=suite,
        python=python,
        quick=quick,
        plain=plain,
        annotated=annotated,
        differences=compare(plain.outcomes, annotated.outcomes),
        ranges=count_ranges(annotated.summary, annotated.trace),
        reported_wrapped=verbose_wrapped(annotated.output),
    )
    result.problems.extend(_problems(result, environment))
    return result


def _problems(result: SuiteResult, environment: Environment) -> Iterator[str]:
    suite = result.suite
    min_wrapped, min_ranges = suite.thresholds(result.quick)
    if not result.plain.outcomes:
        yield "no tests ran"
    if result.plain.status not in (0, 1):
        yield f"the plain run ended with pytest exit status {result.plain.status}:\n{_tail(result.plain.output)}"
    if result.plain.status != result.annotated.status:
        detail = "" if result.differences else ":\n" + _tail(result.annotated.output, 15)
        yield f"pytest exit status {result.plain.status} plainly, {result.annotated.status} annotated (see {result.annotated.log}){detail}"
    if result.differences:
        yield f"{len(result.differences)} test(s) differ"
    site = str(environment.root)
    for run in (result.plain, result.annotated):
        modules = run.census.get("modules", {})
        if not modules:
            yield f"the {run.mode} run imported none of {', '.join(suite.modules)} (or the plugin did not run)"
        outside = sorted(
            name for name, info in modules.items() if info.get("file") and not str(info["file"]).startswith(site)
        )
        if outside:
            yield f"the {run.mode} run imported {', '.join(outside)} from outside the environment, not the installed package"
    if result.plain.census.get("wrapped"):
        yield f"{result.plain.census['wrapped']} function(s) were wrapped in the plain run"
    if result.wrapped < min_wrapped:
        yield f"only {result.wrapped} wrapped function(s) found after the annotated run; at least {min_wrapped} expected"
    if result.reported_wrapped is not None and result.reported_wrapped < min_wrapped:
        yield f"autonvtx --verbose reported {result.reported_wrapped} wrapped function(s); at least {min_wrapped} expected"
    if result.ranges is None:
        yield "the annotated run wrote neither a summary nor a trace"
    elif result.ranges < min_ranges:
        yield f"only {result.ranges} range(s) recorded; at least {min_ranges} expected"


# pytest's closing line: "765 passed, 21194 subtests passed in 21.32s" (with -q).
_PYTEST_SECONDS = re.compile(r" in (\d+(?:\.\d+)?)s\b[^\n]*$", re.MULTILINE)


def pytest_seconds(output: str) -> float | None:
    """The time pytest itself reports for the session: no start-up, no recorder write at exit."""
    found = _PYTEST_SECONDS.findall(output)
    return float(found[-1]) if found else None


def _tally(outcomes: dict[str, str]) -> str:
    counts: dict[str, int] = {}
    for outcome in outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return ", ".join(f"{count} {outcome}" for outcome, count in sorted(counts.items(), key=lambda item: -item[1]))


def _seconds(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f} s"


def format_result(result: SuiteResult, limit: int = 50) -> str:
    suite = result.suite
    census = result.annotated.census
    lines = [
        f"{suite.name} {suite.version} on {result.python} ({'quick subset' if result.quick else 'full suite'})",
        f"  tests compared     {len(set(result.plain.outcomes) | set(result.annotated.outcomes))}"
        f" (plain: {_tally(result.plain.outcomes)}; annotated: {_tally(result.annotated.outcomes)})",
        f"  differences        {len(result.differences)}",
    ]
    lines.extend(f"    {difference}" for difference in result.differences[:limit])
    if len(result.differences) > limit:
        lines.append(f"    ... and {len(result.differences) - limit} more")
    reported = "not reported" if result.reported_wrapped is None else str(result.reported_wrapped)
    lines += [
        f"  wrapped functions  {result.wrapped} of {census.get('functions', 0)} defined in"
        f" {len(census.get('modules', {}))} module(s) (autonvtx --verbose: {reported})",
        f"  ranges recorded    {'none' if result.ranges is None else f'{result.ranges:,}'}",
        *(f"    recorder: {note}" for note in recorder_notes(result.annotated.summary)),
        f"  wall clock         plain {result.plain.seconds:.1f} s, annotated {result.annotated.seconds:.1f} s,"
        f" slowdown {result.slowdown:.2f}x",
        f"  pytest's own time  plain {_seconds(pytest_seconds(result.plain.output))},"
        f" annotated {_seconds(pytest_seconds(result.annotated.output))}"
        " (the rest of the annotated wall clock is start-up and the recorder writing at exit)",
        f"  verdict            {'ok' if result.ok else 'FAILED'}",
    ]
    lines.extend(f"    - {problem}" for problem in result.problems)
    return "\n".join(lines)


def check(
    python: str = sys.executable,
    names: Sequence[str] | None = None,
    quick: bool = False,
    cache: Path | None = None,
    workdir: Path | None = None,
    log: Any = None,
    trace_too: bool = False,
    extra_env: dict[str, str] | None = None,
) -> list[SuiteResult]:
    """Prepare and run every selected suite that supports `python`; one result per suite."""
    pins = load_pins()
    cache = cache or default_cache()
    version = python_version(python)
    suites = [suite for suite in pins.select(names) if version >= suite.requires_python]
    if not suites:
        raise HarnessError(f"no selected suite supports Python {version[0]}.{version[1]}")
    environment, trees = prepare(python, suites, pins, cache)
    tag = python_tag(str(environment.python))
    workdir = workdir or Path(tempfile.mkdtemp(prefix="autonvtx-thirdparty-"))
    results = []
    for suite in suites:
        result = check_suite(
            environment, suite, trees[suite.name], workdir / suite.name, tag, quick, trace_too, extra_env
        )
        if log is not None:
            log(format_result(result))
        results.append(result)
    return results
