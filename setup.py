"""Builds the native NVTX recorder as a plain shared library and autonvtx's NVTX client as an
extension module (metadata lives in pyproject.toml)."""

from __future__ import annotations

import glob
import os
import platform
import re
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel
from setuptools.errors import BaseError, CCompilerError, CompileError, LinkError

LIBRARY = "autonvtx.recorder.libautonvtx_recorder"
# The recorder, one unit per job sharing recorder.h (see its header comment).
RECORDER_SOURCES = [
    f"autonvtx/recorder/_native/{name}.c"
    for name in ("recorder", "events", "buffers", "registry", "clock", "spill", "flight", "flight_window")
]
# The exporter, one unit per job sharing export.h (reader, pairing, JSON and Perfetto writers,
# statistics).
EXPORTER_SOURCES = [
    f"autonvtx/recorder/_native/{name}.c"
    for name in ("export", "export_read", "export_pair", "export_json", "export_perfetto", "export_stats")
]
CLIENT = "autonvtx._nvtxclient"
# The target's source compiled without building the ast module's types (runner.compile_script).
SOURCECODE = "autonvtx._sourcecode"
# An export's per-name table written and sorted in C (report/render/text.py and report/views.py
# keep the twins).
ROWTEXT = "autonvtx.report._rowtext"
# The report's sweep of an Nsight Systems export in C, SQLite found at run time in the process.
SWEEP = "autonvtx.report.nsys._sweep"
CLIENT_SOURCES = [
    f"autonvtx/_native/{name}.c"
    for name in (
        "nvtxclient",
        "range",
        "ranged",
        "steps",
        "coroutine",
        "monitoring",
        "monitoringwalk",
        "spans",
        "globalevents",
        "regions",
        "uniform",
        "modulepath",
        "chainedloader",
        "chainedfinder",
        "wrapping",
        "arguments",
        "deadline",
        "flightwatch",
        "shapes",
    )
]


# What a build without each optional part loses: the words of autonvtx/nativeparts.py, which
# setup.py cannot import (tests/test_packaging.py checks they agree).
OPTIONAL_LOSS = {
    CLIENT: "no regions or capture windows, no code engine, no native walk; ranges go through the slower nvtx package",
    SOURCECODE: "scripts are compiled by compile(), about 3 ms slower at start-up",
    ROWTEXT: "report tables written to a file or a pipe are formatted in Python, several times slower",
    SWEEP: "reports on Nsight Systems exports sweep in Python, reading them several times slower",
}
LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def local_headers(directory: str) -> list[str]:
    """The headers of a native source directory: every one is a dependency of its extension (a
    changed header rebuilds it) and goes into the source archive with it."""
    return sorted(glob.glob(os.path.join(directory, "*.h")))


def missing_headers(ext: Extension) -> str:
    """The files `ext` is built from (its sources and the headers they include in quotes) that
    are not in this source tree, '' when none is missing: checked before compiling, so a missing
    file is named instead of a compiler error."""
    missing: list[str] = []
    pending, seen = list(ext.sources), set()
    while pending:
        path = os.path.normpath(pending.pop())
        if path in seen:
            continue
        seen.add(path)
        if not os.path.isfile(path):
            missing.append(path)
            continue
        with open(path, encoding="utf-8") as file:
            text = file.read()
        for header in LOCAL_INCLUDE.findall(text):
            candidates = [os.path.join(d, header) for d in (os.path.dirname(path), *ext.include_dirs)]
            pending.append(next((c for c in candidates if os.path.isfile(c)), candidates[0]))
    return ", ".join(sorted(missing))


def nvtx_include_dir() -> str:
    """The directory holding ``nvtx3/nvToolsExt.h``, from the nvidia-nvtx wheel or the environment."""
    candidates = []
    override = os.environ.get("AUTONVTX_NVTX_INCLUDE")
    if override:
        candidates.append(override)
    for entry in sys.path:
        # nvidia-nvtx ships its headers under nvidia/cu13/include; older releases used another
        # nvidia/<name>/include directory.
        candidates.extend(sorted(glob.glob(os.path.join(entry or ".", "nvidia", "*", "include"))))
    candidates += ["/usr/local/cuda/include", "/usr/include"]
    for directory in candidates:
        if os.path.isfile(os.path.join(directory, "nvtx3", "nvToolsExt.h")):
            return directory
    raise SystemExit(
        "autonvtx: setup.py: cannot find the NVTX v3 headers (nvtx3/nvToolsExt.h); "
        "install the 'nvidia-nvtx' package into the build environment "
        "(pip does this for you unless --no-build-isolation is given), "
        "or set AUTONVTX_NVTX_INCLUDE to the directory that contains nvtx3/"
    )


