"""The native exporter on hostile recordings and hostile text: bytes that are not UTF-8, ids
that point nowhere, records cut short, and programs whose events pair up badly. Every case runs
the real recorder in a subprocess and `autonvtx recover`/`run` as a user would."""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, make_file

from autonvtx import environment
from autonvtx.recorder import native

pytestmark = pytest.mark.skipif(native.library_path() is None, reason="the native recorder is not built")

ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def record(tmp_path: Path, source: str, *args: str | bytes) -> Path:
    """Runs `source` under the recorder; returns the directory holding its recording."""
    program = make_file(tmp_path / "prog.py", source)
    out = tmp_path / "rec"
    out.mkdir()
    env = dict(ENV)
    env.pop(environment.RECORDER_MODE, None)
    env[environment.NVTX_INJECTION64_PATH] = str(native.library_path())
    env[environment.RECORD_DIR] = str(out)
    proc = subprocess.run(
        [sys.executable, str(program), *args], env=env, cwd=tmp_path, capture_output=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return out


def autonvtx(tmp_path: Path, *args: str | bytes) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=300,
        env=ENV,
    )


def strict_json(path: Path) -> dict:
    """The trace as a strict reader takes it: valid UTF-8 with no lone surrogate escaped in."""
    text = path.read_bytes().decode("utf-8")
    data = json.loads(text)
    json.dumps(data, ensure_ascii=False).encode("utf-8")  # raises on a lone surrogate
    return data


NON_UTF8_NAME = b"caf\xe9.txt"


def test_a_command_line_that_is_not_utf8_reaches_every_trace_as_replacement_characters(tmp_path: Path) -> None:
    program = make_file(
        tmp_path / "prog.py",
        """
        import nvtx
        with nvtx.annotate("work"):
            pass
    """,
    )
    for trace in ("t.pftrace", "t.json"):
        run = autonvtx(tmp_path, "run", "--trace", trace, str(program), NON_UTF8_NAME)
        assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    from autonvtx.recorder.perfetto import read_trace

    (back,) = read_trace(tmp_path / "t.pftrace")
    assert "caf\ufffd.txt" in back.label and [r.name for r in back.ranges] == ["work"]
    data = strict_json(tmp_path / "t.json")
    names = [e["args"]["name"] for e in data["traceEvents"] if e.get("name") == "process_name"]
    assert len(names) == 1 and "caf\ufffd.txt" in names[0]
    assert any("caf\ufffd.txt" in arg for arg in data["otherData"]["processes"][0]["cmdline"])


def test_recover_writes_a_pftrace_of_a_program_given_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    directory = record(
        tmp_path,
        """
        import nvtx
        with nvtx.annotate("work"):
            pass
    """,
        NON_UTF8_NAME,
    )
    for trace in ("back.pftrace", "back.json"):
        recover = autonvtx(tmp_path, "recover", str(directory), "-o", trace)
        assert recover.returncode == 0 and "Traceback" not in recover.stderr, recover.stderr
    from autonvtx.recorder.perfetto import read_trace

    (back,) = read_trace(tmp_path / "back.pftrace")
    assert back.label.endswith("caf\ufffd.txt") and [r.name for r in back.ranges] == ["work"]
    strict_json(tmp_path / "back.json")


# A recording of everything the format holds: threads, domains, categories, registered and
# inline names, payloads, colors, start/end ranges across threads, marks, a capture window.
RICH = """
    import threading, nvtx
    lib = nvtx.get_domain("lib")
    capture = nvtx.get_domain("autonvtx")
    window = capture.start_range(capture.get_event_attributes(message="capture"))  # a registered string
    def work(n, tag):
        for i in range(n):
            with nvtx.annotate("step", color="blue", domain="train", category="io", payload=i):
                with nvtx.annotate(f"layer.{i % 3}.attn (Attention)", payload=1.5):
                    pass
                lib.push_range(lib.get_event_attributes(message="lib.call", payload=2))
                lib.pop_range()
        nvtx.mark("done", color=0xFF00FF00)
    threads = [threading.Thread(target=work, args=(60, t)) for t in range(2)]
    for t in threads:
        t.start()
    work(60, "main")
    r = nvtx.start_range("async", color="red")
    for t in threads:
        t.join()
    nvtx.end_range(r)
    capture.end_range(window)
    nvtx.push_range("left open")
"""

