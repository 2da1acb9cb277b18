"""The documentation's examples, run: every command README.md and docs/*.md show is executed
here, and its output compared where the page shows one; a block that needs what a test machine
lacks (Nsight Systems, a GPU, a cluster, the reader's own program) says why in a marker, and its
autonvtx command lines are still parsed by autonvtx's own command line, so an option renamed
or removed fails here. Config blocks are loaded as config files, Python blocks compiled.

Markers, an HTML comment on the line before a fenced block (invisible on the page):

    <!-- docs-test: skip REASON -->     not run (its autonvtx command lines are parsed)
    <!-- docs-test: needs WHAT -->      run where WHAT is here (a module, or `3.12` for a Python
                                        version), else parsed only; CI's environments have them
    <!-- docs-test: status N -->        its commands exit with status N (default 0)
    <!-- docs-test: timing REASON -->   what it prints depends on measured times (a diff of
                                        runs): run, exit 0 or 1, output not compared (a timing
                                        assertion is flaky on a shared machine)

In ```console blocks, `$ COMMAND` lines are run and the lines up to the next `$` are the
expected output (stdout and stderr together, as a terminal shows them). Comparing, every number
matches any number (a bound such as `<0.0001` included; a time unit any unit), a run of spaces any run of spaces, a run of
dashes any run of dashes, `...` in a line any text, and a line holding only `...` any lines. Each page's commands run in
order in one fresh directory holding a copy of examples/ and tests/fixtures/; each block starts
at its root, as a reader starts in the repository's root.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from autonvtx.cli import cli
from autonvtx.configfile.tables import RULE_KEYS, TABLE_KEYS, load_file
from autonvtx.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# Languages of blocks that are commands, and of those that are something else this test checks.
SHELL = {"bash", "console"}
KNOWN = SHELL | {"toml", "yaml", "python", "ipython", "text", "json"}
MARKER = re.compile(r"<!-- docs-test: (skip|needs|status|timing) ?(.*?) -->")
# Programs a block must never run here: they need a GPU, a cluster or a server, or (Nsight
# Systems) are run by hand, one capture at a time, on the shared machines.
NEVER_RUN = {"nsys", "torchrun", "srun", "mpirun", "jupyter"}
NUMBER = r"\d[\d,]*(?:\.\d+)?"
UNIT = r"(?:ns|us|ms|s)\b"


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    skip: str | None  # the reason, when the block is not run
    status: int
    timing: bool = False

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks_of(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        marker = MARKER.fullmatch(lines[i - 1].strip()) if i else None
        skip = marker.group(2) if marker and marker.group(1) == "skip" else None
        if marker and marker.group(1) == "needs":
            skip = missing(marker.group(2))
        status = int(marker.group(2)) if marker and marker.group(1) == "status" else 0
        timing = bool(marker and marker.group(1) == "timing")
        blocks.append(Block(page, i + 1, fence.group(1), "\n".join(lines[i + 1 : end]), skip, status, timing))
        i = end + 1
    return blocks


def missing(needs: str) -> str | None:
    """Why `needs` (modules, or a Python version such as 3.12) is not met here; None when it is."""
    for need in needs.replace(",", " ").split():
        if re.fullmatch(r"\d+\.\d+", need):
            if sys.version_info < tuple(map(int, need.split("."))):
                return f"needs Python {need}"
        elif importlib.util.find_spec(need) is None:
            return f"needs {need}"
    return None


def commands_of(block: Block) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) for each command the block shows."""
    commands: list[tuple[str, list[str]]] = []
    pending = ""
    for line in block.text.splitlines():
        if block.lang == "console":
            if line.startswith("$ "):
                commands.append((line[2:], []))
            elif commands and commands[-1][0].endswith("\\"):
                command, out = commands[-1]
                commands[-1] = (command[:-1] + " " + line.strip(), out)
            elif commands:
                commands[-1][1].append(line)
            continue
        stripped = line.strip()
        if pending:
            stripped, pending = pending + " " + stripped, ""
        if stripped.endswith("\\"):
            pending = stripped[:-1]
        elif stripped and not stripped.startswith("#"):
            commands.append((stripped, []))
    return commands


