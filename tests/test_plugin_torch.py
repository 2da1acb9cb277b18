"""The torch preset and plugin, observed through the recorder on real (CPU) PyTorch programs."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO, autonvtx_env, default_verb, make_file, run_autonvtx, run_under_recorder, skip_without

from autonvtx.recorder import native
from autonvtx.recorder.model import ProcessRecording, Range
from autonvtx.recorder.trace import read_chrome_trace

skip_without("torch")
pytestmark = pytest.mark.skipif(
    native.library_path() is None, reason="the native recorder is not built in this checkout"
)

EXAMPLE = REPO / "examples" / "torch_training" / "train.py"


def record(cwd: Path, *args: str) -> tuple[ProcessRecording, str, str]:
    """`autonvtx run --trace ... ARGS` in `cwd`: the one process's recording, stdout, stderr."""
    done = run_autonvtx(*args, cwd=cwd, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.trace_path is not None
    (recording,) = read_chrome_trace(done.trace_path)
    return recording, done.stdout, done.stderr


def parent(r: Range, ranges: list[Range]) -> Range | None:
    """The innermost range of the same thread that encloses `r`."""
    enclosing = [
        o for o in ranges if o is not r and o.tid == r.tid and o.start_ns <= r.start_ns and r.end_ns <= o.end_ns
    ]
    return max(enclosing, key=lambda o: (o.start_ns, -o.end_ns), default=None)


def chain(r: Range, ranges: list[Range]) -> list[str]:
    """The names of `r`'s enclosing ranges, innermost first."""
    names = []
    current = parent(r, ranges)
    while current is not None:
        names.append(current.name)
        current = parent(current, ranges)
    return names


def test_training_example_gets_layer_paths_optimizer_backward_loss_and_batches(
    workdir: Path,
) -> None:
    args = [str(EXAMPLE), "--epochs", "1", "--samples", "32", "--batch-size", "16"]
    rec, out, _ = record(workdir, "--preset", "torch", *args)
    assert out.startswith("epoch 0: loss ")

    ranges = rec.ranges
    assert rec.unmatched_pops == 0 and not any(r.is_open for r in ranges)
    assert {r.domain for r in ranges} == {"torch"}
    counts = Counter(r.name for r in ranges)
    # Two batches of 16: one root call, one loss, one step... per batch.
    for name in (
        "Classifier",
        "embed (Embedding)",
        "encoder (Encoder)",
        "head (Linear)",
        "encoder.layers.0 (EncoderLayer)",
        "encoder.layers.1.attn (MultiheadAttention)",
        "encoder.layers.1.mlp.0 (Linear)",
        "encoder.layers.0.norm2 (LayerNorm)",
        "CrossEntropyLoss",
        "AdamW.step",
        "AdamW.zero_grad",
        "backward",
    ):
        assert counts[name] == 2, (name, counts)
    # Two batches, then the fetch that raises StopIteration.
    assert counts["DataLoader.__next__ (CopyTask)"] == 3

    attn = next(r for r in ranges if r.name == "encoder.layers.1.attn (MultiheadAttention)")
    assert chain(attn, ranges) == ["encoder.layers.1 (EncoderLayer)", "encoder (Encoder)", "Classifier"]
    linear = next(r for r in ranges if r.name == "encoder.layers.1.mlp.0 (Linear)")
    assert chain(linear, ranges)[:2] == ["encoder.layers.1.mlp (Sequential)", "encoder.layers.1 (EncoderLayer)"]
    for name in ("CrossEntropyLoss", "AdamW.step", "backward", "DataLoader.__next__ (CopyTask)"):
        assert all(parent(r, ranges) is None for r in ranges if r.name == name), name

    category = {r.name: r.category for r in ranges}
    assert category["Classifier"] == "module"
    assert category["CrossEntropyLoss"] == "loss"
    assert category["AdamW.step"] == category["AdamW.zero_grad"] == "optimizer"
    assert category["backward"] == "backward"
    assert category["DataLoader.__next__ (CopyTask)"] == "data"


COMPILE_PROGRAM = """
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))

        def forward(self, x):
            x = x + self.attn(x, x, x, need_weights=False)[0]
            return x + self.mlp(x)

    torch.manual_seed(0)
    block, x = Block(), torch.randn(2, 4, 8)
    from autonvtx.engines import RANGE_MARK
    print("patched", getattr(nn.Module._call_impl, RANGE_MARK, False))
    print("breaks", torch._dynamo.explain(block)(x).graph_break_count)
    compiled = torch.compile(block, backend="aot_eager", fullgraph=True)
    print("compiled", torch.allclose(compiled(x), block(x), atol=1e-6))

    # A module hook makes dynamo inline Module._call_impl (ours) instead of forward.
    handle = block.mlp.register_forward_hook(lambda module, args, out: None)
    torch._dynamo.reset()
    print("breaks with hook", torch._dynamo.explain(block)(x).graph_break_count)
    handle.remove()

    optimizer = torch.optim.SGD(block.parameters(), lr=0.1)
    block(x).sum().backward()
    torch._dynamo.reset()
    print("breaks in step", torch._dynamo.explain(lambda: optimizer.step())().graph_break_count)

    class Broken(nn.Module):   # print() breaks the graph: as many graphs as without autonvtx
        def __init__(self):
            super().__init__()
            self.a, self.b = Block(), Block()

        def forward(self, x):
            x = self.a(x)
            print("graph break")
            return self.b(x)

    explained = torch._dynamo.explain(Broken())(x)
    print("graphs, breaks", explained.graph_count, explained.graph_break_count)

    scripted = torch.jit.script(block)
    print("script", torch.allclose(scripted(x), block(x), atol=1e-6))
    traced = torch.jit.trace(block, x)
    print("trace", torch.allclose(traced(x), block(x), atol=1e-6))

    mlp = block.mlp
    print("fx", torch.allclose(torch.fx.symbolic_trace(mlp)(x), mlp(x)))
    exported = torch.export.export(mlp, (x,))
    ops = [str(n.target) for n in exported.graph.nodes if n.op == "call_function"]
    print("export", torch.allclose(exported.module()(x), mlp(x)), ops)
"""


def test_compile_has_no_graph_breaks_and_jit_script_and_trace_work(workdir: Path) -> None:
    make_file(workdir / "prog.py", COMPILE_PROGRAM)
    rec, out, _ = record(workdir, "--preset", "torch", "prog.py")
    assert out.split("\n") == [
        "patched True",
        "breaks 0",
        "compiled True",
        "breaks with hook 0",
        "breaks in step 0",
        "graph break",
        "graphs, breaks 2 1",
        "script True",
        "trace True",
        "fx True",
        "export True ['aten.linear.default', 'aten.relu.default', 'aten.linear.default']",
        "",
    ]
    ranges = rec.ranges
    assert rec.unmatched_pops == 0
    names = Counter(r.name for r in ranges)
    assert names["OptimizedModule(Block)"] >= 1
    assert names["SGD.step"] >= 1
    assert names["attn (MultiheadAttention)"] >= 1  # eager calls are still named
    # Nothing of ours inside a compiled region: no layer range under the compiled module.
    for r in ranges:
        if r.name == "OptimizedModule(Block)":
            inside = [o.name for o in ranges if o.tid == r.tid and r.start_ns < o.start_ns < r.end_ns]
            assert not any(n.startswith(("attn", "mlp")) for n in inside), inside


EDGE_PROGRAM = """
    import threading
    import torch
    from torch import nn

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return torch.relu(nn.ReLU()(x))   # a module made on the fly, every call

    class Model(nn.Module):
        def __init__(self, encoder):
            super().__init__()
            self.encoder = encoder
            self.fail = False

        def forward(self, x):
            x = self.encoder(x)
            if self.fail:
                raise ValueError("boom")
            if hasattr(self, "extra"):
                x = self.extra(x)
            return x

    torch.manual_seed(0)
    x = torch.randn(2, 4)
    encoder = Encoder()
    model = Model(encoder)
    encoder(x)                       # a root of its own first: names relative to it
    model(x)
    model.fail = True
    try:
        model(x)
    except ValueError:
        print("raised")
    model.fail = False
    model.extra = nn.Sequential(nn.Linear(4, 4))   # the tree grows after its first call
    model(x)
    thread = threading.Thread(target=model, args=(x,))
    thread.start(); thread.join()
    print(f"{nn.DataParallel(model)(x).sum().item():.6f}")  # no GPU: it calls the model
"""


def test_names_follow_the_tree_each_root_was_called_as(workdir: Path) -> None:
    make_file(workdir / "prog.py", EDGE_PROGRAM)
    rec, out, _ = record(workdir, "--preset", "torch", "prog.py")
    plain = subprocess.run(
        [sys.executable, "prog.py"],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=300,
    )
    assert out == plain.stdout and out.startswith("raised\n")  # computes what it does alone
    ranges = rec.ranges
    # The exception popped every range it crossed.
    assert rec.unmatched_pops == 0 and not any(r.is_open for r in ranges)
    counts = Counter(r.name for r in ranges)
    assert counts["Encoder"] == 1 and counts["layers.0 (Linear)"] == 1
    assert counts["Model"] == 5  # 4 direct calls (one in a thread), 1 through DataParallel
    assert counts["encoder (Encoder)"] == 5 and counts["encoder.layers.1 (Linear)"] == 5
    assert counts["extra (Sequential)"] == 3 and counts["extra.0 (Linear)"] == 3
    assert counts["ReLU"] == 6  # a fresh module each encoder call: named by class, its own root
    assert counts["DataParallel(Model)"] == 1
    assert {r.tid for r in ranges if r.name == "Model"}.__len__() == 2
    relu = [r for r in ranges if r.name == "ReLU"]
    assert {parent(r, ranges).name for r in relu} == {"Encoder", "encoder (Encoder)"}
    inner = next(r for r in ranges if r.name == "Model" and parent(r, ranges) is not None)
    assert parent(inner, ranges).name == "DataParallel(Model)"
    assert chain(next(r for r in ranges if r.name == "encoder.layers.0 (Linear)"), ranges) == [
        "encoder (Encoder)",
        "Model",
    ]


def test_options_turn_paths_and_kinds_off_and_typos_warn(workdir: Path) -> None:
    make_file(
        workdir / "extra.toml",
        """
        [autonvtx.plugin.torch]
        layer_paths = false
        backward = false
        layer_path = true
        """,
    )
    make_file(
        workdir / "prog.py",
        """
        import torch
        from torch import nn
        model = nn.Sequential(nn.Linear(3, 3), nn.Tanh())
        model(torch.ones(1, 3)).sum().backward()
        """,
    )
    rec, _, err = record(workdir, "--preset", "torch", "--config", "extra.toml", "prog.py")
    assert [r.name for r in rec.ranges] == ["Sequential", "Linear", "Tanh"]
    assert "plugin 'torch': unknown option 'layer_path' ignored" in err


def test_list_shows_what_the_plugin_ranges(workdir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "list", "--preset", "torch", "torch.nn"],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    listed = {words[0]: " ".join(words[1:]) for words in lines if words}
    assert listed["torch.nn.modules.module:Module._call_impl"].startswith("every module call")
    assert listed["torch.nn.modules.linear:Linear.forward"] == "forward"
    assert listed["torch.nn.modules.loss:CrossEntropyLoss.forward"] == "loss forward"
    assert "torch.optim.adamw:AdamW.step" in listed or "torch.optim.adam:Adam.step" in listed
    assert "torch.autograd:backward" in listed
    assert "torch.utils.data.dataloader:_BaseDataLoaderIter.__next__" in listed


def test_all_of_torch_wrapped_wholesale_still_imports_and_trains(workdir: Path) -> None:
    """Every function torch defines, wrapped: torch's own duck typing must see what it sees
    without autonvtx (its context_decorator refuses a callable with __enter__, and is handed
    bound methods of wrapped functions while torch imports)."""
    make_file(
        workdir / "step.py",
        """
        import torch

        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = torch.nn.functional.mse_loss(model(torch.ones(4, 8)), torch.zeros(4, 1))
        loss.backward()
        optimizer.step()


        @torch.no_grad()  # context_decorator(self.clone, evaluate): clone is a wrapped method
        def evaluate(m):
            return m(torch.ones(1, 8))


        print(round(float(evaluate(model).sum()), 4))
    """,
    )
    plain = subprocess.run([sys.executable, "step.py"], cwd=workdir, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr
    rec, out, err = record(workdir, "-t", "torch", "-t", "torch.*", "-v", "step.py")
    assert out == plain.stdout
    wrapped = int(re.search(rf"{default_verb()} (\d+) functions in (\d+) modules", err).group(1))
    assert wrapped > 5000, err
    names = Counter(r.name for r in rec.ranges)
    assert names["SGD.step"] == 1 and names["mse_loss"] == 1, names.most_common(20)
    assert names["_DecoratorContextManager.clone"] >= 1, names.most_common(20)


RESTORE_PROGRAM = """
    import torch
    import torch.utils.data.dataloader as dataloader
    from torch import nn
    from autonvtx.config import Config
    from autonvtx.control import Instrumentation
    from autonvtx.engines import RANGE_MARK

    Optimizer = torch.optim.Optimizer
    owners = [nn.Module, torch.autograd, dataloader._BaseDataLoaderIter, Optimizer,
              *Optimizer.__subclasses__()]

    def snapshot():
        return {(getattr(o, "__name__", o), k): v for o in owners for k, v in vars(o).items()}

    def marked():
        return sorted(f"{o}.{k}" for (o, k), v in snapshot().items()
                      if getattr(getattr(v, "__func__", v), RANGE_MARK, False))

    def train(optimizer_class):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(3, 3), nn.Tanh())
        optimizer = optimizer_class(model.parameters(), lr=0.1)
        data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(2, 3)))
        for (x,) in data:
            model(x).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
        return round(float(model(torch.ones(1, 3)).sum()), 6)

    print(train(torch.optim.SGD))     # SGD's step is torch's hooked one from here on
    before = snapshot()
    instrumentation = Instrumentation(Config(plugins=("torch",)), restorable=True)
    instrumentation.install()
    print(train(torch.optim.SGD), train(torch.optim.Adam))   # Adam's step is wrapped lazily
    print("marked", marked())
    instrumentation.uninstall()
    print("marked", marked())
    after = snapshot()
    print("changed", sorted(f"{o}.{k}" for (o, k), v in after.items() if before.get((o, k), v) is not v))
    print(train(torch.optim.SGD), train(torch.optim.Adam))
"""


def test_uninstall_of_a_restorable_instrumentation_puts_back_what_the_plugin_replaced(
    tmp_path: Path,
) -> None:
    recordings, out = run_under_recorder(tmp_path, RESTORE_PROGRAM)
    lines = out.splitlines()
    assert lines[1] == lines[5] and lines[1].split()[0] == lines[0]  # computes the same
    installed = lines[2]
    for name in (
        "Module._call_impl",
        "Optimizer._patch_step_function",
        "Optimizer.zero_grad",
        "SGD.step",
        "Adam.step",
        "torch.autograd.backward",
        "torch.autograd.grad",
        "_BaseDataLoaderIter.__next__",
    ):
        assert name in installed, (name, installed)
    assert lines[3] == "marked []"
    # Adam's step was replaced by torch itself (its step hook) when Adam was first used, and
    # then wrapped: torch's is back. Everything else is as before install().
    assert lines[4] == "changed ['Adam.step']"
    (recording,) = recordings
    counts = Counter(r.name for r in recording.ranges)
    # Only the two training runs made while installed have ranges.
    assert counts["SGD.step"] == counts["Adam.step"] == counts["SGD.zero_grad"] == 2
    assert counts["backward"] == 4
    assert counts["Sequential"] == counts["DataLoader.__next__ (TensorDataset)"] == 6


BREAK_PROGRAM = """
    import torch
    from torch import nn
    from torch._dynamo.utils import counters

    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, x):
            x = self.a(x)
            torch._dynamo.graph_break()   # the model's one explicit break
            return self.b(x)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner, self.head = Inner(), nn.Linear(8, 2)

        def forward(self, x):
            return self.head(self.inner(x).relu())

    torch.manual_seed(0)
    model, x = Model(), torch.randn(4, 8)
    out = torch.compile(model, backend="eager")(x)
    print("frames", counters["frames"]["total"], "graphs", counters["stats"]["unique_graphs"])
    print("breaks", sum(counters["graph_break"].values()))
    print("result", out.sum().item().hex())
"""


@pytest.mark.parametrize("config", ["", "[autonvtx.plugin.torch]\nbackward_modules = true\nshapes = true\n"])
def test_preset_adds_no_frame_and_no_graph_break_to_a_model_with_one(workdir: Path, config: str) -> None:
    # Dynamo runs the frames above a graph break eagerly and would compile autonvtx's module
    # call wrapper as a frame of its own: one more frame evaluated, one more break logged.
    make_file(workdir / "prog.py", BREAK_PROGRAM)
    make_file(workdir / "autonvtx.toml", '[autonvtx]\npresets = ["torch"]\n' + config)
    plain = subprocess.run([sys.executable, "prog.py"], cwd=workdir, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr
    assert "breaks 0" not in plain.stdout
    _, out, _ = record(workdir, "prog.py")
    assert out == plain.stdout
