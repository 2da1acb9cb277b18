// report --html: the range tree as an icicle chart (click a box to zoom into it) above the table
// of ranges, which follows the zoom.
(function () {
  "use strict";
  var data = Page.read("page-data");
  var NAME = 0, GROUP = 1, GPU = 2, CPU = 3, KERNELS = 4, MEMOPS = 5, INST = 6, SPAN = 7, HIDDEN = 8, KIDS = 9;
  // Every row of the chart has room for two lines: a name, then time and share. The chart is as
  // tall as the tree is deep, and leaves the table at least TABLE_SHARE of the height below the
  // header, past which the chart scrolls.
  var ROW = 36, ROOT_ROW = ROW, LINE = 15, TABLE_SHARE = 0.36, MIN_TABLE = 150;
  var sizeBy = data.hasGpu ? data.sizeBy : "cpu";
  var chart = document.getElementById("chart");
  var dur = Page.dur, num = Page.num;

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

  // The boxes of `node`'s subtree, laid out in fractions of the chart's width (without recursion:
  // a recursion thousands of calls deep is a tree as deep).
  function place(top, width) {
    var boxes = [], depth = 0, stack = [[top, 0, 1, 0, null]];
    while (stack.length) {
      var item = stack.pop(), node = item[0], x = item[1], w = item[2], level = item[3];
      if (w * width < 0.5) continue;
      var link = { node: node, up: item[4] };  // the way back up, for the breadcrumbs of a zoom
      boxes.push([node, x, w, level, link]);
      depth = Math.max(depth, level);
      var kids = node[KIDS], total = Math.max(value(node), sum(kids, sizeBy === "gpu" ? GPU : CPU)) || 1, cx = x;
      for (var i = 0; i < kids.length; i++) {
        var cw = w * value(kids[i]) / total;
        stack.push([kids[i], cx, cw, level + 1, link]);
        cx += cw;
      }
    }
    return { boxes: boxes, depth: depth };
  }

  function label(box, node, px, height, whole) {
    if (px <= 28) return;
    var name = document.createElement("span");
    name.className = "n";
    name.textContent = node[NAME];
    box.appendChild(name);
    if (Math.floor((height - 4) / LINE) < 2 || px < 56) return;
    var figures = document.createElement("span");
    figures.className = "v";
    figures.textContent = dur(value(node)) + " \u00b7 " + (100 * value(node) / whole).toFixed(1) + "%";
    box.appendChild(figures);
  }

  function box(node, x, w, level, link, px, whole) {
    var element = document.createElement("div"), height = level ? ROW : ROOT_ROW;
    element.className = "box";
    element.style.left = (x * 100) + "%";
    element.style.width = (w * 100) + "%";
    element.style.top = (level ? ROOT_ROW + (level - 1) * ROW : 0) + "px";
    element.style.height = height + "px";
    element.style.background = colour(node);
    element.dataset.name = node[NAME];
    element.dataset.depth = String(level);
    element.dataset.value = String(value(node));
    element.dataset.kind = node === root ? "root" : (node[GROUP] ? "group" : "range");
    Page.describe(element, function () { return describe(node); });
    element.addEventListener("click", function () {
      if (node === focus[focus.length - 1]) return;
      var path = [];
      for (; link.up; link = link.up) path.unshift(link.node);
      focus = focus.concat(path);
      render();
    });
    label(element, node, px, height, whole);
    return element;
  }

  function fitChart(depth) {
    var main = document.querySelector("main"), bar = document.getElementById("bar");
    var free = main.clientHeight - bar.offsetHeight - 4 - 10;  // the bar's margin, main's gap
    var most = Math.max(ROOT_ROW + ROW + 2, Math.min(free - MIN_TABLE, free * (1 - TABLE_SHARE)));
    chart.style.height = Math.floor(Math.min(ROOT_ROW + depth * ROW + 2, most)) + "px";
  }

  function render() {
    chart.textContent = "";
    chart.scrollTop = 0;
    var top = focus[focus.length - 1];
    if (!value(top)) {
      fitChart(1);
      var empty = document.createElement("div");
      empty.className = "empty";
      empty.textContent = sizeBy === "gpu" ? "No GPU time inside these ranges: size the boxes by CPU time." : "No ranges.";
      chart.appendChild(empty);
    } else {
      // The width first without a scroll bar, then again if the tree's depth needs one.
      var laid = place(top, chart.clientWidth || 800);
      fitChart(laid.depth);
      var width = chart.clientWidth || 800;
      // Shares as the table gives them: of all GPU time, or of the CPU time of all ranges.
      var whole = sizeBy === "gpu" && data.totals.gpu_ns ? data.totals.gpu_ns : value(root);
      var fragment = document.createDocumentFragment();
      laid.boxes.forEach(function (item) {
        fragment.appendChild(box(item[0], item[1], item[2], item[3], item[4], item[2] * width, whole));
      });
      chart.appendChild(fragment);
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
    showTable();
    Page.recheck();
  }

  // The table: a row per range name (and group, under --by). Zoomed into a range, it holds the
  // ranges inside that subtree with their figures within it, a name nested in itself counted once
  // in its times (as the whole table counts it) and every instance in its count.
  var byKey = new Map();
  data.rows.forEach(function (row) { byKey.set(row[1] + "\u0000" + row[0], row); });

  function subtreeRows(top) {
    var found = new Map(), open = new Map(), hidden = 0;
    var group = "";
    for (var i = 1; i < focus.length; i++) if (focus[i][GROUP]) group = focus[i][NAME];
    var stack = [[top, group, false]];
    while (stack.length) {
      var item = stack.pop(), node = item[0];
      if (item[2]) { open.set(item[1], open.get(item[1]) - 1); continue; }
      var kids = node[KIDS], inner = item[1];
      hidden += node[HIDDEN];
      if (node[GROUP]) {
        inner = node === root ? "" : node[NAME];
      } else {
        var key = item[1] + "\u0000" + node[NAME], row = found.get(key);
        if (!row) {
          var whole = byKey.get(key);
          row = [node[NAME], item[1], 0, 0, 0, 0, 0, 0, 0, whole ? whole[9] : ""];
          found.set(key, row);
        }
        row[7] += node[INST];
        if (!open.get(key)) {
          row[2] += node[GPU];
          row[4] += node[KERNELS];
          row[5] += node[MEMOPS];
          row[6] += node[CPU];
          row[8] += node[SPAN];
        }
        open.set(key, (open.get(key) || 0) + 1);
        stack.push([node, key, true]);
      }
      for (var k = kids.length - 1; k >= 0; k--) stack.push([kids[k], inner, false]);
    }
    var rows = Array.from(found.values());
    rows.forEach(function (row) { row[3] = data.totals.gpu_ns ? 100 * row[2] / data.totals.gpu_ns : 0; });
    return { rows: rows, hidden: hidden };
  }

  var columns = [{ label: "Range", name: "range", get: function (r) { return r[0]; } }];
  if (data.rows.some(function (r) { return r[1]; })) columns.push({ label: "Group", name: "group", get: function (r) { return r[1]; } });
  function figure(label, index, show) { columns.push({ label: label, get: function (r) { return r[index]; }, show: show }); }
  if (data.hasGpu) {
    figure("GPU time", 2, dur);
    figure("GPU %", 3, function (v) { return v.toFixed(1) + "%"; });
    figure("Kernels", 4, num);
    figure("Mem ops", 5, num);
  }
  figure("CPU time", 6, dur);
  figure("Inst", 7, num);
  if (data.hasGpu) columns.push({ label: "Top kernel", name: "kernel", get: function (r) { return r[9]; } });
  var sortBy = data.hasGpu && sizeBy === "gpu" ? "GPU time" : "CPU time";
  var table = new Page.Table(columns, { index: columns.findIndex(function (c) { return c.label === sortBy; }), down: true },
    function (line, row) {
      line.dataset.name = row[0];
      line.addEventListener("mouseenter", function () { highlight(row[0], true); });
      line.addEventListener("mouseleave", function () { highlight(row[0], false); });
    });

  function showTable() {
    var top = focus[focus.length - 1];
    if (top === root) {
      Page.caption("");
      table.show(data.rows);
      return;
    }
    var inside = subtreeRows(top);
    var where = focus.slice(1).map(function (node) { return node[NAME]; }).join(" > ");
    Page.caption("Inside " + where + ": " + num(inside.rows.length) + " range name(s), times within it" +
      (inside.hidden ? "; " + num(inside.hidden) + " range(s) too small to draw are left out" : ""));
    table.show(inside.rows);
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
    Page.notes(data.notes);
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

  // Escape zooms out one level, as the breadcrumbs do.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape" || focus.length < 2) return;
    focus = focus.slice(0, -1);
    render();
  });

  header();
  render();
  var pending = false;
  window.addEventListener("resize", function () {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; render(); });
  });
})();