def autonvtx_command_lines(command: str) -> list[list[str]]:
    """The autonvtx argument lists a shell command line holds (after nsys, torchrun, env...)."""
    found = []
    for part in re.split(r"&&|\|\||;|\|", command):
        words = shlex.split(part, comments=True)
        for i, word in enumerate(words):
            if os.path.basename(word) == "autonvtx":
                found.append(words[i + 1 :])
                break
            if word == "-m" and i + 1 < len(words) and words[i + 1] == "autonvtx":
                found.append(words[i + 2 :])
                break
    return found


def check_command_line(args: list[str]) -> None:
    """Parse `autonvtx ARGS` as the command line would, without running anything."""
    if not args or args[0].startswith("-"):
        return
    parent = click.Context(cli, info_name="autonvtx")
    command = cli.get_command(parent, args[0])
    assert command is not None, f"no command {args[0]!r}"
    command.make_context(args[0], list(args[1:]), parent=parent)


def line_pattern(line: str) -> str:
    if "..." in line.strip("."):  # `...` inside a line: any text (a path that differs per machine)
        return ".*?".join(line_pattern(part) for part in line.split("..."))
    out, i = [], 0
    # A bound (`<0.0001`, a p-value below what is printed) is a number too.
    tokens = re.compile(rf"(?P<number><?{NUMBER})(?P<unit> {UNIT})?|(?P<space> +)|(?P<dashes>-{{3,}})")
    for match in tokens.finditer(line):
        out.append(re.escape(line[i : match.start()]))
        if match.group("number"):
            out.append("<?" + NUMBER + (" " + UNIT if match.group("unit") else ""))
        elif match.group("space"):
            out.append(" *" if match.start() == 0 else " +")
        else:
            out.append("-+")
        i = match.end()
    out.append(re.escape(line[i:]))
    return "".join(out)


def output_matches(expected: list[str], output: str) -> bool:
    while expected and not expected[-1].strip():
        expected = expected[:-1]
    pattern = "".join(
        r"(?:[^\n]*\n)*?" if line.strip() == "..." else line_pattern(line.rstrip()) + r"\n" for line in expected
    )
    text = "".join(line.rstrip() + "\n" for line in output.rstrip("\n").splitlines()) if output.strip() else ""
    return re.fullmatch(pattern, text) is not None


def environment(sandbox: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AUTONVTX_", "JUPYTER")) and k not in ("NVTX_INJECTION64_PATH", "PYTHONPATH")
    }
    env["JUPYTER_DATA_DIR"] = str(sandbox / "jupyter")  # `kernel install` writes there, not in ~
    # The autonvtx and python this test runs under come first; a terminal's ordering of output.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(NO_COLOR="1", PYTHONUNBUFFERED="1", TERM="dumb")
    return env


def run_shell(command: str, cwd: Path, sandbox: Path, status: int | tuple[int, ...], where: str) -> tuple[str, Path]:
    """Run one command line in bash from `cwd`; its output, and the directory it ended in."""
    marker = "\n@@docs-test cwd="
    script = f'{command}\n__status=$?\nprintf "\\n@@docs-test cwd=%s" "$PWD" >&2\nexit $__status'
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=environment(sandbox),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=300,
    )
    output, _, ended = done.stdout.rpartition(marker)
    output = output[:-1] if output.endswith("\n\n") else output
    allowed = status if isinstance(status, tuple) else (status,)
    assert done.returncode in allowed, f"{where}: `{command}` exited {done.returncode}:\n{output}"
    return output, Path(ended)


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    shutil.copytree(
        REPO / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("__pycache__", "*.json", "*.recording")
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "fixtures").symlink_to(REPO / "tests" / "fixtures")
    return tmp_path


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_command_a_page_shows_runs_as_shown(page: Path, sandbox: Path) -> None:
    for block in blocks_of(page):
        assert block.lang in KNOWN, f"{block.where}: give the block a language ({sorted(KNOWN)})"
        if block.lang not in SHELL:
            assert not re.search(r"^\$ ", block.text, re.M), f"{block.where}: commands go in a console block"
            continue
        commands = commands_of(block)
        assert commands, f"{block.where}: a {block.lang} block without a command"
        if block.skip is not None:
            assert block.skip.strip(), f"{block.where}: a skipped block says why"
            for command, _ in commands:
                for args in autonvtx_command_lines(command):
                    try:
                        check_command_line(args)
                    except click.ClickException as error:
                        pytest.fail(f"{block.where}: `{command}`: {error.format_message()}")
            continue
        cwd = sandbox
        for command, expected in commands:
            words = set(shlex.split(command, comments=True))
            assert not (words & NEVER_RUN), f"{block.where}: `{command}`: mark the block skip"
            output, cwd = run_shell(command, cwd, sandbox, (0, 1) if block.timing else block.status, block.where)
            if block.lang == "console" and not block.timing:
                assert output_matches(expected, output), (
                    f"{block.where}: `{command}` printed:\n{output}\nexpected:\n" + "\n".join(expected)
                )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_config_and_python_block_a_page_shows_is_valid(page: Path, tmp_path: Path) -> None:
    for block in blocks_of(page):
        if block.skip is not None:
            continue
        if block.lang in ("toml", "yaml"):
            text = block.text
            if block.lang == "toml" and "[tool.autonvtx" in text:
                continue  # pyproject form: the same tables, under tool.
            if "regions" in text and sys.version_info < (3, 12):
                continue  # regions are refused before 3.12; CI checks them on 3.12
            path = tmp_path / f"block{block.line}.{block.lang}"
            path.write_text(text)
            try:
                load_file("--config", path.name, str(tmp_path))
            except ConfigError as error:
                pytest.fail(f"{block.where}: {error}")
        elif block.lang == "python":
            ast.parse(block.text, filename=block.where)


