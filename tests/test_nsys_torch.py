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
