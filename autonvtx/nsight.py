"""Nsight Systems on this machine: where `nsys` and its importer are, and the `nsys profile`
command line `autonvtx profile` runs (its defaults, the capture window, the report's name)."""

from __future__ import annotations

import glob
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from autonvtx import environment
from autonvtx.errors import AutonvtxError
from autonvtx.probe import cannot_create_in

INSTALL_HINT = (
    "install Nsight Systems: on Debian `apt-get install nsight-systems` (the non-free component),"
    " on Ubuntu the same from multiverse, or NVIDIA's installer"
    " (https://developer.nvidia.com/nsight-systems); or name its nsys in $NSYS"
)

# The NVTX range autonvtx opens over a capture window (regions/): registered, so nsys needs no
# NSYS_NVTX_PROFILER_REGISTER_ONLY=0 to match it.
CAPTURE_RANGE = "capture@autonvtx"

# Where the Debian package keeps the importer (`nsys profile` looks beside its target directory,
# /usr/lib/x86_64-linux-gnu/nsight-systems/host-linux-x64, which the package does not create).
_DEBIAN_HOST_DIR = "/usr/lib/nsight-systems/host-linux-x64"
_IMPORTER = "QdstrmImporter"


class NsysError(AutonvtxError):
    """Nsight Systems is missing, or did not do what was asked."""

    def __init__(self, message: str, exit_status: int = 2) -> None:
        super().__init__(message)
        self.exit_status = exit_status


@dataclass(frozen=True)
class Nsys:
    """One Nsight Systems installation: the `nsys` to run, its version, its importer (None when
    not found: `nsys profile` then leaves only a .qdstrm)."""

    path: str
    version: str
    importer: str | None

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", self.version)[:3])


def find_nsys(env: Mapping[str, str] | None = None) -> Nsys:
    """The nsys named by $NSYS, else the one on PATH; NsysError (status 2) when there is none."""
    path = locate_nsys(env)
    return Nsys(path=path, version=_version(path), importer=find_importer(path))


def locate_nsys(env: Mapping[str, str] | None = None) -> str:
    """The path of the nsys named by $NSYS, else of the one on PATH (nothing run); NsysError
    (status 2) when there is none."""
    env = os.environ if env is None else env
    named = env.get(environment.NSYS)
    if named:
        path = shutil.which(named, path=env.get("PATH"))
        if path is None:
            raise NsysError(f"$NSYS '{named}': no such executable; expected the path of Nsight Systems' nsys")
        return path
    path = shutil.which("nsys", path=env.get("PATH"))
    if path is None:
        raise NsysError(f"nsys: not found on PATH ($NSYS unset); {INSTALL_HINT}")
    return path


def _version(path: str) -> str:
    try:
        result = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise NsysError(f"{path}: could not run it ({error}); expected Nsight Systems' nsys") from None
    found = re.search(r"\d{4}\.\d+(\.\d+)*", result.stdout + result.stderr)
    if result.returncode != 0 or found is None:
        raise NsysError(f"{path} --version: no version in its answer; expected Nsight Systems' nsys")
    return found.group(0)


def find_importer(nsys_path: str) -> str | None:
    """The QdstrmImporter that turns nsys's .qdstrm into a .nsys-rep: beside the directory nsys
    lives in (NVIDIA's layout), or where Debian's package puts it."""
    real = os.path.realpath(nsys_path)
    here = os.path.dirname(real)
    candidates = [
        os.path.join(os.path.dirname(here), "host-linux-x64", _IMPORTER),
        os.path.join(here, _IMPORTER),
        # The nsys that Nsight Compute bundles keeps its importer in a sibling directory named
        # for the host, e.g. host/linux-desktop-glibc_2_11_3-x64 beside host/target-linux-x64:
        # an installation's own importer before another's (their versions must match).
        *sorted(glob.glob(os.path.join(os.path.dirname(here), "*", _IMPORTER))),
        os.path.join(_DEBIAN_HOST_DIR, _IMPORTER),
    ]
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def import_qdstrm(importer: str, qdstrm: str) -> str:
    """Turn `qdstrm` into the .nsys-rep beside it (what `nsys profile` does when it finds its
    importer); returns that path."""
    report = qdstrm[: -len(".qdstrm")] + ".nsys-rep"
    try:
        result = subprocess.run([importer, "--input-file", qdstrm], capture_output=True, text=True)
    except OSError as error:
        raise NsysError(f"{qdstrm}: could not run {importer} ({error}); expected a working QdstrmImporter") from None
    if result.returncode != 0 or not os.path.exists(report):
        lines = (result.stderr or result.stdout).strip().splitlines()
        raise NsysError(f"{qdstrm}: {importer} failed: {lines[-1] if lines else f'status {result.returncode}'}")
    return report