class BuildPlainLibrary(build_ext):
    """Names the recorder ``libautonvtx_recorder.so``: NVTX loads it by path, not as a Python module."""

    def get_ext_filename(self, fullname: str) -> str:
        filename: str = super().get_ext_filename(fullname)
        # distutils asks with the last dotted component only, setuptools with the full name.
        if fullname.split(".")[-1] == LIBRARY.split(".")[-1]:
            suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
            if filename.endswith(suffix):
                filename = filename[: -len(suffix)] + ".so"
        return filename

    def get_export_symbols(self, ext: Extension) -> list[str]:
        if ext.name != LIBRARY:
            return list(super().get_export_symbols(ext))
        # Not a Python module: there is no PyInit_ symbol to export.
        return ext.export_symbols

    def run(self) -> None:
        # Where the records go is known only now: setuptools clears `inplace` while it builds.
        self.records = self.build_records()
        # A record from an earlier build must not outlive a build that succeeds.
        for record in self.records:
            if os.path.exists(record):
                os.remove(record)
        super().run()

    def build_records(self) -> list[str]:
        """autonvtx/native-build-failures.txt where this build puts the package (nativeparts.py
        reads it): the build directory, and the source tree too when the extensions are copied
        there (--inplace, `pip install -e`)."""
        directories = [os.path.join(self.build_lib, "autonvtx")]
        if self.inplace or getattr(self, "editable_mode", False):
            directories.append(self.get_finalized_command("build_py").get_package_dir("autonvtx") or "autonvtx")
        return [os.path.join(directory, "native-build-failures.txt") for directory in directories]

    def build_extension(self, ext: Extension) -> None:
        missing = missing_headers(ext)
        if missing:
            reason = f"{missing} not found in this source tree (an incomplete source archive?)"
            if not ext.optional:
                raise SystemExit(f"autonvtx: setup.py: cannot build {ext.name}: {reason}")
            self.record_failure(ext, reason)
            return
        ext.include_dirs.append(nvtx_include_dir())
        try:
            self.build_with_fallback(ext)
        except (BaseError, CCompilerError, CompileError, LinkError) as error:
            if not ext.optional:
                raise
            self.record_failure(ext, f"the C compiler failed ({error}; its message is above)")

    def build_with_fallback(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception:
            # A compiler without TLS descriptors (older clang): the default TLS dialect.
            if not any(flag in ext.extra_compile_args for flag in RECORDER_FLAGS):
                raise
            ext.extra_compile_args = [f for f in ext.extra_compile_args if f not in RECORDER_FLAGS]
            super().build_extension(ext)

    def record_failure(self, ext: Extension, reason: str) -> None:
        """An optional part not built: said loudly here, and kept for `autonvtx --version` and `run -v`."""
        for record in getattr(self, "records", None) or self.build_records():
            os.makedirs(os.path.dirname(record), exist_ok=True)
            with open(record, "a", encoding="utf-8") as file:
                file.write(f"{ext.name}: {reason}\n")
        banner = "*" * 78
        message = (
            f"WARNING: autonvtx: the optional native part {ext.name} was NOT built: {reason}.\n"
            f"autonvtx installs and runs without it, with less ({OPTIONAL_LOSS[ext.name]});\n"
            "`autonvtx --version` names what is missing. Fix the cause and install again to get it."
        )
        sys.stderr.write(f"\n{banner}\n{message}\n{banner}\n\n")
        sys.stderr.flush()

    def get_libraries(self, ext: Extension) -> list[str]:
        if ext.name != LIBRARY:
            return list(super().get_libraries(ext))
        # Never link libpython: NVTX clients dlopen this library, possibly outside Python.
        return list(ext.libraries)


# One line Python's site module runs at every start-up (a .pth file in site-packages): it
# imports autonvtx only when AUTONVTX_RULES is set, so a process without it pays one dict lookup.
STARTUP_PTH = "autonvtx-autostart.pth"


class BuildPyWithStartup(build_py):
    """Puts the start-up .pth at the root of the wheel, which installs into site-packages."""

    def run(self) -> None:
        super().run()
        self.copy_file(STARTUP_PTH, os.path.join(self.build_lib, STARTUP_PTH))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, STARTUP_PTH)]


