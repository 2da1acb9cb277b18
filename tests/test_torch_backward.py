"""Backward ranges per module call (`backward_modules`), observed through the recorder on CPU
PyTorch: names, counts, placement inside `backward`, and the program's numbers unchanged."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import autonvtx_env, make_file, run_autonvtx, skip_without

from autonvtx.recorder import native
from autonvtx.recorder.model import Range
from autonvtx.recorder.trace import read_chrome_trace

skip_without("torch")
pytestmark = pytest.mark.skipif(
    native.library_path() is None, reason="the native recorder is not built in this checkout"
)

CONFIG = """
    [autonvtx]
    presets = ["torch"]
    [autonvtx.plugin.torch]
    backward_modules = true
    shapes = true
"""

# One program, many cases: each case is a range of its own (domain "case") so the test can tell
# which backward ranges each produced; every loss and gradient is printed bit for bit.
PROGRAM = """
    import nvtx
    import torch
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(8)
            self.mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))

        def forward(self, x):
            return x + self.mlp(self.norm(x))

    class Model(nn.Module):
        def __init__(self, mode=None):
            super().__init__()
            self.embed = nn.Embedding(10, 8)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.head = nn.Linear(8, 3)
            self.mode = mode

        def forward(self, ids):
            x = self.embed(ids)
            for block in self.blocks:
                if self.mode == "inplace":
                    x = block(x)
                    x.mul_(0.5)               # in place on a module's output
                elif self.mode is None:
                    x = block(x)
                else:
                    x = checkpoint(block, x, use_reentrant=self.mode == "reentrant")
            return self.head(x).mean(1)

    class Shared(nn.Module):                  # one Linear called twice per step
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x):
            return self.lin(torch.tanh(self.lin(x)))

    def show(label, loss, model):
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        total = sum(float(g.double().sum()) for g in grads)
        print(label, float(loss).hex(), total.hex(), len(grads))

    torch.manual_seed(0)
    ids, target = torch.randint(0, 10, (4, 5)), torch.randint(0, 3, (4,))
    loss_fn = nn.CrossEntropyLoss()

    for case in ("steps", "inplace", "nonreentrant", "reentrant"):
        torch.manual_seed(1)
        model = Model(None if case == "steps" else case)
        with nvtx.annotate(case, domain="case"):
            for step in range(2):
                model.zero_grad()
                loss = loss_fn(model(ids), target)
                loss.backward()
                show(f"{case}{step}", loss, model)

    torch.manual_seed(1)
    model = Model()
    with nvtx.annotate("retain", domain="case"):
        loss = loss_fn(model(ids), target)
        loss.backward(retain_graph=True)
        loss.backward()
        show("retain", loss, model)

    with nvtx.annotate("grad", domain="case"):
        loss = loss_fn(model(ids), target)
        (g,) = torch.autograd.grad(loss, [model.blocks[0].mlp[0].weight])
        print("grad", float(g.double().sum()).hex())

    with nvtx.annotate("double", domain="case"):
        shared = Shared()
        x = torch.randn(4, 8, requires_grad=True)
        y = shared(x).pow(2).sum()
        (gx,) = torch.autograd.grad(y, x, create_graph=True)
        gx.pow(2).sum().backward()
        show("double", y, shared)

    with nvtx.annotate("compiled", domain="case"):
        torch.manual_seed(1)
        model = Model()
        compiled = torch.compile(model, backend="eager", fullgraph=True)
        loss = loss_fn(compiled(ids), target)
        loss.backward()
        show("compiled", loss, model)
"""


def _cases(ranges: list[Range]) -> dict[str, list[Range]]:
    """The backward ranges (category "backward", start/end) inside each case's range."""
    found: dict[str, list[Range]] = {}
    for case in (r for r in ranges if r.domain == "case"):
        found[case.name] = [
            r
            for r in ranges
            if r.name.endswith(" [backward]") and case.start_ns <= r.start_ns and r.end_ns <= case.end_ns
        ]
    return found