def is_cuda_traceable() -> bool:
    """Whether this machine has a CUDA device nsys could trace: the driver loads and counts at
    least one (asked in this process, which runs no CUDA work itself; the program's own start
    is not touched)."""
    import ctypes  # here: only `autonvtx profile` asks

    try:
        driver = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        return driver.cuInit(0) == 0 and driver.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0
    except (OSError, AttributeError):
        return False


@dataclass(frozen=True)
class ProfilePlan:
    """What `autonvtx profile` asks of nsys: the whole command line and the report's name."""

    command: tuple[str, ...]
    output: str  # as given to nsys -o (nsys expands its %q{VAR}, %h, %p)
    notes: tuple[str, ...]


def plan_profile(
    nsys: Nsys,
    *,
    output: str,
    force: bool,
    capture: bool,
    cuda: bool,
    nsys_args: Sequence[str],
    run_command: Sequence[str],
    repeat: bool = False,
) -> ProfilePlan:
    """`nsys profile` over `run_command` with autonvtx's defaults; an option the user passes in
    `nsys_args` replaces the default of the same name. `repeat`: every capture range is a
    collection of its own (--flight's windows), not only the first."""
    given = {_option_name(arg) for arg in nsys_args}
    notes: list[str] = []
    defaults: list[tuple[str, str]] = []
    if "--trace" not in given:
        defaults.append(("--trace", "cuda,nvtx,osrt" if cuda else "nvtx,osrt"))
        if not cuda:
            notes.append("no CUDA device here (libcuda.so.1 loads none): tracing nvtx,osrt only")
    # CPU sampling is off: it needs perf events and is not what a range table reads, and with it
    # nsys 2022.4 did not finish 7 of 9 captures on our machines (README, "With Nsight Systems").
    defaults += [("--sample", "none"), ("--cpuctxsw", "none")]
    # multiprocessing's fork children never exec: without this nsys sees nothing of them.
    defaults.append(("--trace-fork-before-exec", "true"))
    if capture or repeat:
        # nsys 2022.4: `repeat` stops the collection at each capture range's end and starts
        # another at the next one (later releases keep the option).
        end = "repeat" if repeat else "stop"
        defaults += [("--capture-range", "nvtx"), ("--nvtx-capture", CAPTURE_RANGE), ("--capture-range-end", end)]
    defaults.append(("--export", "sqlite"))
    arguments = [f"{name}={value}" for name, value in defaults if name not in given]
    arguments += [f"--output={output}", f"--force-overwrite={'true' if force else 'false'}"]
    command = (nsys.path, "profile", *arguments, *nsys_args, *run_command)
    return ProfilePlan(command=command, output=output, notes=tuple(notes))


_SHORT_NAMES = {
    "-t": "--trace",
    "-s": "--sample",
    "-o": "--output",
    "-f": "--force-overwrite",
    "-c": "--capture-range",
    "-p": "--nvtx-capture",
    "-w": "--show-output",
}


def _option_name(argument: str) -> str:
    name = argument.partition("=")[0]
    return _SHORT_NAMES.get(name, name)


