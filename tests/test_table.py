"""The one text-table builder: names fitted to a terminal's width keep their distinguishing end;
written to a file or a pipe they are never cut."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import autonvtx_env

from autonvtx.report.render.table import Line, build_table, middle_cut, terminal_width

# The names of a BERT diff that a 100-column cut at the end made alike.
BERT = [f"torch:bert.encoder.layer.{{n}}.attention.{part}" for part in ("self.query", "self.key", "self.value")] + [
    "torch:bert.encoder.layer.{n}.attention.output.dense",
    "torch:bert.encoder.layer.{n}.intermediate.dense",
    "torch:bert.encoder.layer.{n}.output.dense",
]


def test_a_cut_keeps_the_start_and_the_distinguishing_end() -> None:
    cut = [middle_cut(name, 32) for name in BERT]
    assert all(len(text) == 32 and "..." in text for text in cut)
    assert len(set(cut)) == len(BERT)  # still told apart
    assert all(text.startswith("torch:ber") for text in cut)
    assert cut[0].endswith("attention.self.query")
    assert middle_cut("short", 32) == "short"


@pytest.mark.parametrize("room", [0, 1, 3, 4, 5, 10])
def test_a_cut_never_exceeds_its_room(room: int) -> None:
    assert len(middle_cut("abcdefghijklmnopqrstuvwxyz", room)) <= room


def test_the_table_fits_the_width_and_is_never_cut_without_one() -> None:
    lines = [Line([f"{i}.000 ms", f"{i:,}"], name) for i, name in enumerate(BERT)]
    fitted = build_table(["Total", "Instances"], lines, width=60)
    assert all(len(line) <= 60 for line in fitted)
    assert len({line.split("  ")[-1] for line in fitted[2:]}) == len(BERT)
    whole = build_table(["Total", "Instances"], lines, width=None)
    assert [line.split("  ")[-1] for line in whole[2:]] == BERT


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_width_is_the_terminals_with_columns_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    assert terminal_width(Terminal()) == 250
    assert terminal_width(io.StringIO()) is None  # a file or a pipe: never cut


def test_a_report_through_a_pipe_keeps_every_name_whole(tmp_path: Path) -> None:
    long_name = "a" * 150 + ".the_distinguishing_end"
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": [{"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 5, "name": "%s"}]}' % long_name)
    env = autonvtx_env(COLUMNS="40")
    for command in (["report", str(trace)], ["summary", str(trace)]):
        done = subprocess.run(
            [sys.executable, "-m", "autonvtx", *command], capture_output=True, text=True, env=env, cwd=os.getcwd()
        )
        assert done.returncode == 0, done.stderr
        assert long_name in done.stdout
