"""Presets: shipped and third-party, selected by --preset or a file's `presets` key, and
what the shipped data-workflow presets put ranges on in real programs."""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, autonvtx_env, default_verb, make_file, run_autonvtx

from autonvtx.config import Config
from autonvtx.configfile import describe_preset, load_config
from autonvtx.errors import ConfigError
from autonvtx.presets import all_presets, resolve_presets, shipped_presets

SHIPPED = sorted(shipped_presets())


def ranged(done: object) -> list[str]:
    """`domain:name` of every range in a finished run's trace, in file order."""
    return [f"{e['args']['domain']}:{e['name']}" for e in done.ranges()]  # type: ignore[attr-defined]


def autonvtx(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m autonvtx ARGS...` in `cwd`."""
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", *args],
        cwd=cwd,
        env=env if env is not None else autonvtx_env(PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_shipped_presets_are_the_files_in_configs() -> None:
    names = {p.stem for p in (REPO / "configs").glob("*.toml")}
    assert set(SHIPPED) == names
    assert {"numpy", "pandas", "cupy", "cudf"} <= names
    # Installed as autonvtx/configs: in the checkout, the same directory.
    assert (REPO / "autonvtx" / "configs").resolve() == (REPO / "configs").resolve()
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"configs/*.toml"' in pyproject


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_preset_loads_and_describes_itself(name: str) -> None:
    (path,) = resolve_presets([name])
    config = load_config([], extra_sources=[path])
    assert config.rules or config.plugins
    assert config.preset_sources == (path,)
    description = describe_preset(shipped_presets()[name])
    assert description and not description.startswith("("), description


def test_presets_command_lists_one_line_each(tmp_path: Path) -> None:
    done = autonvtx("presets", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == sorted(all_presets())
    pandas = next(line for line in lines if line.startswith("pandas "))
    assert "group-by" in pandas


def test_unknown_preset_is_an_error_with_a_suggestion(tmp_path: Path) -> None:
    make_file(tmp_path / "s.py", "print('ran')\n")
    done = run_autonvtx("--preset", "pandsa", "s.py", cwd=tmp_path, trace=False)
    assert done.returncode == 2
    assert done.stdout == ""
    assert re.match(
        r"autonvtx: --preset: unknown preset 'pandsa'; expected one of .*'pandas'.*"
        r"; did you mean 'pandas'\? \(see 'autonvtx presets'\)$",
        done.stderr.strip(),
    ), done.stderr


def test_presets_come_before_config_files(tmp_path: Path) -> None:
    make_file(
        tmp_path / "mine.toml",
        """
        [autonvtx]
        domain = "mine"
        [[rules]]
        modules = ["pandas"]
        exclude = ["read_csv"]
    """,
    )
    (pandas,) = resolve_presets(["pandas"])
    config = load_config(["mine.toml"], cwd=str(tmp_path), extra_sources=[pandas])
    assert config.sources == (pandas, "mine.toml")
    assert config.settings.domain == "mine"
    assert config.rules[-1].origin == "mine.toml: rules[0]"
    assert config.is_preset_rule(config.rules[0]) and not config.is_preset_rule(config.rules[-1])


def test_a_file_may_name_presets(tmp_path: Path) -> None:
    make_file(
        tmp_path / "autonvtx.toml",
        """
        [autonvtx]
        presets = ["numpy", "pandas"]
        [[rules]]
        modules = ["__main__"]
    """,
    )
    config = load_config([], cwd=str(tmp_path))  # discovered
    numpy, pandas = resolve_presets(["numpy", "pandas"])
    assert config.sources == (numpy, pandas, "autonvtx.toml")
    assert config.preset_sources == (numpy, pandas)
    # Named twice (on the command line and in the file): loaded once, where first named.
    config = load_config(["autonvtx.toml"], cwd=str(tmp_path), extra_sources=[pandas])
    assert config.sources == (pandas, numpy, "autonvtx.toml")


@pytest.mark.parametrize(
    "text, message",
    [
        ('presets = "numpy"', r"^c\.toml: autonvtx\.presets: expected a list of preset names, got string 'numpy'$"),
        ('presets = ["nunpy"]', r"^c\.toml: autonvtx\.presets\[0\]: unknown preset 'nunpy'; .*did you mean 'numpy'\?"),
    ],
)
def test_bad_presets_key(tmp_path: Path, text: str, message: str) -> None:
    make_file(tmp_path / "c.toml", f"[autonvtx]\n{text}\n")
    with pytest.raises(ConfigError, match=message):
        load_config(["c.toml"], cwd=str(tmp_path))


def test_preset_patterns_that_match_nothing_are_not_warned_about_in_a_run(tmp_path: Path) -> None:
    make_file(tmp_path / "s.py", "import numpy\nprint(int(numpy.sum(numpy.arange(4))))\n")
    done = run_autonvtx("--preset", "numpy", "s.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "6\n"
    assert "warning" not in done.stderr  # numpy.fft, numpy.linalg were never imported
    assert "numpy:sum" in ranged(done)


# Third-party presets through the entry-point group.
def fake_distribution(site: Path) -> None:
    make_file(site / "fakelib" / "__init__.py", "")
    make_file(
        site / "fakelib" / "profiling.py",
        """
        import os
        PRESET = os.path.join(os.path.dirname(__file__), "fakelib.toml")
        def broken():
            raise RuntimeError("no preset today")
    """,
    )
    make_file(
        site / "fakelib" / "fakelib.toml",
        """
        [autonvtx]
        description = "fakelib's own rules"
        [[rules]]
        modules = ["fakelib.*"]
    """,
    )
    make_file(site / "fakelib-1.0.dist-info" / "METADATA", "Metadata-Version: 2.1\nName: fakelib\nVersion: 1.0\n")
    make_file(
        site / "fakelib-1.0.dist-info" / "entry_points.txt",
        """
        [autonvtx.presets]
        fakelib = fakelib.profiling:PRESET
        fakebroken = fakelib.profiling:broken
        pandas = fakelib.profiling:PRESET
    """,
    )


def test_third_party_presets_are_listed_and_used(tmp_path: Path) -> None:
    site = tmp_path / "site"
    fake_distribution(site)
    env = autonvtx_env(PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    done = autonvtx("presets", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^fakelib +fakelib's own rules \[fakelib\]$", done.stdout, re.M), done.stdout
    assert re.search(r"^fakebroken .*\(unreadable: preset 'fakebroken' .*no preset today", done.stdout, re.M)
    # A shipped preset wins over a third-party one of the same name.
    assert re.search(r"^pandas +pandas: ", done.stdout, re.M)
    done = autonvtx("list", "--preset", "fakelib", "fakelib.profiling", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "fakelib.profiling:broken" in done.stdout
    done = autonvtx("list", "--preset", "fakebroken", "fakelib", cwd=tmp_path, env=env)
    assert done.returncode == 2
    assert "cannot load (RuntimeError: no preset today)" in done.stderr


# What the shipped presets select.
def rules_of(name: str) -> Config:
    return load_config([], extra_sources=resolve_presets([name]))


@pytest.mark.parametrize("name", ["numpy", "pandas", "cupy", "cudf"])
def test_data_presets_select_public_names_only(name: str) -> None:
    """No catch-all over a whole framework: every include names public functions (or a
    documented family), every module glob stays inside the framework."""
    config = rules_of(name)
    for rule in config.rules:
        assert all(m == name or m.startswith(name + ".") for m in rule.modules), rule
        for glob in rule.include:
            if glob == "*":
                assert "*" not in "".join(rule.modules), f"{rule.origin}: '*' over a package glob"
                continue
            last = glob.rsplit(".", 1)[-1]
            assert not last.startswith("_"), glob
            if "*" in last:  # a family ("nan*", "read_*"): named by a real prefix
                assert len(last.replace("*", "")) >= 3, f"{rule.origin}: {glob!r} is too broad"
        if "*" not in rule.include:
            assert not any(fnmatch.fnmatch("_private", g) for g in rule.include), rule


def test_numpy_preset_on_a_numpy_workflow(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    make_file(
        tmp_path / "job.py",
        """
        import numpy as np
        a = np.arange(12.0).reshape(3, 4)
        b = np.dot(a, a.T)
        x = np.linalg.solve(b + np.eye(3), np.ones(3))
        s = np.sort(np.concatenate([a.ravel(), a.ravel()]))
        print(round(float(np.sum(s) + np.mean(x) + np.abs(np.fft.fft(s)).max()), 3))
    """,
    )
    done = run_autonvtx("--preset", "numpy", "-v", "job.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    names = set(ranged(done))
    assert {
        "numpy:dot",
        "numpy:solve",
        "numpy:sort",
        "numpy:concatenate",
        "numpy:sum",
        "numpy:mean",
        "numpy:fft",
    } <= names, names
    # Creation, ufuncs and ndarray methods carry no range: np.arange, np.eye, np.abs, a.ravel().
    assert not names & {"numpy:arange", "numpy:eye", "numpy:abs", "numpy:ravel"}
    wrapped = int(re.search(rf"autonvtx: {default_verb()} (\d+) functions", done.stderr).group(1))
    assert 60 <= wrapped <= 400, wrapped


def test_pandas_preset_on_seed_000s_groupby_workflow(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    workflow = REPO / "examples" / "dataframe" / "workflow.py"
    done = run_autonvtx("--preset", "pandas", "-v", str(workflow), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    names = ranged(done)
    # groupby(...).agg([...]) once, against count/mean/sum separately.
    assert names.count("pandas:DataFrame.groupby") == 4
    assert "pandas:DataFrameGroupBy.aggregate" in names
    assert {"pandas:GroupBy.count", "pandas:GroupBy.mean", "pandas:GroupBy.sum"} <= set(names)
    assert {"pandas:DataFrame.merge", "pandas:DataFrame.reset_index"} <= set(names)
    # Not the internals: no block manager, no private helper, no constructor.
    assert not [n for n in names if "._" in n or "Block" in n or n.endswith("__init__")]
    wrapped = int(re.search(rf"autonvtx: {default_verb()} (\d+) functions", done.stderr).group(1))
    assert 100 <= wrapped <= 500, wrapped
