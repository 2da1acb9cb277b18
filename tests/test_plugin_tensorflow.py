"""The tensorflow preset (tensorflow and keras plugins) on TensorFlow's CPU build, observed
through the recorder: ranges around execution, none around graph building."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from conftest import autonvtx_env, make_file, run_autonvtx, skip_without

from autonvtx.recorder import native
from autonvtx.recorder.model import Range
from autonvtx.recorder.trace import read_chrome_trace

skip_without("tensorflow")
skip_without("keras")
pytestmark = pytest.mark.skipif(
    native.library_path() is None, reason="the native recorder is not built in this checkout"
)

PROGRAM = """
    import numpy as np
    import tensorflow as tf
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((4,)),                      # symbolic build: no ranges
        keras.layers.Dense(8, activation="relu", name="hidden"),
        keras.layers.Dense(2, name="out"),
    ])
    optimizer = keras.optimizers.Adam(0.01)
    x = np.random.rand(16, 4).astype("float32")
    y = np.random.rand(16, 2).astype("float32")
    for bx, by in tf.data.Dataset.from_tensor_slices((x, y)).batch(8):   # an eager loop
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(bx) - by) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    @tf.function
    def inner(v):
        return model(v)                         # traced: graph building, no range

    @tf.function
    def outer(v):
        return inner(v) * 2                     # a tf.function inside one: part of its graph

    for _ in range(3):
        outer(x)

    inputs = keras.Input((4,))
    functional = keras.Model(inputs, keras.layers.Dense(2, name="head")(inputs))
    functional(x)                               # eager: one range for head

    model.compile(optimizer="adam", loss="mse")
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    print("done")
"""


def encloses(outer: Range, r: Range) -> bool:
    return outer is not r and outer.tid == r.tid and outer.start_ns <= r.start_ns and r.end_ns <= outer.end_ns


def test_ranges_cover_execution_not_graph_building(workdir: Path) -> None:
    make_file(workdir / "prog.py", PROGRAM)
    done = run_autonvtx(
        "--preset",
        "tensorflow",
        "prog.py",
        cwd=workdir,
        timeout=300,
        env=autonvtx_env(TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done\n"
    assert done.trace_path is not None
    (rec,) = read_chrome_trace(done.trace_path)
    assert rec.unmatched_pops == 0
    ranges = [r for r in rec.ranges if r.domain == "tensorflow"]
    counts = Counter(r.name for r in ranges)

    # The eager loop: two batches, each layer executed once per batch.
    assert counts["sequential (Sequential)"] == 2
    assert counts["sequential/hidden (Dense)"] == 2 and counts["sequential/out (Dense)"] == 2
    assert counts["GradientTape.gradient"] == 2 and counts["Adam.apply"] == 2
    assert counts["tf.data next"] == 3  # two batches, then the end
    hidden = [r for r in ranges if r.name == "sequential/hidden (Dense)"]
    assert all(any(encloses(o, r) and o.name == "sequential (Sequential)" for o in ranges) for r in hidden)

    # tf.functions: the outer one per call; inner and its layers were only traced.
    assert counts["tf.function(outer)"] == 3 and counts["tf.function(inner)"] == 0
    for f in (r for r in ranges if r.name.startswith("tf.function(")):
        assert not any(encloses(f, r) and r.category == "layer" for r in ranges), f.name

    # The functional model's layer: built symbolically (no range), called eagerly once.
    assert sum(n.endswith("head (Dense)") for n in counts.elements()) == 1

    # fit: one range, its steps are tf.function executions, its layers run in their graphs.
    (fit,) = [r for r in ranges if r.name == "Sequential.fit"]
    inside = [r for r in ranges if encloses(fit, r)]
    assert any(r.name.startswith("tf.function(") for r in inside)
    assert not any(r.category == "layer" for r in inside)
    assert {r.category for r in ranges if r.name.startswith("tf.function(")} == {"function"}


def test_keras_on_the_jax_backend_ranges_eager_layers_and_jitted_steps(workdir: Path) -> None:
    pytest.importorskip("jax")
    make_file(workdir / "plugins.toml", '[autonvtx]\nplugins = ["jax", "keras"]\n')
    make_file(
        workdir / "prog.py",
        """
        import numpy as np
        import keras

        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, name="out")])
        x, y = np.ones((16, 4), "float32"), np.ones((16, 2), "float32")
        model(x)
        model.compile(optimizer="sgd", loss="mse")
        model.fit(x, y, batch_size=8, epochs=1, verbose=0)
        print(keras.backend.backend())
        """,
    )
    done = run_autonvtx(
        "--config",
        "plugins.toml",
        "prog.py",
        cwd=workdir,
        timeout=300,
        env=autonvtx_env(KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "jax\n"
    assert done.trace_path is not None
    (rec,) = read_chrome_trace(done.trace_path)
    counts = Counter(r.name for r in rec.ranges)
    # Eager: one range; inside fit the layer runs in jitted steps (traced once, no range).
    assert counts["sequential/out (Dense)"] == 1
    (fit,) = [r for r in rec.ranges if r.name == "Sequential.fit"]
    steps = [r for r in rec.ranges if encloses(fit, r)]
    assert steps and all(r.name.startswith("jit(") for r in steps)
