"""The style sheet and script inlined into the --html page (no network, no CDN)."""

from __future__ import annotations

STYLE = """
:root { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; font-size: 13px; color: #1d1f23; }
/* The page is the window: the header takes what it needs, the chart and the table share the
   rest and scroll inside themselves, so neither pushes the other below the fold. */
html, body { height: 100%; }
body { margin: 0; padding: 10px 16px 12px; box-sizing: border-box; background: #fbfbfa;
       display: flex; flex-direction: column; }
header { flex: none; }
h1 { font-size: 17px; margin: 0 0 2px; overflow-wrap: anywhere; }
#summary { color: #555; margin-bottom: 4px; }
#summary .domain { color: #1d1f23; }
#notes { margin: 0 0 6px; padding-left: 18px; color: #8a5a00; font-size: 12px; }
#notes:empty { display: none; }
main { flex: 1 1 auto; min-height: 0; display: flex; gap: 12px; }
#chart-pane { flex: 1 1 0; min-width: 0; display: flex; flex-direction: column; }
#bar { flex: none; display: flex; align-items: baseline; gap: 12px; margin-bottom: 4px; min-height: 22px; }
#crumbs { flex: 1 1 auto; min-width: 0; overflow: hidden; white-space: nowrap; text-overflow: ellipsis; }
#crumbs span { cursor: pointer; color: #2b5d9b; }
#crumbs span:hover { text-decoration: underline; }
#controls { flex: none; }
#controls button { font: inherit; margin-left: 4px; padding: 1px 8px; border: 1px solid #bbb; background: #fff; border-radius: 3px; cursor: pointer; }
#controls button.on { background: #2b5d9b; color: #fff; border-color: #2b5d9b; }
#chart { flex: 1 1 auto; min-height: 160px; position: relative; border: 1px solid #ddd; background: #fff;
         overflow-x: hidden; overflow-y: auto; }
.box { position: absolute; box-sizing: border-box; border: 1px solid rgba(255,255,255,.9); overflow: hidden;
       padding: 2px 4px; font-size: 11px; line-height: 15px; cursor: pointer; color: #222; white-space: nowrap; }
.box .n, .box .v { display: block; overflow: hidden; text-overflow: ellipsis; }
.box .n.wrap { white-space: normal; overflow-wrap: anywhere; display: -webkit-box; -webkit-box-orient: vertical; }
.box .v { color: rgba(0,0,0,.62); font-variant-numeric: tabular-nums; }
.box:hover, .box.hl { outline: 2px solid #1d1f23; outline-offset: -2px; z-index: 1; }
.empty { padding: 12px; color: #666; }
/* The table's width is the pane's: number columns take what their figures need, the two name
   columns share the rest and cut their text (the full name is the cell's title); only a pane
   narrower than the table's min-width scrolls sideways. */
#table-pane { flex: 0 0 auto; align-self: flex-start; max-height: 100%; box-sizing: border-box; overflow: auto;
              font-size: 12px; border: 1px solid #ddd; background: #fff; }
#table-pane.gpu { width: clamp(600px, 54%, 920px); }
#table-pane.cpu { width: clamp(360px, 34%, 560px); }
table { border-collapse: collapse; width: 100%; min-width: 340px; }
.gpu table { min-width: 580px; }
th, td { padding: 3px 6px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap;
         font-variant-numeric: tabular-nums; }
th { position: sticky; top: 0; background: #f1f1ef; cursor: pointer; user-select: none; z-index: 2; }
td.name, th.name { text-align: left; max-width: 0; overflow: hidden; text-overflow: ellipsis; }
th.name.range { width: 58%; }
th.name.kernel { width: 42%; }
/* A group ("python3 (pid 144)", "rank 1") is short: it keeps its width, up to a point. */
td.name.group, th.name.group { max-width: 11em; }
tbody tr:hover { background: #fff4d6; }
#tip { position: fixed; pointer-events: none; background: #1d1f23; color: #fff; padding: 6px 8px; border-radius: 4px;
       font-size: 12px; max-width: 520px; z-index: 10; white-space: pre-wrap; word-break: break-all; }
/* A narrow window stacks the chart over the table. */
@media (max-width: 1100px) {
  main { flex-direction: column; }
  #chart-pane { flex: 0 0 auto; height: 48vh; }
  #table-pane, #table-pane.gpu, #table-pane.cpu { flex: 1 1 auto; align-self: stretch; width: auto; min-height: 200px; }
}
"""