class EditableWheelWithStartup(editable_wheel):
    """`pip install -e .`: an editable wheel holds only a path hook, so the start-up .pth is
    added beside it (setuptools' _install_namespaces writes there for the same reason)."""

    def _install_namespaces(self, installation_dir: str, pth_prefix: str) -> None:
        super()._install_namespaces(installation_dir, pth_prefix)
        self.copy_file(STARTUP_PTH, os.path.join(installation_dir, STARTUP_PTH))


# The recorder's thread-local buffer pointer through TLS descriptors: glibc places a dlopen'ed
# library's TLS in its static surplus when there is room, and the access is then a load from
# %fs like initial-exec's; when there is none it falls back to dynamic TLS instead of failing
# the dlopen (which initial-exec would do).
RECORDER_FLAGS = ["-mtls-dialect=gnu2"] if platform.machine() in ("x86_64", "AMD64") else []

setup(
    ext_modules=[
        Extension(
            LIBRARY,
            sources=[*RECORDER_SOURCES, *EXPORTER_SOURCES],
            depends=local_headers("autonvtx/recorder/_native"),
            extra_compile_args=["-O2", "-fvisibility=hidden", "-std=gnu11", *RECORDER_FLAGS],
            libraries=["pthread"],
            py_limited_api=False,
        ),
        # An NVTX client (the headers' implementation compiled in): on its first NVTX call it
        # loads the tool NVTX_INJECTION64_PATH names. Built for the running Python (not the
        # limited API: the per-call path uses vectorcall). optional: ranges.py falls back to
        # pure Python when it is missing, so a failed build only warns.
        Extension(
            CLIENT,
            sources=CLIENT_SOURCES,
            depends=local_headers("autonvtx/_native"),
            # RECORDER_FLAGS: the code engine's per-thread stack of open ranges is thread-local.
            extra_compile_args=["-O2", "-fvisibility=hidden", "-std=gnu11", *RECORDER_FLAGS],
            libraries=["dl", "rt"],  # rt: timer_create before glibc 2.34 (deadline.c)
            py_limited_api=False,
            optional=True,
        ),
        # optional: the runner compiles with builtins.compile when it is missing.
        Extension(
            SOURCECODE,
            sources=["autonvtx/_native/sourcecode.c"],
            extra_compile_args=["-O2", "-fvisibility=hidden", "-std=gnu11"],
            py_limited_api=False,
            optional=True,
        ),
        # optional: report tables are written by their Python twins when it is missing.
        Extension(
            ROWTEXT,
            sources=["autonvtx/report/_native/rowtext.c", "autonvtx/report/_native/rowfigures.c"],
            depends=local_headers("autonvtx/report/_native"),
            extra_compile_args=["-O2", "-fvisibility=hidden", "-std=gnu11"],
            py_limited_api=False,
            optional=True,
        ),
        # optional: the report sweeps in Python (report/nsys/sweep.py's Sweep) when it is missing. No
        # build dependency on SQLite: it uses the SQLite Python's _sqlite3 module has loaded.
        Extension(
            SWEEP,
            sources=[
                f"autonvtx/report/nsys/_native/{name}.c"
                for name in (
                    "sweep",
                    "sweep_sqlite",
                    "sweep_order",
                    "sweep_tables",
                    "sweep_walk",
                    "sweep_rows",
                    "sweep_check",
                )
            ],
            depends=local_headers("autonvtx/report/nsys/_native"),
            extra_compile_args=["-O2", "-fvisibility=hidden", "-std=gnu11"],
            libraries=["dl"],  # dlopen/dlsym before glibc 2.34
            py_limited_api=False,
            optional=True,
        ),
    ],
    cmdclass={
        "build_ext": BuildPlainLibrary,
        "build_py": BuildPyWithStartup,
        "editable_wheel": EditableWheelWithStartup,
    },
)