def expand_output(pattern: str, env: Mapping[str, str] | None = None) -> str:
    """`-o`'s name as nsys expands it: %q{VAR} from the environment, %h the host name, %% a
    percent sign; %p (a process id, known only once nsys ran) is left as a glob, `*`."""
    env = os.environ if env is None else env

    def expand(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "%%":
            return "%"
        if token == "%h":
            return socket.gethostname()
        if token.startswith("%q{"):
            return env.get(token[3:-1], "")
        return "*"

    return re.sub(r"%q\{[^}]*\}|%%|%h|%[a-z]", expand, pattern)


def report_paths(output: str, env: Mapping[str, str] | None = None) -> list[str]:
    """The files nsys may write for `-o output` (the report, or the .qdstrm it leaves when its
    importer is missing, and the export), as names or globs."""
    base = expand_output(output, env)
    for suffix in (".nsys-rep", ".qdrep"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return [base + suffix for suffix in (".nsys-rep", ".qdstrm", ".sqlite")]


def check_output_directory(output: str, env: Mapping[str, str] | None = None) -> None:
    """Refuse `-o output` before nsys runs the program when nsys could not write there: it
    would run the whole capture, then save the report under /tmp and say so in passing."""
    directory = os.path.dirname(os.path.abspath(expand_output(output, env))) or "."
    if not os.path.isdir(directory):
        raise NsysError(f"profile: -o '{output}': no such directory '{directory}'; expected an existing directory")
    why = cannot_create_in(directory, os.path.basename(output))
    if why is not None:
        raise NsysError(f"profile: -o '{output}': cannot write in '{directory}' ({why}); expected a writable directory")


def existing(paths: Sequence[str]) -> list[str]:
    """Those of `paths` (globs allowed) that exist, newest last."""
    found = {match for path in paths for match in glob.glob(glob.escape(path).replace("[*]", "*"))}
    # lstat: a symbolic link counts as there, dangling or not (getmtime would follow it).
    return sorted(found, key=lambda match: os.lstat(match).st_mtime)


def unlink_links(paths: Sequence[str]) -> None:
    """Remove the symbolic links among `paths` (globs allowed), never what they point to: nsys
    would write through a link at its output into the link's target (truncating an export the
    link pointed at), where every writer of autonvtx replaces the link."""
    for match in existing(paths):
        if os.path.islink(match):
            os.unlink(match)


# nsys draws a progress bar per file it writes ("[1/1] [=====50%    ] run.nsys-rep") by redrawing
# one line with carriage returns. On a terminal that is a bar; in a log or a CI job it is one
# line holding every redrawn step. A run of such steps is matched by its own shape, so the
# program's output (tqdm's bars look otherwise) passes through untouched.
_PROGRESS_RUN = re.compile(rb"(?:\r\[\d+/\d+\] \[[^\]\r\n]*\] [^\r\n]*)+")
_PROGRESS_STEP = re.compile(rb"\r(\[(\d+/\d+)\] [^\r]*)")


def _final_steps(match: re.Match[bytes]) -> bytes:
    """The last state of each bar in a run of redrawn steps, one line each."""
    last: dict[bytes, bytes] = {}
    for step in _PROGRESS_STEP.finditer(match.group(0)):
        last[step.group(2)] = step.group(1)
    return b"\n".join(last.values())


class ProgressFilter:
    """Copies nsys's standard output (the program's own is part of it) to `write` unchanged,
    except that each progress bar's redrawn steps become its final state on one line. Text
    without a carriage return passes at once; a partial line holding one waits for its end."""

    def __init__(self, write: Callable[[bytes], object]) -> None:
        self._write = write
        self._pending = b""

    def feed(self, data: bytes) -> None:
        data = self._pending + data
        self._pending = b""
        if b"\r" not in data:
            self._write(data)
            return
        end = data.rfind(b"\n") + 1
        complete, rest = data[:end], data[end:]
        if complete:
            self._write(_PROGRESS_RUN.sub(_final_steps, complete))
        if b"\r" in rest:
            self._pending = rest
        elif rest:
            self._write(rest)

    def close(self) -> None:
        if self._pending:
            self._write(_PROGRESS_RUN.sub(_final_steps, self._pending))
            self._pending = b""
