"""The style sheet and script inlined into the --html page (no network, no CDN)."""
from __future__ import annotations

STYLE = """
:root { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; font-size: 13px; color: #1d1f23; }
body { margin: 0; padding: 12px 16px; background: #fbfbfa; }
h1 { font-size: 17px; margin: 0 0 4px; }
#summary { color: #555; margin-bottom: 6px; }
#notes { margin: 4px 0 8px; padding-left: 18px; color: #8a5a00; }
#controls button { font: inherit; margin-right: 4px; padding: 2px 8px; border: 1px solid #bbb; background: #fff; border-radius: 3px; cursor: pointer; }
#controls button.on { background: #2b5d9b; color: #fff; border-color: #2b5d9b; }
main { display: flex; gap: 14px; align-items: flex-start; }
#chart-pane { flex: 5 1 0; min-width: 0; }
#table-pane { flex: 4 1 0; min-width: 420px; font-size: 12px; max-height: 85vh; overflow: auto; border: 1px solid #ddd; background: #fff; }
#crumbs { margin-bottom: 4px; min-height: 18px; }
#crumbs span { cursor: pointer; color: #2b5d9b; }
#crumbs span:hover { text-decoration: underline; }
#chart { position: relative; width: 100%; border: 1px solid #ddd; background: #fff; overflow: hidden; }
.box { position: absolute; height: 20px; box-sizing: border-box; border: 1px solid rgba(255,255,255,.9);
       overflow: hidden; white-space: nowrap; text-overflow: ellipsis; padding: 2px 3px; font-size: 11px;
       line-height: 15px; cursor: pointer; color: #222; }
.box:hover, .box.hl { outline: 2px solid #1d1f23; z-index: 1; }
.empty { padding: 12px; color: #666; }
table { border-collapse: collapse; width: 100%; }
th, td { padding: 3px 6px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th { position: sticky; top: 0; background: #f1f1ef; cursor: pointer; user-select: none; }
td.name, th.name { text-align: left; max-width: 260px; overflow: hidden; text-overflow: ellipsis; }
tbody tr:hover { background: #fff4d6; }
#tip { position: fixed; pointer-events: none; background: #1d1f23; color: #fff; padding: 6px 8px; border-radius: 4px;
       font-size: 12px; max-width: 520px; z-index: 10; white-space: pre-wrap; word-break: break-all; }
"""

SCRIPT = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var NAME = 0, GROUP = 1, GPU = 2, CPU = 3, KERNELS = 4, MEMOPS = 5, INST = 6, SPAN = 7, HIDDEN = 8, KIDS = 9;
  var ROW = 21;
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
    box.style.top = (depth * ROW) + "px";
    box.style.background = colour(node);
    box.dataset.name = node[NAME];
    box.dataset.depth = String(depth);
    box.dataset.value = String(value(node));
    box.dataset.kind = node === root ? "root" : (node[GROUP] ? "group" : "range");
    if (px > 28) box.textContent = node[NAME];
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

  function render() {
    chart.textContent = "";
    var top = focus[focus.length - 1];
    if (!value(top)) {
      var empty = document.createElement("div");
      empty.className = "empty";
      empty.textContent = sizeBy === "gpu" ? "No GPU time inside these ranges: size the boxes by CPU time." : "No ranges.";
      chart.appendChild(empty);
      chart.style.height = "";
    } else {
      var state = { width: chart.clientWidth || 800, depth: 0 };
      place(top, 0, 1, 0, state);
      chart.style.height = ((state.depth + 1) * ROW + 2) + "px";
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
  var columns = [["Range", 0, "name"]];
  if (data.rows.some(function (r) { return r[1]; })) columns.push(["Group", 1, "name"]);
  if (data.hasGpu) columns.push(["GPU time", 2, "ns"], ["GPU %", 3, "pct"], ["Kernels", 4, "n"], ["Mem ops", 5, "n"]);
  columns.push(["CPU time", 6, "ns"], ["Inst", 7, "n"]);
  if (data.hasGpu) columns.push(["Top kernel", 9, "name"]);
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
      if (column[2] === "name") th.className = "name";
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
        if (column[2] === "name") { td.className = "name"; td.title = row[column[1]]; }
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
    document.getElementById("summary").textContent = summary;
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
  window.addEventListener("resize", render);
})();
"""
