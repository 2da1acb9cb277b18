// diff --html: the tree of ranges, each coloured by its verdict and barred by its larger side's
// time, beside the table of changes.
(function () {
  "use strict";
  var data = Page.read("page-data");
  var dur = Page.dur;
  function pct(v) { return v === null ? "" : (v > 0 ? "+" : "") + v.toFixed(1) + "%"; }
  function signed(ns) { return (ns > 0 ? "+" : "") + dur(ns); }
  var VERDICTS = ["slower", "faster", "unclear", "same", "new", "gone"];

  function header() {
    document.getElementById("title").textContent = "autonvtx diff: " + data.base + "  \u2192  " + data.new;
    var summary = document.getElementById("summary");
    function part(text, className) {
      var span = document.createElement("span");
      span.textContent = text;
      if (className) span.className = className;
      summary.appendChild(span);
      return span;
    }
    if (data.domain) {
      part("all ranges in " + (/^domain \d+$/.test(data.domain) ? "" : "domain ") + data.domain, "domain").id = "domain";
    }
    part(data.test, "test").id = "test";
    var legend = document.getElementById("legend");
    Object.keys(data.counts).forEach(function (verdict) {
      part(data.counts[verdict] + " " + verdict, "count " + verdict);
    });
    VERDICTS.concat(Object.keys(data.counts).filter(function (v) { return VERDICTS.indexOf(v) < 0; }))
      .forEach(function (verdict) {
        var span = document.createElement("span");
        span.className = verdict;
        span.textContent = verdict;
        legend.appendChild(span);
      });
    Page.notes(data.notes);
  }

  function colour(r) {
    if (r.verdict === "new") return "rgb(60,110,220)";
    if (r.verdict === "gone") return "rgb(140,80,200)";
    if (r.verdict === "unclear") return "rgb(215,190,110)";
    if (r.verdict !== "slower" && r.verdict !== "faster") return "rgb(160,160,160)";
    var strength = Math.min(1, Math.abs(r.pct === null ? 100 : r.pct) / 50), c = Math.round(200 - 120 * strength);
    return r.verdict === "slower" ? "rgb(230," + c + "," + c + ")" : "rgb(" + c + ",190," + c + ")";
  }
  function describe(r) {
    return r.path.join(" > ") + "\n" + r.verdict + " (" + r.metric + " time): " + dur(r.base) + " \u2192 " + dur(r.new) +
      (r.pct === null ? "" : " " + pct(r.pct)) + (r.p === null ? "" : "\np = " + r.p.toPrecision(3)) + "\ninstances: " + r.inst;
  }

  // Rows arrive in tree order, each with its path; a node hangs under its parent's path.
  function tree() {
    var top = document.getElementById("tree"), byPath = new Map([["", top]]);
    var widest = Math.max(1, Math.max.apply(null, data.tree.map(function (r) { return Math.max(r.base, r.new); })));
    data.tree.forEach(function (r) {
      var parent = byPath.get(r.path.slice(0, -1).join("\u0000")) || top;
      var node = document.createElement("div");
      node.className = "node";
      var box = document.createElement("div");
      box.className = "box " + r.verdict;
      box.dataset.verdict = r.verdict;
      box.dataset.name = r.path[r.path.length - 1];
      box.dataset.path = r.path.join(" > ");
      box.dataset.change = String(r.change);
      Page.describe(box, function () { return describe(r); });
      var bar = document.createElement("span");
      bar.className = "bar";
      bar.style.width = (100 * Math.max(r.base, r.new) / widest).toFixed(3) + "px";
      bar.style.background = colour(r);
      var name = document.createElement("span");
      name.className = "name";
      name.textContent = r.path[r.path.length - 1];
      var change = document.createElement("span");
      change.className = "pct";
      change.textContent = pct(r.pct) || r.verdict;
      box.append(bar, name, change);
      node.appendChild(box);
      parent.appendChild(node);
      byPath.set(r.path.join("\u0000"), node);
    });
  }

  function field(key) { return function (r) { return r[key]; }; }
  // Under --tree a name may sit at several places: its cell's title is its path.
  var columns = [{ label: "Range", name: "range", get: field("name"),
                   title: function (r) { return r.path ? r.path.join(" > ") : r.name; } }];
  if (data.rows.some(function (r) { return r.group; })) columns.push({ label: "Group", name: "group", get: field("group") });
  columns.push(
    { label: "Verdict", get: field("verdict") },
    { label: "Metric", get: field("metric") },
    { label: "Base", get: field("base"), show: dur },
    { label: "New", get: field("new"), show: dur },
    { label: "Change", get: field("change"), show: signed },
    { label: "Change %", get: field("pct"), show: pct },
    { label: "p", get: field("p"), show: function (v) { return v.toPrecision(3); } },
    { label: "Inst", get: field("inst") }
  );
  // In the order the rows arrive (the command's --sort) until a column is clicked.
  var table = new Page.Table(columns, { index: -1, down: true }, function (line, r) {
    line.dataset.name = r.name;
    line.dataset.verdict = r.verdict;
    line.className = r.verdict;
  });

  header();
  tree();
  table.show(data.rows);
})();