SECTION = struct.Struct("<IIQ")


def sections(data: bytes) -> list[tuple[int, int, int]]:
    """(offset of the body, tag, length) of each whole section of a recording."""
    found, pos = [], struct.unpack_from("<I", data, 12)[0]
    while pos + SECTION.size <= len(data):
        tag, _, length = SECTION.unpack_from(data, pos)
        if tag == 0 or pos + SECTION.size + length > len(data):
            break
        found.append((pos + SECTION.size, tag, length))
        pos += SECTION.size + length
    return found


def records(data: bytes, body: int, length: int) -> list[int]:
    """The offsets of the event records of the THREAD section at `body` (the layout in recording.py)."""
    pos = body + 32 + (struct.unpack_from("<I", data, body + 24)[0] + 7) // 8 * 8
    found = []
    while pos < body + length:
        kind, flags, ptype, mkind = data[pos : pos + 4]
        size = 24 if kind in (3, 4) else 16
        if kind not in (2, 4):
            size += (8 if ptype else 0) + (4 if flags & 1 else 0) + (4 if flags & 2 else 0)
            if mkind == 1:
                size += 4 + struct.unpack_from("<I", data, pos + size)[0]
            elif mkind == 2:
                size += 4
        found.append(pos)
        pos += (size + 7) // 8 * 8
    return found


def damaged_copy(tmp_path: Path, source: Path, name: str, data: bytes) -> Path:
    directory = tmp_path / name
    directory.mkdir()
    (directory / source.name).write_bytes(data)
    return directory


def limited_memory() -> None:
    """preexec_fn: 4 GiB of address space, so that a size read from damage fails fast instead
    of taking the machine's memory."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def recover(tmp_path: Path, directory: Path, trace: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", "recover", str(directory), "-o", trace],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=ENV,
        preexec_fn=limited_memory,
    )


@pytest.fixture(scope="module")
def rich(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One recording of RICH, made once for the module."""
    (path,) = record(tmp_path_factory.mktemp("rich"), RICH).glob("*.anr")
    return path


