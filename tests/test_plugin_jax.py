"""The jax preset and plugin on JAX's CPU backend, observed through the recorder."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import autonvtx_env, make_file, run_autonvtx, skip_without

from autonvtx.recorder import native
from autonvtx.recorder.trace import read_chrome_trace

skip_without("jax")
pytestmark = pytest.mark.skipif(
    native.library_path() is None, reason="the native recorder is not built in this checkout"
)

PROGRAM = """
    import inspect
    from functools import partial
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(w, x):
        return w - 0.1 * jnp.tanh(x @ w)

    @partial(jax.jit, static_argnums=1)
    def repeat(w, n):
        for _ in range(n):
            w = step(w, w)          # traced inside repeat: inlined, no range
        return w

    @jax.jit(static_argnames="scale")
    def scaled(w, scale):
        return w * scale

    w, x = jnp.ones((4, 4)), jnp.full((4, 4), 0.5)
    for _ in range(3):
        w = step(w, x)
    w.block_until_ready()
    w = jax.block_until_ready(repeat(w, 2))
    grad = jax.grad(lambda w: step(w, x).sum())(w)      # traced: no range
    batch = jax.vmap(step, in_axes=(0, None))(jnp.stack([w, w]), x)
    print(jax.device_get(scaled(w, scale=2.0)).round(4).tolist())
    print(grad.shape, batch.shape, step._cache_size(), str(inspect.signature(step)))
    print(type(step.lower(w, x).compile()).__name__)
"""


def test_jitted_calls_are_ranged_at_dispatch_only(workdir: Path) -> None:
    make_file(workdir / "prog.py", PROGRAM)
    done = run_autonvtx("--preset", "jax", "prog.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    plain = subprocess.run(
        [sys.executable, "prog.py"],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=120,
    )
    assert done.stdout == plain.stdout  # the same results, signature, cache and AOT API
    assert done.trace_path is not None
    (rec,) = read_chrome_trace(done.trace_path)
    ranges = [r for r in rec.ranges if r.domain == "jax"]
    assert rec.unmatched_pops == 0
    counts = Counter(r.name for r in ranges)
    assert counts == {
        "jit(step)": 3,
        "jit(repeat)": 1,
        "jit(scaled)": 1,
        "Array.block_until_ready": 2,  # once directly, once inside jax.block_until_ready
        "jax.block_until_ready": 1,
        "jax.device_get": 1,
    }
    assert {r.category for r in ranges if r.name.startswith("jit(")} == {"jit"}
    assert {r.category for r in ranges if not r.name.startswith("jit(")} == {"sync"}
    # No jit range nests: the inner step calls were traced into repeat, not dispatched.
    for r in ranges:
        assert r.name.endswith("block_until_ready") or not any(
            o is not r and o.tid == r.tid and o.start_ns <= r.start_ns and r.end_ns <= o.end_ns for o in ranges
        ), r.name


def test_list_shows_what_the_plugin_ranges(workdir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "list", "--preset", "jax", "jax"],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "jax:jit " in done.stdout and "'jit(name)'" in done.stdout
    assert "jax._src.array:ArrayImpl.block_until_ready" in done.stdout


def test_verbose_says_what_a_module_level_jitted_function_is_with_and_without_the_preset(workdir: Path) -> None:
    # -vv said nothing of them without the preset, and "already wrapped" with it.
    make_file(
        workdir / "jmod.py",
        """
        import jax

        @jax.jit
        def step(x):
            return x * 2

        def plain(x):
            return step(x) + 1
    """,
    )
    make_file(
        workdir / "main.py", "import jmod\nimport jax.numpy as jnp\nprint(float(jmod.plain(jnp.ones(3)).sum()))\n"
    )
    bare = run_autonvtx("-vv", "-t", "jmod", "main.py", cwd=workdir)
    assert bare.returncode == 0, bare.stderr
    assert (
        "autonvtx: jmod:step: skipped (compiled: jaxlib's PjitFunction made from step, not a function; its calls"
        " run compiled code, not step's: --preset jax ranges each of its calls)"
    ) in bare.stderr.splitlines()
    preset = run_autonvtx("-vv", "-t", "jmod", "--preset", "jax", "main.py", cwd=workdir)
    assert preset.returncode == 0, preset.stderr
    assert (
        "autonvtx: jmod:step: skipped (already ranged: a plugin's range around jaxlib's PjitFunction (each call))"
        in preset.stderr.splitlines()
    )
    assert Counter(preset.range_names())["jit(step)"] == 1
