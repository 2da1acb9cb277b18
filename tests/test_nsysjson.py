"""Nsight Systems' --python-functions-trace JSON: read as a config, written by `export`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, autonvtx_env, make_file, run_autonvtx

from autonvtx.config import parse_color
from autonvtx.configfile import load_config
from autonvtx.errors import ConfigError
from autonvtx.listing import to_nsys_json

MODULES = REPO / "tests" / "modules"

# The example of NVIDIA's CuPy tutorial, as Nsight Systems documents the format.
CUPY_EXAMPLE = """
[
    {
        "_comment": "CuPy Annotations",
        "module": "cupy",
        "color": "black",
        "functions": ["random.random", "dot", "sort"]
    }
]
"""


def autonvtx(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", *args],
        cwd=cwd,
        env=autonvtx_env(PYTHONPATH=os.pathsep.join([str(REPO), str(MODULES)])),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_reads_the_documented_example(tmp_path: Path) -> None:
    make_file(tmp_path / "cupy_annotations.json", CUPY_EXAMPLE)
    config = load_config(["cupy_annotations.json"], cwd=str(tmp_path))
    # Each dotted name may be a class path or a submodule path: both readings are rules.
    assert [(r.modules, r.include, r.color) for r in config.rules] == [
        (("cupy",), ("random.random", "dot", "sort"), "black"),
        (("cupy.random",), ("random",), "black"),
    ]
    assert {r.origin for r in config.rules} == {"cupy_annotations.json: [0]"}
    assert config.rules[0].domain is None  # the global domain, as Nsight Systems' default


def test_names_are_exact_and_colors_are_hex_or_names(tmp_path: Path) -> None:
    make_file(
        tmp_path / "a.json",
        """
        [{"module": "torch.amp", "domain": "PyTorch", "color": "E8B795",
          "functions": ["GradScaler.scale", "GradScaler.unscale_"]},
         {"module": "m", "color": "#00ff00", "functions": ["f"]}]
    """,
    )
    config = load_config(["a.json"], cwd=str(tmp_path))
    scaler = config.rules[0]
    assert scaler.modules == ("torch.amp",) and scaler.domain == "PyTorch"
    assert scaler.include == ("GradScaler.scale", "GradScaler.unscale_")
    assert parse_color(scaler.color or "") == parse_color("#e8b795")
    assert config.rules[1].modules == ("torch.amp.GradScaler",)
    assert config.rules[-1].color == "#00ff00"


@pytest.mark.parametrize(
    "text, message",
    [
        ("{}", r"^a\.json: expected a list of \{\"module\", \"functions\"\} objects"),
        ("[1]", r"^a\.json: \[0\]: expected an object, got int$"),
        (
            '[{"module": "m", "function": ["f"]}]',
            r"^a\.json: \[0\]\.function: unknown key; .*did you mean 'functions'\?$",
        ),
        ('[{"functions": ["f"]}]', r"^a\.json: \[0\]\.module: expected a dotted module name, got None$"),
        (
            '[{"module": "__main__", "functions": ["f"]}]',
            r"^a\.json: \[0\]\.module: Nsight Systems cannot trace '__main__'",
        ),
        ('[{"module": "m", "functions": []}]', r"^a\.json: \[0\]\.functions: expected a non-empty list of names$"),
        (
            '[{"module": "m", "functions": ["Trainer.*"]}]',
            r"^a\.json: \[0\]\.functions\[0\]: expected an exact dotted name such as 'Class\.method' \(no patterns\), got 'Trainer\.\*'$",
        ),
        (
            '[{"module": "m", "functions": ["f"], "color": "not a color"}]',
            r"^a\.json: \[0\]\.color: expected a color name or 'RRGGBB' hex, got 'not a color'$",
        ),
        (
            '[{"module": "m", "functions": ["f"], "domain": ""}]',
            r"^a\.json: \[0\]\.domain: expected a non-empty string$",
        ),
        ('[{"module": "m",', r"^a\.json:1:\d+: invalid JSON: "),
    ],
)
def test_bad_files(tmp_path: Path, text: str, message: str) -> None:
    make_file(tmp_path / "a.json", text)
    with pytest.raises(ConfigError, match=message):
        load_config(["a.json"], cwd=str(tmp_path))


def test_every_bad_entry_is_reported_at_once(tmp_path: Path) -> None:
    make_file(
        tmp_path / "a.json",
        """
        [{"module": "m", "function": ["f"]}, {"module": "ok", "functions": ["f"]},
         {"module": "m", "functions": ["f"], "color": "nope"}]
    """,
    )
    with pytest.raises(ConfigError) as info:
        load_config(["a.json"], cwd=str(tmp_path))
    assert [line.partition(": ")[2].partition(":")[0] for line in str(info.value).splitlines()] == [
        "[0].function",
        "[2].color",
    ]


def test_run_with_an_nsys_file_as_config(tmp_path: Path) -> None:
    make_file(
        tmp_path / "trace.nsys.json",
        """
        [{"module": "inst_shapes.kinds", "domain": "shapes", "color": "0000FF",
          "functions": ["outer", "Trainer.step"]}]
    """,
    )
    make_file(
        tmp_path / "prog.py",
        f"""
        import sys
        sys.path.insert(0, {str(MODULES)!r})
        from inst_shapes import kinds
        kinds.outer(1)
        kinds.Trainer().step(2)
        kinds.plain(3)
    """,
    )
    done = run_autonvtx("--config", "trace.nsys.json", "prog.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    ranges = done.ranges()
    assert [e["name"] for e in ranges] == ["outer", "Trainer.step"]
    assert {e["args"]["domain"] for e in ranges} == {"shapes"}
    assert {e["args"]["color"] for e in ranges} == {"#0000ff"}


def test_export_resolves_globs_into_exact_names_that_read_back_the_same(tmp_path: Path) -> None:
    args = ["-t", "inst_shapes.*", "--include", "Trainer.*", "--include", "outer"]
    done = autonvtx("export", "--format", "nsys", *args, "inst_shapes.reexport", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data == [
        {
            "module": "inst_shapes.kinds",
            "domain": "autonvtx",
            "color": data[0]["color"],
            "functions": [
                "Trainer.Inner.run",
                "Trainer.__call__",
                "Trainer.__init__",
                "Trainer.astep",
                "Trainer.build",
                "Trainer.epochs",
                "Trainer.static",
                "Trainer.step",
                "outer",
            ],
        }
    ]
    # Read back as a config, it selects the same functions (list decides as a run would).
    (tmp_path / "exported.json").write_text(done.stdout)
    back = autonvtx("export", "--config", "exported.json", "inst_shapes.reexport", cwd=tmp_path)
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout) == data


def test_exported_file_reads_back_without_warnings_and_selects_what_list_showed(tmp_path: Path) -> None:
    # Issue 11, 5: classes (Trainer.step), nested classes (Trainer.Inner.run) and re-exports
    # (inst_shapes.reexport.plain) must come back as they went out, with nothing "unmatched".
    make_file(
        tmp_path / "rules.toml",
        """
        [[rules]]
        modules = ["inst_shapes", "inst_shapes.*"]
        exclude = ["_*", "*._*"]
    """,
    )
    exported = autonvtx("export", "--config", "rules.toml", "inst_shapes.reexport", "-o", "fx.json", cwd=tmp_path)
    assert (exported.returncode, exported.stderr) == (0, "")

    def listed(config: str) -> tuple[set[tuple[str, str, str]], str]:
        done = autonvtx("list", "--json", "--config", config, "inst_shapes.reexport", cwd=tmp_path)
        assert (done.returncode, done.stderr) == (0, "")
        rules = json.loads(done.stdout)["rules"]
        assert [rule["unmatched"] for rule in rules] == [[] for _ in rules]
        selected = {(s["module"], s["qualname"], s["kind"]) for rule in rules for s in rule["selected"]}
        text = autonvtx("list", "--config", config, "inst_shapes.reexport", cwd=tmp_path).stdout
        return selected, text

    before, _ = listed("rules.toml")
    after, text = listed("fx.json")
    assert after == before
    assert {"Trainer.step", "Trainer.Inner.run", "plain"} <= {qualname for _, qualname, _ in after}
    assert "unmatched" not in text and "(selects nothing)" not in text
    assert text.count("fx.json: [0]") == 1  # one entry, listed once
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "autonvtx",
            "run",
            "--config",
            "fx.json",
            "--trace",
            "t.json",
            "-c",
            "import inst_shapes.reexport as r; r.plain(1)",
        ],
        cwd=tmp_path,
        env=autonvtx_env(PYTHONPATH=os.pathsep.join([str(REPO), str(MODULES)])),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "warning" not in run.stderr, run.stderr


def test_a_name_no_reading_of_which_matched_is_reported_once(tmp_path: Path) -> None:
    make_file(
        tmp_path / "a.json",
        """
        [{"module": "inst_shapes.kinds", "functions": ["Trainer.step", "Trainer.stpe", "plian", "Trainer.Inner.run"]},
         {"module": "inst_shapes.nosuch", "functions": ["f"]}]
    """,
    )
    done = autonvtx("list", "--config", "a.json", "inst_shapes.kinds", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    unmatched = [line.strip() for line in done.stdout.splitlines() if "unmatched" in line]
    assert unmatched == [
        "unmatched: a.json: [0].functions: 'Trainer.stpe' matched no function defined in"
        " 'inst_shapes.kinds' or its submodules; did you mean 'Trainer.step'?",
        "unmatched: a.json: [0].functions: 'plian' matched no function defined in"
        " 'inst_shapes.kinds' or its submodules; did you mean 'plain'?",
        "unmatched: a.json: [1].module: 'inst_shapes.nosuch' matched no module; did you mean 'inst_shapes.kinds'?",
    ]


def test_export_to_a_file(tmp_path: Path) -> None:
    done = autonvtx(
        "export", "-t", "inst_shapes.kinds", "--include", "plain", "-o", "out.json", "inst_shapes.kinds", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert json.loads((tmp_path / "out.json").read_text())[0]["functions"] == ["plain"]


def test_to_nsys_json_writes_colors_as_nsight_does() -> None:
    text = to_nsys_json([("m", ["f", "C.g"], "d", 0xFF12AB34), ("n", ["h"], None, None)])
    assert json.loads(text) == [
        {"module": "m", "domain": "d", "color": "12AB34", "functions": ["f", "C.g"]},
        {"module": "n", "functions": ["h"]},
    ]
