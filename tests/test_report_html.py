"""autonvtx report --html: one self-contained page, rendered in a real headless Chromium."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from autonvtx.report.output import ReportRequest, produce

FIXTURES = Path(__file__).parent / "fixtures" / "nsys"
TORCH = FIXTURES / "torch-2gpu-nsys2026.2.sqlite"
SAXPY = FIXTURES / "saxpy-mpi-cuda-nsys2022.2.sqlite"


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true but no chromium on PATH: .ci/run installs Debian's chromium for this test")
    pytest.skip("no chromium on PATH (apt-get install chromium)")


def browse(page: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "chromium-profile"
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--no-first-run", f"--user-data-dir={profile}", "--window-size=1400,900",
               *extra, page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


class Boxes(HTMLParser):
    """The chart's boxes and the table's rows, from the DOM as Chromium left it after the script ran."""

    def __init__(self) -> None:
        super().__init__()
        self.boxes: list[dict[str, str]] = []
        self.table_rows: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "div" and found.get("class", "").split()[:1] == ["box"]:
            self.boxes.append(found)
        if tag == "tr" and "data-name" in found:
            self.table_rows.append(found["data-name"])


def rendered(page: Path, tmp_path: Path) -> Boxes:
    parser = Boxes()
    parser.feed(browse(page, tmp_path, "--dump-dom").stdout)
    return parser


def width_percent(box: dict[str, str]) -> float:
    match = re.search(r"width:\s*([\d.e+-]+)%", box["style"])
    assert match, box
    return float(match.group(1))


def test_page_is_self_contained(tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    produce(ReportRequest(str(TORCH), strip_ids=True, html=str(page)))
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=|@import|url\(|https?://""", text.replace("\\/", "/"))
    assert text.count("<script") == 2  # the data and the script, both inline


def test_browser_draws_the_tree_sized_by_gpu_time(tmp_path: Path) -> None:
    page = tmp_path / "torch.html"
    produce(ReportRequest(str(TORCH), strip_ids=True, html=str(page)))
    document = json.loads(produce(ReportRequest(str(TORCH), strip_ids=True, tree=True, fmt="json")) or "")
    top = document["tree"][0]["children"]
    whole = sum(node["gpu_ns"] for node in top)
    dom = rendered(page, tmp_path)
    by_name: dict[tuple[str, str], dict[str, str]] = {}
    for box in dom.boxes:
        by_name.setdefault((box["data-name"], box["data-depth"]), box)
    assert by_name[("all ranges", "0")]["data-kind"] == "root"
    flash = by_name[("FlashAttnFunc", "1")]
    expected = next(n for n in top if n["name"] == "FlashAttnFunc")
    assert int(flash["data-value"]) == expected["gpu_ns"]
    assert width_percent(flash) == pytest.approx(100 * expected["gpu_ns"] / whole, abs=0.01)
    assert ("flash_attn::_flash_attn_forward", "2") in by_name
    assert ("domain 1:ncclGroupEnd", "5") in by_name  # AllToAll4D > c10d > record_param_comms > nccl:all_to_all
    # Ranges that launched no GPU work take no width: no box for them.
    assert not any(box["data-value"] == "0" for box in dom.boxes)
    assert dom.table_rows[0] == "FlashAttnFunc" and len(dom.table_rows) == len(document["ranges"])
    shot = tmp_path / "torch.png"
    browse(page, tmp_path, f"--screenshot={shot}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_browser_sizes_by_cpu_time_on_request(tmp_path: Path) -> None:
    def depth1(size_by: str) -> dict[str, dict[str, str]]:
        page = tmp_path / f"saxpy-{size_by}.html"
        produce(ReportRequest(str(SAXPY), html=str(page), html_by=size_by))
        return {box["data-name"]: box for box in rendered(page, tmp_path).boxes if box["data-depth"] == "1"}

    # By GPU time only saxpy launched anything; by CPU time MPI_Init (645 ms) is the widest and
    # saxpy (0.2 ms of 0.9 s) is under a pixel wide, so not drawn.
    assert set(depth1("gpu")) == {"saxpy"}
    by_cpu = depth1("cpu")
    assert set(by_cpu) == {"MPI:MPI_Init", "MPI:MPI_Send", "MPI:MPI_Recv", "MPI:MPI_Finalize"}
    assert max(by_cpu.values(), key=width_percent)["data-name"] == "MPI:MPI_Init"


def page_data(page: Path) -> dict[str, Any]:
    text = page.read_text(encoding="utf-8")
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', text, re.S)
    assert match
    return json.loads(match.group(1))


def test_a_range_named_like_markup_cannot_break_the_page(tmp_path: Path) -> None:
    # "<!--<script>" inside a script element opens a double-escaped state that swallows the rest
    # of the page; no "<" at all may reach the embedded JSON.
    name = "<!--<script>alert(1)</script>"
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 5, "name": name, "cat": "d"},
        {"ph": "X", "pid": 1, "tid": 1, "ts": 10, "dur": 3, "name": "plain", "cat": "d"}]}))
    page = tmp_path / "t.html"
    produce(ReportRequest(str(trace), html=str(page)))
    data_text = page.read_text(encoding="utf-8").split('id="report-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data_text
    # Both ranges are in domain d: the page says so once and names them without it.
    assert {row[0] for row in page_data(page)["rows"]} == {name, "plain"}
    assert page_data(page)["domain"] == "d"
    dom = rendered(page, tmp_path)
    assert sorted(dom.table_rows) == sorted([name, "plain"])


def test_cpu_view_holds_ranges_without_gpu_time_and_the_page_says_what_ran_outside(tmp_path: Path) -> None:
    page = tmp_path / "saxpy.html"
    produce(ReportRequest(str(SAXPY), html=str(page)))  # sized by GPU time
    data = page_data(page)
    # The CPU time button redraws from the same data: MPI_Init (645 ms CPU, no GPU) must be in it.
    assert "MPI:MPI_Init" in {node[0] for node in data["tree"]}
    summary = json.loads(produce(ReportRequest(str(SAXPY), fmt="json")) or "")
    outside = summary["totals"]["outside_ranges"]["gpu_ns"] / summary["totals"]["capture"]["gpu_ns"]
    assert outside == pytest.approx(0.76, abs=0.01)
    assert data["totals"]["outside_gpu_ns"] == summary["totals"]["outside_ranges"]["gpu_ns"]
    text = browse(page, tmp_path, "--dump-dom").stdout
    assert f"{100 * outside:.1f}% of it launched outside every range" in text