SCRIPT = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var NAME = 0, GROUP = 1, GPU = 2, CPU = 3, KERNELS = 4, MEMOPS = 5, INST = 6, SPAN = 7, HIDDEN = 8, KIDS = 9;
  // A row of the chart is as tall as the free height allows, within these bounds: a shallow
  // tree fills the pane with boxes that have room for their figures, a deep one scrolls.
  // The root's row says only the total, so it stays short.
  var MIN_ROW = 22, MAX_ROW = 150, ROOT_ROW = 40, LINE = 15;
  var sizeBy = data.hasGpu ? data.sizeBy : "cpu";
  var chart = document.getElementById("chart");
  var tip = document.getElementById("tip");

  function dur(ns) {
    if (ns >= 1e9) return (ns / 1e9).toFixed(3) + " s";
    if (ns >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
    if (ns >= 1e3) return (ns / 1e3).toFixed(3) + " us";
    return ns + " ns";
  }
  function num(n) { return n.toLocaleString("en-US"); }
  function value(node) { return sizeBy === "gpu" ? node[GPU] : node[CPU]; }
  function sum(nodes, field) { var s = 0; for (var i = 0; i < nodes.length; i++) s += nodes[i][field]; return s; }
  function colour(node) {
    if (node[GROUP]) return "hsl(212, 25%, 82%)";
    var h = 0, name = node[NAME];
    for (var i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
    return "hsl(" + (8 + h % 42) + ", " + (62 + (h >> 6) % 25) + "%, " + (58 + (h >> 12) % 18) + "%)";
  }

  var root = ["all ranges", 1, sum(data.tree, GPU), sum(data.tree, CPU), sum(data.tree, KERNELS),
              sum(data.tree, MEMOPS), sum(data.tree, INST), 0, 0, data.tree];
  var focus = [root];

  function describe(node) {
    var lines = [node[NAME]];
    if (data.hasGpu) {
      var share = data.totals.gpu_ns ? (100 * node[GPU] / data.totals.gpu_ns).toFixed(1) + "% of all GPU time" : "";
      lines.push("GPU time: " + dur(node[GPU]) + (share ? " (" + share + ")" : ""));
      lines.push("kernels: " + num(node[KERNELS]) + ", memcpy/memset: " + num(node[MEMOPS]));
      lines.push("GPU span: " + dur(node[SPAN]));
    }
    lines.push("CPU time: " + dur(node[CPU]) + ", instances: " + num(node[INST]));
    if (node[HIDDEN]) lines.push(node[HIDDEN] + " smaller range(s) not drawn");
    return lines.join("\n");
  }

  function place(node, x, w, depth, state) {
    var px = w * state.width;
    if (px < 0.5) return;
    var box = document.createElement("div");
    box.className = "box";
    box.style.left = (x * 100) + "%";
    box.style.width = (w * 100) + "%";
    box.style.background = colour(node);
    box.dataset.name = node[NAME];
    box.dataset.depth = String(depth);
    box.dataset.value = String(value(node));
    box.dataset.kind = node === root ? "root" : (node[GROUP] ? "group" : "range");
    state.boxes.push([box, node, px, depth]);
    box.addEventListener("mousemove", function (event) { showTip(event, node); });
    box.addEventListener("mouseleave", hideTip);
    box.addEventListener("click", function () { if (node !== focus[focus.length - 1]) { focus.push(node); render(); } });
    chart.appendChild(box);
    state.depth = Math.max(state.depth, depth);
    var kids = node[KIDS];
    var total = Math.max(value(node), sum(kids, sizeBy === "gpu" ? GPU : CPU)) || 1;
    var cx = x;
    for (var i = 0; i < kids.length; i++) {
      var cw = w * value(kids[i]) / total;
      place(kids[i], cx, cw, depth + 1, state);
      cx += cw;
    }
  }

  // Rows share the chart's height; a box shows its name, then (when the row has room) its time
  // and share of the focused range, the name wrapping over the lines left.
  function label(box, node, px, row, whole) {
    if (px <= 28) return;
    var lines = Math.floor((row - 4) / LINE);
    var name = document.createElement("span");
    name.className = "n";
    box.appendChild(name);
    if (lines < 3) {
      name.textContent = node[NAME];
    } else {
      // Wrap between the parts of a qualified name (aten::linear, Trainer.step) before anywhere else.
      // (No look-behind in the pattern: a browser without it would reject the whole script.)
      node[NAME].replace(/(::|[._\/ ,(])/g, "$1\u0000").split("\u0000").forEach(function (part, i) {
        if (i) name.appendChild(document.createElement("wbr"));
        name.appendChild(document.createTextNode(part));
      });
    }
    if (lines < 2 || px < 56) return;
    if (lines > 2) {
      name.className = "n wrap";
      name.style.webkitLineClamp = String(lines - 1);
    }
    var figures = document.createElement("span");
    figures.className = "v";
    figures.textContent = dur(value(node)) + " \u00b7 " + (100 * value(node) / whole).toFixed(1) + "%";
    figures.title = whole === data.totals.gpu_ns ? "share of all GPU time" : "share of the CPU time of all ranges";
    box.appendChild(figures);
  }

  function render() {
    chart.textContent = "";
    var top = focus[focus.length - 1];
    if (!value(top)) {
      var empty = document.createElement("div");
      empty.className = "empty";
      empty.textContent = sizeBy === "gpu" ? "No GPU time inside these ranges: size the boxes by CPU time." : "No ranges.";
      chart.appendChild(empty);
    } else {
      var state = { width: chart.clientWidth || 800, depth: 0, boxes: [] };
      place(top, 0, 1, 0, state);
      var first = state.depth ? Math.min(ROOT_ROW, Math.floor(chart.clientHeight / (state.depth + 1))) : 0;
      var row = Math.floor((chart.clientHeight - first) / (state.depth + (first ? 0 : 1)));
      row = Math.max(MIN_ROW, Math.min(MAX_ROW, row));
      first = Math.max(MIN_ROW, first);
      // Shares as the table gives them: of all GPU time, or of the CPU time of all ranges.
      var whole = sizeBy === "gpu" && data.totals.gpu_ns ? data.totals.gpu_ns : value(root);
      state.boxes.forEach(function (item) {
        var depth = item[3], height = depth ? row : first;
        item[0].style.top = (depth ? first + (depth - 1) * row : 0) + "px";
        item[0].style.height = height + "px";
        label(item[0], item[1], item[2], height, whole);
      });
    }
    var crumbs = document.getElementById("crumbs");
    crumbs.textContent = "";
    focus.forEach(function (node, i) {
      if (i) crumbs.appendChild(document.createTextNode(" > "));
      var part = document.createElement("span");
      part.textContent = node[NAME];
      part.addEventListener("click", function () { focus = focus.slice(0, i + 1); render(); });
      crumbs.appendChild(part);
    });
  }

  function showTip(event, node) {
    tip.textContent = describe(node);
    tip.hidden = false;
    var x = Math.min(event.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    tip.style.left = Math.max(x, 4) + "px";
    tip.style.top = (event.clientY + 16) + "px";
  }
  function hideTip() { tip.hidden = true; }

  // The table: one row per range name, sortable by any column.
  var columns = [["Range", 0, "name", "range"]];
  if (data.rows.some(function (r) { return r[1]; })) columns.push(["Group", 1, "name", "group"]);
  if (data.hasGpu) columns.push(["GPU time", 2, "ns"], ["GPU %", 3, "pct"], ["Kernels", 4, "n"], ["Mem ops", 5, "n"]);
  columns.push(["CPU time", 6, "ns"], ["Inst", 7, "n"]);
  if (data.hasGpu) columns.push(["Top kernel", 9, "name", "kernel"]);
  // The pane is as wide as its columns want, and leaves the chart the rest.
  document.getElementById("table-pane").className = data.hasGpu ? "gpu" : "cpu";
  var order = { index: data.hasGpu && sizeBy === "gpu" ? 2 : 6, down: true };

  function cell(row, column) {
    var v = row[column[1]];
    if (column[2] === "ns") return dur(v);
    if (column[2] === "pct") return v.toFixed(1) + "%";
    if (column[2] === "n") return num(v);
    return v;
  }

  function renderTable() {
    var head = document.querySelector("#table thead");
    var body = document.querySelector("#table tbody");
    head.textContent = "";
    body.textContent = "";
    var tr = document.createElement("tr");
    columns.forEach(function (column) {
      var th = document.createElement("th");
      th.textContent = column[0] + (order.index === column[1] ? (order.down ? " \u25be" : " \u25b4") : "");
      if (column[2] === "name") th.className = "name " + column[3];
      th.dataset.column = column[0];
      th.addEventListener("click", function () {
        order = { index: column[1], down: order.index === column[1] ? !order.down : column[2] !== "name" };
        renderTable();
      });
      tr.appendChild(th);
    });
    head.appendChild(tr);
    var rows = data.rows.slice().sort(function (a, b) {
      var x = a[order.index], y = b[order.index];
      var c = x < y ? -1 : x > y ? 1 : 0;
      return order.down ? -c : c;
    });
    rows.forEach(function (row) {
      var line = document.createElement("tr");
      line.dataset.name = row[0];
      columns.forEach(function (column) {
        var td = document.createElement("td");
        td.textContent = cell(row, column);
        if (column[2] === "name") { td.className = "name " + column[3]; td.title = row[column[1]]; }
        line.appendChild(td);
      });
      line.addEventListener("mouseenter", function () { highlight(row[0], true); });
      line.addEventListener("mouseleave", function () { highlight(row[0], false); });
      body.appendChild(line);
    });
  }

  function highlight(name, on) {
    var boxes = chart.querySelectorAll(".box");
    for (var i = 0; i < boxes.length; i++) {
      if (boxes[i].dataset.name === name) boxes[i].classList.toggle("hl", on);
    }
  }

  function header() {
    document.getElementById("title").textContent = (data.hasGpu ? "GPU" : "CPU") + " time per NVTX range: " + data.title;
    var summary = data.description;
    if (data.hasGpu) {
      summary += " \u2014 " + num(data.totals.kernels) + " kernels, " + dur(data.totals.gpu_ns) + " of GPU work";
      if (data.totals.gpu_ns) {
        summary += "; " + (100 * data.totals.outside_gpu_ns / data.totals.gpu_ns).toFixed(1) +
          "% of it launched outside every range";
      }
    }
    var line = document.getElementById("summary");
    line.textContent = summary;
    if (data.domain) {
      var domain = document.createElement("span");
      domain.className = "domain";
      domain.id = "domain";
      // An unnamed domain is already called "domain N".
      domain.textContent = "all ranges in " + (/^domain \d+$/.test(data.domain) ? "" : "domain ") + data.domain;
      line.appendChild(document.createTextNode(summary ? " \u2014 " : ""));
      line.appendChild(domain);
    }
    var notes = document.getElementById("notes");
    data.notes.forEach(function (note) {
      var li = document.createElement("li");
      li.textContent = note;
      notes.appendChild(li);
    });
    var controls = document.getElementById("controls");
    if (!data.hasGpu) return;
    controls.appendChild(document.createTextNode("Box size: "));
    [["gpu", "GPU time"], ["cpu", "CPU time"]].forEach(function (choice) {
      var button = document.createElement("button");
      button.textContent = choice[1];
      button.dataset.size = choice[0];
      if (choice[0] === sizeBy) button.className = "on";
      button.addEventListener("click", function () {
        sizeBy = choice[0];
        controls.querySelectorAll("button").forEach(function (b) { b.className = b.dataset.size === sizeBy ? "on" : ""; });
        render();
      });
      controls.appendChild(button);
    });
  }

  header();
  renderTable();
  render();
  var pending = false;
  window.addEventListener("resize", function () {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; render(); });
  });
})();
"""
