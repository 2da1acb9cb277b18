"""Every environment variable autonvtx reads or sets, in one place (listed in the README)."""

from __future__ import annotations

import os

# NVTX's own variable: the injection library every NVTX client in the process loads on its
# first NVTX call (the interface Nsight Systems uses too).
NVTX_INJECTION64_PATH = "NVTX_INJECTION64_PATH"

# Directory into which each recording process writes `<pid>.anr` when it flushes or exits.
# Set by `autonvtx run` when --trace/--summary is given; children inherit it.
RECORD_DIR = "AUTONVTX_RECORD_DIR"

# Upper bound, in MiB, on the recorder's event buffers per process (default 512).
RECORD_LIMIT_MB = "AUTONVTX_RECORD_LIMIT_MB"

# "noop" attaches the recorder as a tool that does nothing (benchmarks' baseline).
RECORDER_MODE = "AUTONVTX_RECORDER_MODE"

# "1" forces the pure-Python range path even where autonvtx's native NVTX client
# (autonvtx._nvtxclient) is built: the fallback, for tests and comparison; same events.
PURE_PYTHON = "AUTONVTX_PURE_PYTHON"

# --budget's percentage, for every process of the run (budget.py).
BUDGET = "AUTONVTX_BUDGET"

# `profile --flight RANGE` (and install(flight=...)): the watched range and its settings as JSON,
# for every process of the run; each times its own instances of it (flightwatch.py).
FLIGHT_WATCH = "AUTONVTX_FLIGHT_WATCH"

# Python's own search path: `autonvtx run` puts the child bootstrap directory (which holds only
# `sitecustomize.py`) first on it, so every Python child process runs the bootstrap.
PYTHONPATH = "PYTHONPATH"

# The parent's resolved configuration as JSON (`Config.to_json()`): the rules Python child
# processes instrument with. Set by `autonvtx run` when it has rules and follows children.
CONFIG = "AUTONVTX_CONFIG"

# `autonvtx run`'s -v count: with it, each child prints one line saying what it wrapped.
VERBOSE = "AUTONVTX_VERBOSE"

# "off" (`--no-children`): a Python child removes autonvtx's variables from its environment,
# the bootstrap from PYTHONPATH, and runs untouched and unrecorded.
CHILDREN = "AUTONVTX_CHILDREN"

# "monotonic" makes the recorder read CLOCK_MONOTONIC for each event instead of the TSC
# (read by the native recorder itself; named here so every variable is listed in one place).
RECORDER_CLOCK = "AUTONVTX_RECORDER_CLOCK"

# A rules file: a Python process started with it in its environment instruments itself at
# start-up (the `autonvtx-autostart.pth` hook the package installs), no launcher needed:
# `nsys profile env AUTONVTX_RULES=rules.toml python train.py`, a Jupyter kernel. Children
# inherit it. AUTONVTX_VERBOSE=1 makes each such process say what it instrumented.
RULES = "AUTONVTX_RULES"

# "last" (`--keep last`): the recorder keeps a ring of chunks per thread within
# AUTONVTX_RECORD_LIMIT_MB, so a long run's trace holds its most recent events (nothing is
# spilled before the end).
RECORD_KEEP = "AUTONVTX_RECORD_KEEP"

# `--flight RANGE` (recorder.flight): the range whose slow instances the recorder watches, and
# its settings; HEAD and TAIL are the trace's name around `.flight-N`, for the line it prints.
FLIGHT_RANGE = "AUTONVTX_FLIGHT_RANGE"
FLIGHT_FACTOR = "AUTONVTX_FLIGHT_FACTOR"
FLIGHT_KEEP = "AUTONVTX_FLIGHT_KEEP"
FLIGHT_MAX = "AUTONVTX_FLIGHT_MAX"
FLIGHT_WARMUP = "AUTONVTX_FLIGHT_WARMUP"
FLIGHT_HEAD = "AUTONVTX_FLIGHT_HEAD"
FLIGHT_TAIL = "AUTONVTX_FLIGHT_TAIL"
# "0": the recording directory gets no events, only the windows (no --summary wants them).
FLIGHT_SPILL = "AUTONVTX_FLIGHT_SPILL"
FLIGHT_VARIABLES = (
    FLIGHT_RANGE,
    FLIGHT_FACTOR,
    FLIGHT_KEEP,
    FLIGHT_MAX,
    FLIGHT_WARMUP,
    FLIGHT_HEAD,
    FLIGHT_TAIL,
    FLIGHT_SPILL,
)
# The exit watcher's (recorder.watcher) under --flight: the record directory whose windows it
# turns into traces while the program runs, and the command that does it (JSON). Set for the
# watcher only, and taken out of what that command inherits.
WATCH_FLIGHT_DIR = "AUTONVTX_WATCH_FLIGHT_DIR"
WATCH_FLIGHT_COMMAND = "AUTONVTX_WATCH_FLIGHT_COMMAND"


# The user's cache directory (XDG): parsed config files are kept under it, in autonvtx/configs
# (configfile.cache); unset: ~/.cache.
XDG_CACHE_HOME = "XDG_CACHE_HOME"

# Nsight Systems' `nsys` for `autonvtx profile` and `autonvtx report X.nsys-rep` (a path or a
# command name); unset: the `nsys` on PATH.
NSYS = "NSYS"


def is_tool_configured() -> bool:
    """Whether an NVTX tool will be attached: NVTX loads the one NVTX_INJECTION64_PATH names on
    each client's first call (nsys sets it for its target, `--trace`/`--summary` for the
    recorder). Without one, every NVTX call is a no-op and no range would be seen."""
    return bool(os.environ.get(NVTX_INJECTION64_PATH))


def verbosity() -> int:
    """AUTONVTX_VERBOSE as a number (0 when unset or unreadable)."""
    try:
        return int(os.environ.get(VERBOSE, "0"))
    except ValueError:
        return 0