def test_one_corrupt_record_keeps_every_event_around_it_and_says_what_was_skipped(tmp_path: Path, rich: Path) -> None:
    from autonvtx.recorder.chrome import read_chrome_trace

    data = bytearray(rich.read_bytes())
    body, _, length = max((s for s in sections(data) if s[1] == 5), key=lambda s: s[2])
    offsets = records(data, body, length)
    data[offsets[len(offsets) // 2]] = 0x77  # no such record kind
    run = recover(tmp_path, damaged_copy(tmp_path, rich, "bad", bytes(data)), "back.json")
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert "its recording is damaged: 1 corrupt record (the rest of its section skipped)" in run.stderr
    good = recover(tmp_path, rich.parent, "good.json")
    (kept,), (full,) = read_chrome_trace(tmp_path / "back.json"), read_chrome_trace(tmp_path / "good.json")
    assert len(full.ranges) // 2 < len(kept.ranges) < len(full.ranges), good.stderr


@pytest.mark.parametrize("ts", [0, 1 << 62], ids=["before-the-previous", "after-the-last-write"])
def test_a_record_with_an_impossible_time_is_left_out_alone(tmp_path: Path, rich: Path, ts: int) -> None:
    """A pop (or end) given a time before its push once made an end before its start, read as a
    584-year range (2**64 ns); a time far past the file's last write, a range as long. Such a
    record is left out, the records around it kept, and the damage said."""
    from autonvtx.recorder.chrome import read_chrome_trace

    data = bytearray(rich.read_bytes())
    body, _, length = max((s for s in sections(data) if s[1] == 5), key=lambda s: s[2])
    offsets = records(data, body, length)
    middle = offsets[len(offsets) // 2]
    struct.pack_into("<Q", data, middle + 8, ts)  # after the kind word and the domain
    run = recover(tmp_path, damaged_copy(tmp_path, rich, "bad", bytes(data)), "back.json")
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert "1 record with an impossible time" in run.stderr
    recover(tmp_path, rich.parent, "good.json")
    (kept,), (full,) = read_chrome_trace(tmp_path / "back.json"), read_chrome_trace(tmp_path / "good.json")
    # The range whose end was left out stays open to the last write, as an unended range does:
    # no range outlasts the recording.
    assert all(0 <= r.duration_ns and r.end_ns <= full.flush_ns for r in kept.ranges)
    assert len(kept.ranges) >= len(full.ranges) - 2


def test_a_duplicated_section_does_not_double_its_events(tmp_path: Path, rich: Path) -> None:
    """A thread's section written twice (a copy, a write replayed) once doubled its events: its
    records, earlier than the thread's last, are left out and said."""
    from autonvtx.recorder.chrome import read_chrome_trace

    data = bytes(rich.read_bytes())
    body, _, length = max((s for s in sections(data) if s[1] == 5), key=lambda s: s[2])
    section = data[body - SECTION.size : body + length]
    end = body + length
    doubled = data[:end] + section + data[end:]
    run = recover(tmp_path, damaged_copy(tmp_path, rich, "twice", doubled), "back.json")
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert "with an impossible time" in run.stderr
    recover(tmp_path, rich.parent, "good.json")
    (kept,), (full,) = read_chrome_trace(tmp_path / "back.json"), read_chrome_trace(tmp_path / "good.json")
    assert len(kept.ranges) == len(full.ranges)


def test_an_impossible_registry_id_is_not_trusted(tmp_path: Path, rich: Path) -> None:
    data = bytearray(rich.read_bytes())
    body, _, _ = next(s for s in sections(data) if s[1] == 3)  # STRINGS: {u32 id, ...}
    struct.pack_into("<I", data, body, 0xFFFFFFF0)
    run = recover(tmp_path, damaged_copy(tmp_path, rich, "bad", bytes(data)), "back.pftrace")
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert "1 registry entry with an impossible id" in run.stderr


def test_a_record_cut_at_the_end_of_its_section_is_not_read_past_it(tmp_path: Path, rich: Path) -> None:
    """The last section ends 16 bytes into a start record (24 bytes or more), at the end of the
    file and of a page: reading its range id would read past the mapping."""
    data = bytes(rich.read_bytes())
    body, start = next(
        (body, p)
        for body, tag, length in sections(data)
        if tag == 5
        for p in records(data, body, length)
        if data[p] == 3
    )
    head = data[: body - SECTION.size] + SECTION.pack(5, 0, start + 16 - body) + data[body : start + 16]
    pad = -len(head) % 4096  # a padding section before it puts the cut at a page's end
    while 0 < pad < SECTION.size:
        pad += 4096
    filler = SECTION.pack(99, 0, pad - SECTION.size) + bytes(pad - SECTION.size) if pad else b""
    cut = head[: body - SECTION.size] + filler + head[body - SECTION.size :]
    assert len(cut) % 4096 == 0
    run = recover(tmp_path, damaged_copy(tmp_path, rich, "cut", cut), "back.json")
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert "1 corrupt record" in run.stderr


def mutations(data: bytes, seed: int, count: int) -> list[bytes]:
    """`count` damaged copies of a recording, seeded: cuts (of the file, of a record at its end),
    flipped bytes, extreme words, wrong section lengths, broken record heads, impossible
    registry ids and text lengths."""
    rng = random.Random(seed)
    heads = [s for s in sections(data)]
    starts = [p for body, tag, length in heads if tag == 5 for p in records(data, body, length)]
    registries = [body for body, tag, _ in heads if tag in (2, 3, 4)]
    extremes = (0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFF0, 0xFFFFFFFF)
    out = []
    for _ in range(count):
        copy = bytearray(data)
        how = rng.randrange(8)
        if how == 0:
            copy = copy[: rng.randrange(64, len(copy))]
        elif how == 7:  # a write cut short with its section's length made to fit: records cut at the end
            body, _, length = rng.choice([s for s in heads if s[1] == 5])
            cut = body + rng.randrange(32, length)
            copy = copy[:cut]
            struct.pack_into("<Q", copy, body - 8, cut - body)
        elif how == 1:
            for _ in range(rng.randint(1, 8)):
                copy[rng.randrange(64, len(copy))] ^= 1 << rng.randrange(8)
        elif how == 2:
            struct.pack_into("<I", copy, rng.randrange(64, len(copy) - 4) & ~3, rng.choice(extremes))
        elif how == 3:
            body = rng.choice(heads)[0]
            struct.pack_into("<Q", copy, body - 8, rng.choice((0, 7, 31, 33, rng.randrange(1 << 20), (1 << 64) - 1)))
        elif how == 4:
            at = rng.choice(starts)
            copy[at + rng.randrange(4)] = rng.randrange(256)
        elif how == 5:
            struct.pack_into("<I", copy, rng.choice(registries) + rng.choice((0, 4, 8)), rng.choice(extremes))
        else:
            at = rng.choice(starts)
            struct.pack_into("<I", copy, at + rng.choice((16, 20, 24, 28, 32)), rng.choice(extremes))
        out.append(bytes(copy))
    return out


FUZZ_CASES = 300


def sanitized_exporter(directory: Path) -> Path:
    """The harness tests/native/export_harness.c and the exporter, built with ASan and UBSan."""
    native_dir = REPO / "autonvtx" / "recorder" / "_native"
    compiler = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    required = bool(os.environ.get("CI") or os.environ.get("REQUIRE_SANITIZERS"))  # .ci/run sets it
    if compiler is None:
        (pytest.fail if required else pytest.skip)("no C compiler to build the sanitized exporter")
    binary = directory / "export_harness"
    build = subprocess.run(
        [
            compiler,
            "-std=gnu11",
            "-g",
            "-O1",
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=all",
            "-fno-omit-frame-pointer",
            f"-I{native_dir}",
            str(REPO / "tests" / "native" / "export_harness.c"),
            *map(str, sorted(native_dir.glob("export*.c"))),
            "-Wl,--wrap=mmap,--wrap=munmap",
            "-o",
            str(binary),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if build.returncode != 0:
        (pytest.fail if required else pytest.skip)(
            f"{compiler} cannot build with -fsanitize=address,undefined: {build.stderr.strip()[-500:]}"
        )
    return binary


def test_the_exporter_under_asan_and_ubsan_reads_damaged_recordings_within_their_bounds(
    tmp_path: Path, rich: Path
) -> None:
    binary = sanitized_exporter(tmp_path)
    cases = tmp_path / "cases"
    cases.mkdir()
    paths = [rich]
    for i, data in enumerate(mutations(rich.read_bytes(), seed=21, count=FUZZ_CASES)):
        paths.append(cases / f"{i}.anr")
        paths[-1].write_bytes(data)
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"}
    run = subprocess.run([str(binary), *map(str, paths)], capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stderr[-4000:]
    assert "runtime error" not in run.stderr and "Sanitizer" not in run.stderr, run.stderr[-4000:]
    lines = run.stdout.splitlines()
    assert len(lines) == 3 * len(paths)
    assert lines[0].endswith("damage 0/0/0") and "rc 0" in lines[0]


FUZZ_DRIVER = """
import sys, traceback
from pathlib import Path
from autonvtx.cli import main
for directory in sys.argv[1:]:
    for output in ("t.json", "t.pftrace"):
        try:
            main(["recover", directory, "-o", str(Path(directory) / output)])
        except SystemExit as exit:
            print(f"{directory} {output}: status {exit.code}", flush=True)
        except BaseException:
            print(f"{directory} {output}: Traceback", flush=True)
            traceback.print_exc()
    try:
        main(["summary", str(Path(directory) / "t.json"), "--tree", "--skip-first", "1"])
    except SystemExit as exit:
        print(f"{directory} summary: status {exit.code}", flush=True)
    except BaseException:
        print(f"{directory} summary: Traceback", flush=True)
        traceback.print_exc()
"""


def test_recover_on_damaged_recordings_never_raises_and_keeps_what_it_can(tmp_path: Path, rich: Path) -> None:
    """A seeded fuzz of `autonvtx recover` (and `summary` of what it wrote): every case ends with a
    trace or a one-line message, never a traceback."""
    directories = []
    for i, data in enumerate(mutations(rich.read_bytes(), seed=2021, count=FUZZ_CASES)):
        directories.append(damaged_copy(tmp_path, rich, f"case{i}", data))
    driver = make_file(tmp_path / "driver.py", FUZZ_DRIVER)
    run = subprocess.run(
        [sys.executable, str(driver), *map(str, directories)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        env=ENV,
        preexec_fn=limited_memory,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert "Traceback" not in run.stdout + run.stderr, (run.stdout + run.stderr)[-4000:]
    written = sum((d / "t.json").exists() for d in directories)
    assert written > FUZZ_CASES * 0.8  # most damage still leaves a file worth reading


def range_set(recording: object) -> list[tuple[object, ...]]:
    return sorted((r.tid, r.domain, r.name, r.start_ns, r.end_ns, r.is_open) for r in recording.ranges)  # type: ignore[attr-defined]


def test_pops_pair_per_domain_as_the_python_reader_pairs_them(tmp_path: Path) -> None:
    """Domains interleaved on one thread, popped out of order and popped with nothing open: the
    exporter pairs exactly as the oracle reader (recording.py) does, and counts the same strays."""
    from autonvtx.recorder.chrome import read_chrome_trace
    from autonvtx.recorder.recording import read_directory

    directory = record(
        tmp_path,
        """
        import nvtx
        for i in range(50):
            nvtx.push_range("a1", domain="A")
            nvtx.push_range("b1", domain="B")
            nvtx.push_range("a2", domain="A")
            nvtx.pop_range(domain="B")      # b1, below a2
            nvtx.push_range("c1", domain="C")
            nvtx.pop_range(domain="A")      # a2, below c1
            nvtx.pop_range(domain="C")
            nvtx.pop_range(domain="D")      # nothing open in D
            nvtx.pop_range(domain="A")
        nvtx.push_range("open", domain="B")
    """,
    )
    (expected,) = read_directory(directory)
    run = recover(tmp_path, directory, "t.json")
    assert run.returncode == 0, run.stderr
    (got,) = read_chrome_trace(tmp_path / "t.json")
    assert range_set(got) == range_set(expected) and len(got.ranges) == 201
    assert got.unmatched_pops == expected.unmatched_pops == 50


# Each is quadratic in a reader that scans: a pop without a push in its domain scanned the whole
# stack (200k such pops under a 200k-deep stack took 79 s to export), each event's category was
# looked up in a list of every named category. Linear, they take well under a second; the
# timeout only stops a quadratic reader from holding the test suite for minutes.
SCALE = {
    "stray pops": (
        """
        import nvtx
        for i in range(200_000):
            nvtx.push_range("open")
        for i in range(200_000):
            nvtx.pop_range(domain="other")
        for i in range(200_000):
            nvtx.pop_range()
    """,
        200_000,
    ),
    "categories": (
        """
        import nvtx
        for i in range(100_000):
            with nvtx.annotate("x", category=f"c{i}"):
                pass
    """,
        100_000,
    ),
}


@pytest.mark.parametrize("case", sorted(SCALE))
def test_export_is_linear_in_stray_pops_and_categories(tmp_path: Path, case: str) -> None:
    from autonvtx.recorder.chrome import read_chrome_trace

    source, ranges = SCALE[case]
    directory = record(tmp_path, source)
    try:
        run = subprocess.run(
            [sys.executable, "-m", "autonvtx", "recover", str(directory), "-o", "t.json"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env=ENV,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"writing the trace of {ranges:,} ranges ({case}) did not end within 120 s")
    assert run.returncode == 0, run.stderr
    (rec,) = read_chrome_trace(tmp_path / "t.json")
    assert len(rec.ranges) == ranges
    if case == "categories":
        assert {r.category for r in rec.ranges} == {f"c{i}" for i in range(100_000)}
    else:
        assert rec.unmatched_pops == 200_000


WINDOWED = """
    import nvtx
    def busy(n):
        return sum(range(n))
    for i in range(30):                 # before the window: not exported
        with nvtx.annotate("setup"):
            busy(20_000)
    capture = nvtx.get_domain("autonvtx")
    window = capture.start_range(capture.get_event_attributes(message="capture"))
    for i in range(10):
        with nvtx.annotate("step"):
            busy(20_000)
    capture.end_range(window)
    for i in range(30):                 # after it: not exported
        with nvtx.annotate("teardown"):
            busy(20_000)
"""


def test_wall_share_under_a_capture_window_divides_by_the_window(tmp_path: Path) -> None:
    """The live summary and `autonvtx summary` of the trace it wrote agree: the capture range
    spans the exported time (100%), not the whole run (about 20% here)."""
    from autonvtx.recorder.chrome import read_chrome_trace
    from autonvtx.recorder.results import Request, write_results
    from autonvtx.stats.python_twin import summarize

    directory = record(tmp_path, WINDOWED)
    live = {
        s.name: s for s in write_results(str(directory), Request(trace=str(tmp_path / "t.json"), summary="-")).stats
    }
    saved = {s.name: s for s in summarize(read_chrome_trace(tmp_path / "t.json"))}
    assert set(live) == set(saved) == {"capture", "step"}
    assert live["capture"].wall_percent == pytest.approx(100.0)
    for name in live:
        assert live[name].wall_percent == pytest.approx(saved[name].wall_percent, rel=1e-6), name


WARM_UP = """
    import nvtx
    def busy(n):
        return sum(range(n))
    for step in range(5):
        with nvtx.annotate("forward"):
            for i in range(3):
                with nvtx.annotate(f"encoder.layers.{i} (Attention)"):
                    busy(2_000_000 if step == 0 else 20_000)   # the first call compiles
"""


def test_skip_first_leaves_out_each_ranges_warm_up_under_group_class(tmp_path: Path) -> None:
    """--skip-first 1 --group class: each layer's first call is warm-up (3 instances out of the
    Attention row, not 1), and the warm-up is out of % wall's denominator too."""
    from autonvtx.recorder.recording import read_directory
    from autonvtx.recorder.results import Request, write_results
    from autonvtx.stats.model import ViewOptions
    from autonvtx.stats.python_twin import summarize

    directory = record(tmp_path, WARM_UP)
    options = ViewOptions(group="class", skip_first=1)
    live = {s.name: s for s in write_results(str(directory), Request(summary="-", options=options)).stats}
    oracle = {s.name: s for s in summarize(read_directory(directory), options)}
    assert live["Attention"].count == oracle["Attention"].count == 3 * 4
    assert live["forward"].count == 4
    assert live["forward"].wall_percent > 95  # the warm-up forward took ~90% of the run
    for name in live:
        assert live[name].wall_percent == pytest.approx(oracle[name].wall_percent, rel=1e-6), name