Run = tuple[list[Range], str, str, Path]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    workdir = tmp_path_factory.mktemp("backward")
    make_file(workdir / "prog.py", PROGRAM)
    make_file(workdir / "autonvtx.toml", CONFIG)
    plain = subprocess.run(
        [sys.executable, "prog.py"], cwd=workdir, capture_output=True, text=True, timeout=600, env=autonvtx_env()
    )
    assert plain.returncode == 0, plain.stderr
    done = run_autonvtx("prog.py", cwd=workdir, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.trace_path is not None
    (recording,) = read_chrome_trace(done.trace_path)
    assert recording.unmatched_pops == 0 and not any(r.is_open for r in recording.ranges)
    return recording.ranges, done.stdout, plain.stdout, done.trace_path


def test_losses_and_gradients_are_bit_identical_to_plain_python(run: Run) -> None:
    _, out, plain, _ = run
    assert out == plain
    assert "inplace1" in out and "reentrant1" in out and "compiled" in out


def test_each_module_call_gets_one_backward_range_inside_backward(run: Run) -> None:
    ranges = run[0]
    steps = _cases(ranges)["steps"]
    counts = Counter(r.name for r in steps)
    # Two steps: one backward range per module call.
    for name in (
        "Model",
        "embed (Embedding)",
        "blocks.0 (Block)",
        "blocks.1 (Block)",
        "blocks.0.norm (LayerNorm)",
        "blocks.1.mlp (Sequential)",
        "blocks.1.mlp.0 (Linear)",
        "blocks.1.mlp.1 (ReLU)",
        "blocks.0.mlp.2 (Linear)",
        "head (Linear)",
        "CrossEntropyLoss",
    ):
        assert counts[f"{name} [backward]"] == 2, (name, counts)
    assert all(r.kind == "startend" and r.category == "backward" for r in steps)
    backward = [r for r in ranges if r.name == "backward"]
    for r in steps:
        assert any(b.start_ns <= r.start_ns and r.end_ns <= b.end_ns for b in backward), r.name

    # Nested as the forward was: each block's backward holds its MLP's, the model's holds all;
    # the loss's backward comes first, the first layer's last.
    def first(name: str) -> Range:
        return next(r for r in steps if r.name == f"{name} [backward]")

    def inside(inner: str, outer: str) -> bool:
        a, b = first(inner), first(outer)
        return b.start_ns <= a.start_ns and a.end_ns <= b.end_ns

    assert inside("blocks.1.mlp.2 (Linear)", "blocks.1.mlp (Sequential)")
    assert inside("blocks.1.mlp (Sequential)", "blocks.1 (Block)")
    assert inside("blocks.0 (Block)", "Model")
    assert first("CrossEntropyLoss").end_ns <= first("Model").start_ns
    assert first("blocks.1 (Block)").end_ns <= first("blocks.0 (Block)").start_ns
    assert first("blocks.0 (Block)").end_ns <= first("embed (Embedding)").start_ns


def test_in_place_outputs_and_checkpointing_keep_their_backward_ranges(run: Run) -> None:
    ranges = run[0]
    cases = _cases(ranges)
    for case in ("inplace", "nonreentrant"):
        counts = Counter(r.name for r in cases[case])
        assert counts["blocks.1 (Block) [backward]"] == 2, (case, counts)
        assert counts["head (Linear) [backward]"] == 2, (case, counts)
        assert counts["blocks.1.mlp.0 (Linear) [backward]"] == 2, (case, counts)
    # Reentrant checkpointing runs the blocks' forward without a graph, then again inside
    # backward, called by `checkpoint` rather than by the model: named as roots there, one
    # backward range per block and step, from the recomputed graph.
    counts = Counter(r.name for r in cases["reentrant"])
    assert counts["head (Linear) [backward]"] == 2, counts
    assert counts["Block [backward]"] == 4 and counts["mlp.0 (Linear) [backward]"] == 4, counts
    assert counts["blocks.1 (Block) [backward]"] == 0, counts


def test_retained_graph_autograd_grad_and_double_backward(run: Run) -> None:
    ranges = run[0]
    cases = _cases(ranges)
    retain = Counter(r.name for r in cases["retain"])
    assert retain["Model [backward]"] == 2 and retain["blocks.0.mlp.0 (Linear) [backward]"] == 2, retain
    # autograd.grad for a weight of blocks.0: blocks.1 and the head run backward, and blocks.0's
    # MLP up to that weight; nothing before it.
    grad = Counter(r.name for r in cases["grad"])
    assert grad["blocks.1 (Block) [backward]"] == 1 and grad["head (Linear) [backward]"] == 1, grad
    assert grad["blocks.0.mlp.0 (Linear) [backward]"] == 1, grad
    assert grad["embed (Embedding) [backward]"] == 0 and grad["blocks.0.norm (LayerNorm) [backward]"] == 0, grad
    # The shared Linear: two calls, a backward range each, in each of the two passes.
    double = Counter(r.name for r in cases["double"])
    assert double["lin (Linear) [backward]"] == 4, double


def test_compiled_model_is_one_backward_range(run: Run) -> None:
    ranges = run[0]
    counts = Counter(r.name for r in _cases(ranges)["compiled"])
    assert counts == {"OptimizedModule(Model) [backward]": 1, "CrossEntropyLoss [backward]": 1}, counts


def test_forward_ranges_carry_their_arguments_shapes(run: Run) -> None:
    ranges = run[0]
    steps = Counter(r.name for r in ranges if r.domain == "torch" and r.kind == "push")
    assert steps["Model [4x5 int64]"] == 2 * 4 + 1 + 1  # the steps of four cases, retain, grad
    assert steps["embed (Embedding) [4x5 int64]"] >= 2
    assert steps["blocks.0.mlp.0 (Linear) [4x5x8 float32]"] >= 2
    assert steps["CrossEntropyLoss [4x3 float32, 4 int64]"] >= 2
    # The backward range is named after the module, not after each shape.
    assert not any(" [backward]" in name and "float32" in name for name in steps)


def test_summary_pairs_each_modules_forward_and_backward(run: Run) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "summary", "--pair", "backward", str(run[3])],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["Forward", "Count", "Backward", "Count", "Bwd/Fwd", "Module"]
    rows = {line.split("  ")[-1].strip(): line.split() for line in lines[2:]}
    # Forward rows with their shapes grouped ([{shapes}]) pair with the module's backward row.
    linear = rows["torch:blocks.{n}.mlp.{n} (Linear)"]
    assert linear[0] != "-" and linear[3] != "-", linear
    assert "torch:CrossEntropyLoss" in rows and "torch:Model" in rows
    assert not any("[backward]" in name or "[{shapes}]" in name for name in rows)
