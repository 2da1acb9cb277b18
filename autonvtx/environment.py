"""Every environment variable autonvtx reads or sets, in one place (listed in the README)."""
from __future__ import annotations

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
