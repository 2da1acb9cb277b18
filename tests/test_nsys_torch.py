"""The torch preset under the real Nsight Systems, on CPU: the layer paths, losses, optimizer and
backward ranges the recorder sees reach the capture, in the torch domain with their categories."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from conftest import REPO, skip_without
from nsys_support import Export, nsys_or_skip, run_profile

skip_without("torch")

EXAMPLE = REPO / "examples" / "torch_training" / "train.py"


def test_the_torch_preset_gives_nsys_its_layer_paths_and_categories(tmp_path: Path) -> None:
    nsys_or_skip()
    profiled = run_profile(
        "-o",
        "torch",
        "--preset",
        "torch",
        str(EXAMPLE),
        "--epochs",
        "1",
        "--samples",
        "32",
        "--batch-size",
        "16",
        cwd=tmp_path,
    )
    assert profiled.returncode == 0, profiled.stderr
    assert "epoch 0: loss " in profiled.stdout

    export = Export(tmp_path / "torch.sqlite")
    ranges = [r for r in export.ranges() if r.domain == "torch"]
    counts = Counter(r.name for r in ranges)
    for name in (
        "Classifier",
        "encoder.layers.1.attn (MultiheadAttention)",
        "head (Linear)",
        "CrossEntropyLoss",
        "AdamW.step",
        "backward",
    ):
        assert counts[name] == 2, (name, counts)  # two batches of 16
    assert all(r.registered for r in ranges)
    names = export.categories()
    category = {r.name: names.get((r.pid, domain_id(export, r.pid, "torch"), r.category)) for r in ranges}
    assert category["Classifier"] == "module"
    assert category["CrossEntropyLoss"] == "loss"
    assert category["AdamW.step"] == "optimizer"
    assert category["backward"] == "backward"


def domain_id(export: Export, pid: int, name: str) -> int:
    (found,) = {domain for (p, domain), text in export.domains().items() if p == pid and text == name}
    return found


def test_backward_ranges_per_module_reach_nsys_inside_backward(tmp_path: Path) -> None:
    nsys_or_skip()
    (tmp_path / "autonvtx.toml").write_text(
        '[autonvtx]\npresets = ["torch"]\n[autonvtx.plugin.torch]\nbackward_modules = true\n'
    )
    args = [str(EXAMPLE), "--epochs", "1", "--samples", "32", "--batch-size", "16"]
    profiled = run_profile("-o", "back", "--config", "autonvtx.toml", *args, cwd=tmp_path)
    assert profiled.returncode == 0, profiled.stderr

    export = Export(tmp_path / "back.sqlite")
    assert all(r.registered for r in export.ranges() if r.domain == "torch")
    strings = export.strings()
    # (name, kind, start, end): 59 is a push/pop range, 60 a start/end range in nsys's table.
    rows = [
        (text if text is not None else strings.get(text_id, ""), kind, start, end)
        for kind, text, text_id, start, end in export.connection.execute(
            "SELECT eventType, text, textId, start, end FROM NVTX_EVENTS WHERE eventType IN (59, 60)"
        )
    ]
    counts = Counter(name for name, kind, _, _ in rows if kind == 60)
    for name in ("Classifier", "encoder.layers.1.attn (MultiheadAttention)", "head (Linear)", "CrossEntropyLoss"):
        assert counts[f"{name} [backward]"] == 2, (name, counts)  # two batches of 16
    backward = [(start, end) for name, kind, start, end in rows if name == "backward"]
    for name, kind, start, end in rows:
        if name.endswith(" [backward]"):
            assert any(b0 <= start and end <= b1 for b0, b1 in backward), name