# Runs an ipython block's lines as cells of a real IPython shell, in a process of its own.
IPYTHON_CELLS = """
import sys
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
for cell in sys.stdin.read().splitlines():
    if cell.strip() and not shell.run_cell(cell).success:
        sys.exit(1)
"""


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_ipython_block_a_page_shows_runs_in_ipython(page: Path, sandbox: Path) -> None:
    pytest.importorskip("IPython")
    for block in blocks_of(page):
        if block.lang != "ipython" or block.skip is not None:
            continue
        done = subprocess.run(
            [sys.executable, "-c", IPYTHON_CELLS],
            input=block.text,
            cwd=sandbox,
            env=environment(sandbox),
            text=True,
            capture_output=True,
            timeout=300,
        )
        output = done.stdout + done.stderr
        # A magic's mistakes are printed, not raised: its usage line or an error line.
        refused = re.findall(r"^(?:usage: .*|autonvtx: %autonvtx: .*|Traceback .*)$", output, re.M)
        assert done.returncode == 0 and not refused, f"{block.where}:\n{output}"


def test_inline_autonvtx_command_lines_parse() -> None:
    # `autonvtx ...` in running text: options named there exist (placeholders are skipped).
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for span in re.findall(r"`(autonvtx [^`]+)`", text):
            if re.search(r"[\[<|]|/-|\.\.\.|\bNAME\b|\bN\b|PATH|MODULE|TRACE|GLOB|FILE", span):
                continue
            try:
                check_command_line(shlex.split(span)[1:])
            except (click.NoSuchOption, AssertionError) as error:
                pytest.fail(f"{page.relative_to(REPO)}: `{span}`: {error}")
            except click.ClickException:
                continue  # a command named without all its arguments


def test_config_key_table_lists_every_key() -> None:
    rules = (REPO / "docs" / "rules.md").read_text(encoding="utf-8")
    table = {key for key in TABLE_KEYS if key != "plugin"}
    missing = [f"[autonvtx].{k}" for k in sorted(table) if f"`[autonvtx].{k}`" not in rules]
    missing += [f"[[rules]].{k}" for k in RULE_KEYS if f"`[[rules]].{k}`" not in rules]
    if "`[autonvtx.plugin.NAME]`" not in rules:
        missing.append("[autonvtx.plugin.NAME]")
    assert missing == []


def test_run_options_table_lists_every_option() -> None:
    page = (REPO / "docs" / "run.md").read_text(encoding="utf-8")
    from autonvtx.cli.run import run as run_command

    missing = [
        param.opts
        for param in run_command.params
        if isinstance(param, click.Option)
        and "--help" not in param.opts
        and not any(re.search(rf"[`/]{re.escape(opt)}\b", page) for opt in param.opts)
    ]
    assert missing == []
