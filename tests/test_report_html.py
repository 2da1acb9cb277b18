"""autonvtx report --html: one self-contained page, rendered in a real headless Chromium."""

from __future__ import annotations

import base64
import fcntl
import fnmatch
import json
import os
import re
import select
import shutil
import struct
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from conftest import make_file, run_autonvtx

from autonvtx.report.compare.diffrun import DiffRequest, produce_diff
from autonvtx.report.output import ReportRequest, produce
from autonvtx.report.render.shell import asset
from autonvtx.stats.model import ViewOptions

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
    command = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--window-size=1400,900",
        *extra,
        page.as_uri(),
    ]
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
    # The style and script are the package's asset files, inlined whole.
    for name in ("page.css", "report.css", "page.js", "report.js"):
        assert asset(name).strip() in text, name


def test_every_asset_file_is_package_data() -> None:
    """The wheel and the sdist carry what [tool.setuptools.package-data] names: every file in
    report/render/assets/ must match one of its patterns, or the installed pages would lack it."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    root = Path(__file__).parent.parent
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["autonvtx"]
    assets = sorted(
        path.relative_to(root / "autonvtx").as_posix() for path in (root / "autonvtx/report/render/assets").iterdir()
    )
    assert {"report/render/assets/page.js", "report/render/assets/diff.js", "report/render/assets/page.css"} <= set(
        assets
    )
    assert [name for name in assets if not any(fnmatch.fnmatch(name, pattern) for pattern in patterns)] == []


def test_browser_draws_the_tree_sized_by_gpu_time(tmp_path: Path) -> None:
    page = tmp_path / "torch.html"
    produce(ReportRequest(str(TORCH), strip_ids=True, html=str(page)))
    document = json.loads(
        produce(ReportRequest(str(TORCH), strip_ids=True, fmt="json", view=ViewOptions(tree=True))) or ""
    )
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
    match = re.search(r'<script type="application/json" id="page-data">(.*?)</script>', text, re.S)
    assert match
    return json.loads(match.group(1))


# Names a page must show as the text they are: markup that would end or swallow the script
# element, quotes, an ampersand, non-ASCII, a JavaScript line separator and a lone surrogate (which
# UTF-8 cannot hold: the page shows U+FFFD in its place).
HOSTILE = [
    "<!--<script>",
    "</script><b>bold</b>",
    '<img src=x onerror="document.body.dataset.pwned=1">',
    "say \"hi\" & 'bye' &amp;",
    "caf\u00e9 \u65e5\u672c \u2028 \u2029 end",
    "lone \ud800 surrogate",
    "plain",
]
SHOWN = [name.replace("\ud800", "\ufffd") for name in HOSTILE]


def hostile_trace(path: Path) -> Path:
    events = [
        {"ph": "X", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5 + i, "name": name, "cat": "d"}
        for i, name in enumerate(HOSTILE)
    ]
    path.write_text(json.dumps({"traceEvents": events}))  # ASCII: the lone surrogate as \ud800
    return path


@pytest.mark.parametrize("kind", ["report", "diff"])
def test_names_like_markup_are_shown_as_text_on_both_pages(tmp_path: Path, kind: str) -> None:
    trace = hostile_trace(tmp_path / "t.json")
    page = tmp_path / f"{kind}.html"
    if kind == "report":
        produce(ReportRequest(str(trace), html=str(page), view=ViewOptions(each=True)))  # the names exactly: no {n}
    else:
        produce_diff(DiffRequest((str(trace),), (str(trace),), html=str(page), view=ViewOptions(tree=True, each=True)))
    text = page.read_text(encoding="utf-8")
    data_text = text.split('id="page-data">', 1)[1].split("</script>", 1)[0]
    assert not re.search("[<>&\u2028\u2029\ud800-\udfff]", data_text)
    data = page_data(page)
    assert data["domain"] == "d"  # said once; the names without it
    names = [row[0] for row in data["rows"]] if kind == "report" else [row["name"] for row in data["rows"]]
    assert sorted(names) == sorted(SHOWN)
    browser = Browser(tmp_path)
    try:
        for width, height in SIZES:
            tab = browser.open(page, width, height)
            seen = browser.evaluate(
                tab,
                """(() => ({
                  rows: Array.from(document.querySelectorAll("#table tbody tr")).map(r => r.dataset.name),
                  cells: Array.from(document.querySelectorAll("#table tbody td.range")).map(td => td.textContent),
                  boxes: Array.from(document.querySelectorAll(".box")).map(b => b.dataset.name),
                  injected: document.querySelectorAll("body b, body img").length,
                  pwned: document.body.dataset.pwned || "",
                  scripts: document.scripts.length,
                }))()""",
            )
            browser.screenshot(tab, tmp_path / f"hostile-{kind}-{width}x{height}.png")
            assert sorted(seen["rows"]) == sorted(seen["cells"]) == sorted(SHOWN)
            assert set(SHOWN) <= set(seen["boxes"])
            assert (seen["injected"], seen["pwned"], seen["scripts"]) == (0, "", 2)
    finally:
        browser.close()


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


class Browser:
    """A headless Chromium driven over its DevTools pipe (--remote-debugging-pipe: it reads
    commands on fd 3 and writes replies and events on fd 4, each a JSON text ended by NUL), so
    that a test sets the viewport exactly, measures the laid-out page and screenshots it."""

    def __init__(self, tmp_path: Path) -> None:
        # Copies above 4, so that placing them on 3 and 4 in the child cannot overwrite each other.
        commands, self.out = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in os.pipe())
        self.into, replies = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in os.pipe())

        def on_3_and_4() -> None:
            os.dup2(commands, 3)
            os.dup2(replies, 4)

        self.process = subprocess.Popen(
            [
                chromium(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={tmp_path / 'cdp-profile'}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=on_3_and_4,
        )
        os.close(commands)
        os.close(replies)
        self.buffer = b""
        self.events: list[dict[str, Any]] = []
        self.last_id = 0
        self.deadline = time.monotonic() + 120

    def close(self) -> None:
        # Asked to close, the browser ends its renderer and helper processes with it.
        try:
            os.write(self.out, json.dumps({"id": self.last_id + 1, "method": "Browser.close"}).encode() + b"\0")
            self.process.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        os.close(self.out)
        os.close(self.into)

    def receive(self) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            left = self.deadline - time.monotonic()
            ready, _, _ = select.select([self.into], [], [], max(left, 0))
            assert ready, "Chromium did not answer within 120 s"
            chunk = os.read(self.into, 1 << 20)
            assert chunk, "Chromium closed its DevTools pipe"
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        found: dict[str, Any] = json.loads(message)
        return found

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> Any:
        self.last_id += 1
        message: dict[str, Any] = {"id": self.last_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self.out, data) :]
        while True:
            reply = self.receive()
            if reply.get("id") == self.last_id:
                assert "error" not in reply, (method, reply["error"])
                return reply["result"]
            self.events.append(reply)

    def wait_for(self, method: str, session: str) -> None:
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method and event.get("sessionId") == session:
                    del self.events[i]
                    return
            self.events.append(self.receive())

    def open(self, page: Path, width: int, height: int) -> str:
        """A tab showing `page` in a `width` x `height` viewport; its session id."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session: str = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.resize(session, width, height)
        self.send("Page.enable", session=session)
        self.send("Page.navigate", {"url": page.as_uri()}, session)
        self.wait_for("Page.loadEventFired", session)
        return session

    def resize(self, session: str, width: int, height: int) -> None:
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session,
        )

    def evaluate(self, session: str, expression: str) -> Any:
        # Two animation frames first: the page redraws on "resize" in the next frame.
        settled = "new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"
        self.send("Runtime.evaluate", {"expression": settled, "awaitPromise": True}, session)
        reply = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
        assert "exceptionDetails" not in reply, reply
        return reply["result"].get("value")

    def mouse(self, session: str, kind: str, x: float, y: float) -> None:
        """A real pointer event at (x, y): "mouseMoved", "mousePressed" or "mouseReleased"."""
        button = "none" if kind == "mouseMoved" else "left"
        self.send(
            "Input.dispatchMouseEvent",
            {"type": kind, "x": x, "y": y, "button": button, "clickCount": 0 if button == "none" else 1},
            session,
        )

    def click(self, session: str, x: float, y: float) -> None:
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.mouse(session, kind, x, y)

    def screenshot(self, session: str, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"}, session)["data"]))


# What a person at the window would see, measured from the laid-out page.
MEASURE = """(() => {
  const box = element => element.getBoundingClientRect();
  const chart = document.getElementById("chart"), pane = document.getElementById("table-pane");
  const scroll = document.getElementById("table-scroll");
  const boxes = Array.from(chart.querySelectorAll(".box"));
  const cells = Array.from(document.querySelectorAll("#table tbody tr")).slice(0, 60)
    .flatMap(row => Array.from(row.children));
  const labels = boxes.map(b => b.querySelector(".n")).filter(n => n);
  return {
    width: innerWidth, height: innerHeight,
    page: [document.documentElement.scrollWidth, document.documentElement.scrollHeight],
    chart: [box(chart).left, box(chart).right, box(chart).top, box(chart).bottom],
    chartScrolls: chart.scrollHeight > chart.clientHeight,
    tableScrolls: scroll.scrollHeight > scroll.clientHeight,
    main: [box(document.querySelector("main")).top, box(document.querySelector("main")).bottom],
    drawn: Math.max(...boxes.map(b => b.offsetTop + b.offsetHeight)),
    chartInner: chart.clientHeight,
    pane: [box(pane).left, box(pane).right, box(pane).top, box(pane).bottom, scroll.scrollWidth - scroll.clientWidth],
    columns: Array.from(document.querySelectorAll("#table thead th"))
      .map(th => [th.dataset.column, box(th).left, box(th).right]),
    cutFigures: cells.filter(td => !td.classList.contains("name") && td.scrollWidth > td.clientWidth)
      .map(td => td.textContent),
    untitledNames: cells.filter(td => td.classList.contains("name") && td.title !== td.textContent).length,
    labels: labels.map(n => n.textContent),
    // A label is one line, cut with an ellipsis where the box is too narrow, never broken.
    brokenLabels: labels.filter(n => n.getClientRects().length !== 1 || box(n).height > 16
      || getComputedStyle(n).textOverflow !== "ellipsis" || getComputedStyle(n).whiteSpace !== "nowrap")
      .map(n => n.textContent),
    cutLabels: labels.filter(n => n.scrollWidth > n.clientWidth).length,
    names: Array.from(document.querySelectorAll("#table tbody tr")).map(row => row.dataset.name),
    summary: document.getElementById("summary").textContent,
    notes: Array.from(document.querySelectorAll("#notes li")).map(li => li.textContent),
    code: Array.from(document.querySelectorAll("#notes code")).map(c => c.textContent),
  };
})()"""


def check_fits(seen: dict[str, Any], width: int, height: int) -> None:
    """The page is the window: nothing scrolls the page; the chart spans its width and is as tall as
    the tree (no blank band under a shallow one) or scrolls; the table takes the rest below it, every
    column inside the window and its pane, its figures whole."""
    assert (seen["width"], seen["height"]) == (width, height)
    assert seen["page"][0] <= width and seen["page"][1] <= height, seen["page"]
    left, right, top, bottom = seen["chart"]
    assert right - left >= 0.95 * (width - 32), seen["chart"]  # all but the body's padding
    if seen["chartScrolls"]:
        assert bottom - top >= 0.5 * (seen["main"][1] - seen["main"][0]), (seen["chart"], seen["main"])
    else:
        assert abs(seen["chartInner"] - seen["drawn"]) <= 1, (seen["chartInner"], seen["drawn"])
    pane_left, pane_right, pane_top, pane_bottom, sideways = seen["pane"]
    assert bottom < pane_top and pane_bottom <= height, (seen["chart"], seen["pane"])
    # The table is as tall as its rows, or takes the rest of the window and scrolls.
    assert not seen["tableScrolls"] or pane_bottom - pane_top >= 150, seen["pane"]
    assert sideways <= 0, "the table scrolls sideways"
    for name, start, end in seen["columns"]:
        assert pane_left - 1 <= start < end <= min(pane_right, width) + 1, (name, start, end, seen["pane"])
        assert end - start >= 36, (name, start, end)
    assert not seen["cutFigures"]
    assert seen["untitledNames"] == 0  # a cut name shows whole on hover
    assert seen["labels"] and not seen["brokenLabels"], seen["brokenLabels"]


SIZES = [(1400, 900), (1920, 1080)]


def test_page_fits_the_window_and_keeps_differing_prefixes(tmp_path: Path) -> None:
    page = tmp_path / "torch.html"
    produce(ReportRequest(str(TORCH), strip_ids=True, html=str(page)))
    browser = Browser(tmp_path)
    try:
        for width, height in SIZES:
            tab = browser.open(page, width, height)
            seen = browser.evaluate(tab, MEASURE)
            browser.screenshot(tab, tmp_path / f"torch-{width}x{height}.png")
            check_fits(seen, width, height)
            assert [column[0] for column in seen["columns"]] == [
                "Range",
                "GPU time",
                "GPU %",
                "Kernels",
                "Mem ops",
                "CPU time",
                "Inst",
                "Top kernel",
            ]
            # Bare names beside "domain 1:..." (and "nccl:..."): no prefix is shared, none dropped.
            assert "domain 1:ncclGroupEnd" in seen["names"] and "nccl:all_to_all" in seen["names"]
            assert "domain 1:ncclGroupEnd" in seen["labels"] and "in domain" not in seen["summary"]
            assert seen["cutLabels"] > 0  # narrow boxes' names end in an ellipsis (checked unbroken above)
        # The page follows its window: the tab opened at 1400x900, made larger, redraws to fit.
        first = browser.open(page, *SIZES[0])
        before = browser.evaluate(first, MEASURE)
        browser.resize(first, *SIZES[1])
        after = browser.evaluate(first, MEASURE)
        check_fits(after, *SIZES[1])
        assert after["chart"][1] - after["chart"][0] > before["chart"][1] - before["chart"][0] + 500  # width
    finally:
        browser.close()
    for width, height in SIZES:
        shot = (tmp_path / f"torch-{width}x{height}.png").read_bytes()
        assert shot[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", shot[16:24]) == (width, height)


def test_a_domain_every_range_shares_is_said_once(tmp_path: Path) -> None:
    # One of our own recordings: every range is in the domain the config names.
    make_file(
        tmp_path / "autonvtx.toml",
        """
        [autonvtx]
        domain = "shop"
        [[rules]]
        modules = ["__main__"]
        """,
    )
    make_file(
        tmp_path / "shop.py",
        """
        def work(n):
            return sum(i * i for i in range(n))
        def price(n): return work(n)
        def basket(n): return [price(n) for _ in range(3)]
        def checkout(n): return basket(n) + [work(n)]
        def serve(n): return [checkout(n) for _ in range(4)]
        def main(): serve(20000); work(50000)
        main()
        """,
    )
    done = run_autonvtx("shop.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    page = tmp_path / "shop.html"
    produce(ReportRequest(str(done.trace_path), html=str(page)))
    assert page_data(page)["domain"] == "shop"
    browser = Browser(tmp_path)
    try:
        for width, height in SIZES:
            tab = browser.open(page, width, height)
            seen = browser.evaluate(tab, MEASURE)
            browser.screenshot(tab, tmp_path / f"shop-{width}x{height}.png")
            check_fits(seen, width, height)
            assert [column[0] for column in seen["columns"]] == ["Range", "CPU time", "Inst"]
            assert "all ranges in domain shop" in seen["summary"]
            assert set(seen["names"]) == {"main", "serve", "checkout", "basket", "price", "work"}
            assert {"main", "serve", "checkout", "work"} <= set(seen["labels"])
            assert not [label for label in seen["labels"] if label.startswith("shop:")]
            # The note's Markdown code span is shown as code, its backticks gone.
            assert seen["code"] == ["autonvtx profile [rule options] SCRIPT"]
            assert seen["notes"] and not [note for note in seen["notes"] if "`" in note]
    finally:
        browser.close()


@pytest.mark.parametrize(
    "names, prefix",
    [
        (["torch:forward", "torch:backward"], "torch:"),
        (["domain 1:ncclSend", "domain 1:ncclRecv"], "domain 1:"),
        (["aten::add", "aten::mul"], ""),  # "::" belongs to the name
        (["torch:forward", "jax:jit"], ""),  # differing prefixes stay
        (["torch:forward", "forward"], ""),
        (["torch:"], ""),  # nothing would be left
        ([], ""),
    ],
)
def test_diff_page_finds_the_prefix_every_name_shares(names: list[str], prefix: str) -> None:
    from autonvtx.report.render.diffpage import shared_prefix

    assert shared_prefix(names) == prefix


DIFF_MEASURE = """(() => {
  const box = element => element.getBoundingClientRect();
  const tree = document.getElementById("chart-pane"), pane = document.getElementById("table-pane");
  const scroll = document.getElementById("table-scroll");
  const cells = Array.from(document.querySelectorAll("#table tbody tr")).slice(0, 60)
    .flatMap(row => Array.from(row.children));
  return {
    width: innerWidth, height: innerHeight,
    page: [document.documentElement.scrollWidth, document.documentElement.scrollHeight],
    tree: [box(tree).top, box(tree).bottom],
    pane: [box(pane).left, box(pane).right, scroll.scrollWidth - scroll.clientWidth],
    columns: Array.from(document.querySelectorAll("#table thead th"))
      .map(th => [th.dataset.column, box(th).left, box(th).right]),
    cutFigures: cells.filter(td => !td.classList.contains("name") && td.scrollWidth > td.clientWidth)
      .map(td => td.textContent),
    untitledNames: cells.filter(td => td.classList.contains("name") && !td.title.endsWith(td.textContent)).length,
    titles: Array.from(document.querySelectorAll("#table tbody td.range")).map(td => td.title),
    labels: Array.from(document.querySelectorAll("#tree .box .name")).map(n => n.textContent),
    names: Array.from(document.querySelectorAll("#table tbody tr")).map(row => row.dataset.name),
    domain: (document.getElementById("domain") || {textContent: ""}).textContent,
  };
})()"""


def check_diff_fits(seen: dict[str, Any], width: int, height: int) -> None:
    assert (seen["width"], seen["height"]) == (width, height)
    assert seen["page"][0] <= width and seen["page"][1] <= height, seen["page"]
    left, right, sideways = seen["pane"]
    assert sideways <= 0, "the table scrolls sideways"
    for name, start, end in seen["columns"]:
        assert left - 1 <= start < end <= min(right, width) + 1, (name, start, end, seen["pane"])
    assert not seen["cutFigures"] and seen["untitledNames"] == 0


def test_diff_page_fits_the_window_and_says_a_shared_domain_once(tmp_path: Path) -> None:
    make_file(
        tmp_path / "autonvtx.toml",
        """
        [autonvtx]
        domain = "shop"
        [[rules]]
        modules = ["__main__"]
        """,
    )
    make_file(
        tmp_path / "shop.py",
        """
        def work(n): return sum(i * i for i in range(n))
        def checkout(n): return [work(n) for _ in range(3)]
        checkout(20000)
        """,
    )
    done = run_autonvtx("shop.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shop, torch = tmp_path / "shop-diff.html", tmp_path / "torch-diff.html"
    produce_diff(
        DiffRequest((str(done.trace_path),), (str(done.trace_path),), html=str(shop), view=ViewOptions(tree=True))
    )
    produce_diff(
        DiffRequest((str(TORCH),), (str(TORCH),), strip_ids=True, html=str(torch), view=ViewOptions(tree=True))
    )
    browser = Browser(tmp_path)
    try:
        for width, height in SIZES:
            seen = browser.evaluate(browser.open(shop, width, height), DIFF_MEASURE)
            check_diff_fits(seen, width, height)
            assert seen["domain"] == "all ranges in domain shop"
            # Hovering a range of the tree describes it: its path, verdict and both sides.
            tab = browser.open(shop, width, height)
            centre = browser.evaluate(
                tab,
                """(() => { const r = document.querySelector('#tree .box[data-path="checkout > work"]')
                  .getBoundingClientRect(); return [r.left + 30, r.top + r.height / 2]; })()""",
            )
            browser.mouse(tab, "mouseMoved", *centre)
            tip = browser.evaluate(
                tab, "document.getElementById('tip').hidden ? '' : document.getElementById('tip').textContent"
            )
            assert tip.split("\n")[:2][0] == "checkout > work" and tip.split("\n")[1].startswith("same (cpu time): ")
            assert set(seen["names"]) == set(seen["labels"]) == {"checkout", "work"}
            tab = browser.open(torch, width, height)
            seen = browser.evaluate(tab, DIFF_MEASURE)
            browser.screenshot(tab, tmp_path / f"torch-diff-{width}x{height}.png")
            check_diff_fits(seen, width, height)
            top, bottom = seen["tree"]
            assert bottom - top > 0.6 * height and bottom <= height  # a long tree scrolls in its pane
            assert seen["domain"] == "" and "domain 1:ncclGroupEnd" in seen["names"]
            # A name at several places in the tree: each row's title says which place.
            assert "FlashAttnFunc > flash_attn::_flash_attn_forward" in seen["titles"]
    finally:
        browser.close()


def shop_recording(tmp_path: Path) -> Path:
    make_file(
        tmp_path / "autonvtx.toml",
        """
        [[rules]]
        modules = ["__main__"]
        """,
    )
    make_file(
        tmp_path / "shop.py",
        """
        def work(n):
            return sum(i * i for i in range(n))
        def price(n): return work(n)
        def basket(n): return [price(n) for _ in range(3)]
        def checkout(n): return basket(n) + [work(n)]
        def serve(n): return [checkout(n) for _ in range(4)]
        def main(): serve(20000); work(50000)
        main()
        """,
    )
    done = run_autonvtx("shop.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.trace_path is not None
    return done.trace_path


def js_duration(ns: float) -> str:
    """Page.dur, as the page writes a duration."""
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
        if abs(ns) >= scale:
            return f"{ns / scale:.3f} {unit}"
    return f"{round(ns)} ns"


TABLE = """(() => ({
  rows: Object.fromEntries(Array.from(document.querySelectorAll("#table tbody tr")).map(row =>
    [row.dataset.name, Array.from(row.children).map(td => td.textContent)])),
  caption: document.getElementById("table-caption").textContent,
  crumbs: document.getElementById("crumbs").textContent,
  tip: document.getElementById("tip").hidden ? null : document.getElementById("tip").textContent,
}))()"""


def box_centre(browser: Browser, tab: str, name: str, depth: int) -> tuple[float, float]:
    found = browser.evaluate(
        tab,
        f"""(() => {{
          const b = Array.from(document.querySelectorAll(".box"))
            .find(b => b.dataset.name === {json.dumps(name)} && b.dataset.depth === "{depth}");
          const r = b.getBoundingClientRect();
          return [r.left + Math.min(r.width / 2, 40), r.top + r.height / 2];
        }})()""",
    )
    return found[0], found[1]


def test_zoom_filters_the_table_to_the_subtree_and_the_tooltip_follows(tmp_path: Path) -> None:
    trace = shop_recording(tmp_path)
    page = tmp_path / "shop.html"
    produce(ReportRequest(str(trace), html=str(page)))
    tree = json.loads(produce(ReportRequest(str(trace), fmt="json", view=ViewOptions(tree=True))) or "")

    def under(node: dict[str, Any], name: str) -> list[dict[str, Any]]:
        found = [node] if node["name"] == name else []
        return found + [hit for child in node.get("children", []) for hit in under(child, name)]

    serve = under(tree["tree"][0], "serve")[0]
    # work runs under serve 16 times (4 checkouts x (3 prices + 1)); its time there is those 16's.
    work_in_serve = under(serve, "work")
    assert sum(node["instances"] for node in work_in_serve) == 16
    browser = Browser(tmp_path)
    try:
        for width, height in SIZES:
            tab = browser.open(page, width, height)
            whole = browser.evaluate(tab, TABLE)
            assert whole["rows"]["work"][2] == "17" and whole["caption"] == ""
            # Point at serve (depth 2): the tooltip describes it; click: the chart zooms into it.
            x, y = box_centre(browser, tab, "serve", 2)
            browser.mouse(tab, "mouseMoved", x, y)
            assert browser.evaluate(tab, TABLE)["tip"].split("\n")[0] == "serve"
            browser.click(tab, x, y)
            zoomed = browser.evaluate(tab, TABLE)
            browser.screenshot(tab, tmp_path / f"zoomed-{width}x{height}.png")
            assert zoomed["crumbs"] == "all ranges > main > serve"
            # Under the still pointer is now serve's grandchild, at depth 2 of the zoomed chart.
            under_pointer = browser.evaluate(tab, f"document.elementFromPoint({x}, {y}).closest('.box').dataset.name")
            assert under_pointer == "basket"
            assert zoomed["tip"] is not None and zoomed["tip"].split("\n")[0] == "basket"
            # The table holds serve's subtree, its figures within it.
            assert set(zoomed["rows"]) == {"serve", "checkout", "basket", "price", "work"}
            assert {name: cells[2] for name, cells in zoomed["rows"].items()} == {
                "serve": "1",
                "checkout": "4",
                "basket": "4",
                "price": "12",
                "work": "16",
            }
            assert zoomed["rows"]["work"][1] == js_duration(sum(node["cpu_ns"] for node in work_in_serve))
            assert zoomed["rows"]["serve"][1] == js_duration(serve["cpu_ns"])
            assert zoomed["caption"].startswith("Inside main > serve: 5 range name(s)")
            # Escape zooms out one level; the breadcrumbs lead back to the whole tree and table.
            browser.send("Input.dispatchKeyEvent", {"type": "keyDown", "key": "Escape"}, tab)
            assert browser.evaluate(tab, TABLE)["crumbs"] == "all ranges > main"
            browser.evaluate(tab, "document.querySelector('#crumbs span').click()")
            again = browser.evaluate(tab, TABLE)
            assert again["rows"] == whole["rows"] and again["caption"] == ""
    finally:
        browser.close()


SORTED = ["_x", "A1", "a2", "a10", "b", "B2"]


@pytest.mark.parametrize("kind", ["report", "diff"])
def test_names_sort_case_insensitively_in_natural_order(tmp_path: Path, kind: str) -> None:
    events = [
        {"ph": "X", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 3 + i, "name": name, "cat": "d"}
        for i, name in enumerate(["b", "B2", "a10", "a2", "A1", "_x"])
    ]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    page = tmp_path / f"{kind}.html"
    if kind == "report":
        produce(ReportRequest(str(trace), html=str(page), view=ViewOptions(each=True)))
    else:
        produce_diff(DiffRequest((str(trace),), (str(trace),), html=str(page), view=ViewOptions(each=True)))
    names = "Array.from(document.querySelectorAll('#table tbody tr')).map(row => row.dataset.name)"
    by_name = "document.querySelector('#table th[data-column=\"Range\"]').click()"
    browser = Browser(tmp_path)
    try:
        tab = browser.open(page, *SIZES[0])
        browser.evaluate(tab, by_name)
        assert browser.evaluate(tab, names) == SORTED
        browser.evaluate(tab, by_name)
        assert browser.evaluate(tab, names) == SORTED[::-1]
    finally:
        browser.close()


def test_zoom_into_a_group_gives_that_groups_rows_with_the_whole_tables_figures(tmp_path: Path) -> None:
    page = tmp_path / "by-process.html"
    produce(ReportRequest(str(TORCH), strip_ids=True, html=str(page), view=ViewOptions(by="process")))
    rows = """Array.from(document.querySelectorAll("#table tbody tr")).slice(0, 12).map(row =>
      Array.from(row.children).map(td => td.textContent))"""
    browser = Browser(tmp_path)
    try:
        tab = browser.open(page, *SIZES[0])
        whole = browser.evaluate(tab, rows.replace(".slice(0, 12)", ""))
        x, y = box_centre(browser, tab, "python3 (pid 145)", 1)
        browser.click(tab, x, y)
        zoomed = browser.evaluate(tab, rows)
        label = browser.evaluate(
            tab, """document.querySelector('.box[data-name="FlashAttnFunc"][data-depth="1"]').textContent"""
        )
        browser.screenshot(tab, tmp_path / "by-process-zoomed.png")
    finally:
        browser.close()
    # Range, Group, GPU time, GPU %, Kernels, Mem ops, CPU time, Inst, Top kernel: the group's
    # largest rows, figure for figure as the whole table gives them.
    assert zoomed and {row[1] for row in zoomed} == {"python3 (pid 145)"}
    by_key = {(row[0], row[1]): row for row in whole}
    assert zoomed == [by_key[(row[0], row[1])] for row in zoomed]
    assert zoomed[0][:3] == ["FlashAttnFunc", "python3 (pid 145)", "128.490 ms"]
    # Its share as its box gives it, rounded once.
    assert zoomed[0][3] == "23.7%" and label.endswith("128.490 ms \u00b7 23.7%")


def test_a_recursion_thousands_deep_draws_scrolls_and_counts_its_nest_once_when_zoomed(tmp_path: Path) -> None:
    depth = 3000
    events = [
        {"ph": "X", "pid": 1, "tid": 1, "ts": i, "dur": 2 * (depth - i), "name": "f", "cat": "d"} for i in range(depth)
    ]
    trace = tmp_path / "deep.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    page = tmp_path / "deep.html"
    produce(ReportRequest(str(trace), html=str(page)))
    browser = Browser(tmp_path)
    try:
        tab = browser.open(page, *SIZES[0])
        seen = browser.evaluate(tab, MEASURE)
        check_fits(seen, *SIZES[0])
        assert seen["chartScrolls"]
        browser.click(tab, *box_centre(browser, tab, "f", 2))
        zoomed = browser.evaluate(tab, TABLE)
    finally:
        browser.close()
    # Inside the second f: one row, its time the outermost f's there (5.998 ms), not the sum over
    # the nest, and every one of the 2,999 instances counted.
    assert zoomed["rows"] == {"f": ["f", "5.998 ms", "2,999"]}


def test_embedded_json_reads_back_the_same_with_nothing_a_script_element_could_see() -> None:
    from autonvtx.report.render.shell import json_text, script_json

    data = {"names": [name for name in HOSTILE if "\ud800" not in name], "<key>": "</script>"}
    embedded = script_json(json_text(data))
    assert not re.search("[<>&\u2028\u2029]", embedded)
    assert json.loads(embedded) == data
    assert json.loads(script_json(json_text(["a\ud800b"]))) == ["a\ufffdb"]


def test_a_terminal_s_cut_to_the_first_rows_leaves_the_page_whole(tmp_path: Path) -> None:
    # The table on a terminal shows the first 30 rows; the page written beside it held only
    # those 30 too, where through a pipe it held every row.
    on_terminal, piped = tmp_path / "terminal.html", tmp_path / "piped.html"
    head = produce(ReportRequest(str(TORCH), terminal=True, html=str(on_terminal), view=ViewOptions(each=True))) or ""
    produce(ReportRequest(str(TORCH), html=str(piped), view=ViewOptions(each=True)))
    assert head.startswith("showing the first 30 of")
    assert page_data(on_terminal) == page_data(piped)
