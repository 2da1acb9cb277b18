// What both pages share: reading the embedded data, formatting figures, notes, the tooltip and
// the sortable table. Everything a range name reaches is written with textContent, never as
// markup, so a name is always shown as the text it is.
var Page = (function () {
  "use strict";

  function read(id) { return JSON.parse(document.getElementById(id).textContent); }

  function dur(ns) {
    var a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(3) + " s";
    if (a >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
    if (a >= 1e3) return (ns / 1e3).toFixed(3) + " us";
    return Math.round(ns) + " ns";
  }
  function num(n) { return n.toLocaleString("en-US"); }

  // Names sort as people read them: "layer2" before "layer10", "Linear" beside "linear"; names
  // equal but for case keep one fixed order.
  var collator = new Intl.Collator("en", { numeric: true, sensitivity: "base" });
  function compareNames(a, b) { return collator.compare(a, b) || (a < b ? -1 : a > b ? 1 : 0); }

  // A note may quote a name or an option between backticks (Markdown's code span): shown as code.
  function note(text) {
    var li = document.createElement("li");
    var parts = text.split("`");
    if (parts.length % 2 === 0) parts[parts.length - 2] += "`" + parts.pop();  // an unmatched backtick stays text
    parts.forEach(function (part, i) {
      if (!part) return;
      if (i % 2) {
        var code = document.createElement("code");
        code.textContent = part;
        li.appendChild(code);
      } else {
        li.appendChild(document.createTextNode(part));
      }
    });
    return li;
  }
  function notes(list) {
    var element = document.getElementById("notes");
    element.textContent = "";
    list.forEach(function (text) { element.appendChild(note(text)); });
  }

  // The tooltip follows the pointer over elements that describe themselves. When the page is
  // redrawn under a still pointer (a click that zooms), what is under it now is asked again.
  var tip = null, pointer = null, describers = new WeakMap();
  function place(x, y) {
    tip.style.left = Math.max(4, Math.min(x + 14, window.innerWidth - tip.offsetWidth - 8)) + "px";
    var top = y + 16;
    if (top + tip.offsetHeight > window.innerHeight - 4) top = Math.max(4, y - tip.offsetHeight - 10);
    tip.style.top = top + "px";
  }
  function show(element, x, y) {
    tip.textContent = describers.get(element)();
    tip.hidden = false;
    tip.dataset.for = element.dataset.name || "";
    place(x, y);
  }
  function hide() { if (tip) tip.hidden = true; }
  function describe(element, describer) {
    if (!tip) tip = document.getElementById("tip");
    describers.set(element, describer);
    element.addEventListener("mousemove", function (event) {
      pointer = [event.clientX, event.clientY];
      show(element, event.clientX, event.clientY);
    });
    element.addEventListener("mouseleave", hide);
  }
  function recheck() {
    hide();
    if (!pointer) return;
    var element = document.elementFromPoint(pointer[0], pointer[1]);
    while (element && !describers.has(element)) element = element.parentElement;
    if (element) show(element, pointer[0], pointer[1]);
  }
  document.addEventListener("mousemove", function (event) { pointer = [event.clientX, event.clientY]; });

  // columns: [{label, get(row) -> value, show(value) -> text, name: "range"|"group"|... for a name
  // column, title(row) -> its cells' title (the text itself without one)}]
  // Name columns sort A to Z on the first click, figures largest first; order.index -1 keeps the
  // rows in the order given.
  function Table(columns, order, onRow) {
    this.columns = columns;
    this.order = order;
    this.onRow = onRow;
    this.rows = [];
  }
  Table.prototype.show = function (rows) {
    this.rows = rows;
    this.draw();
  };
  Table.prototype.draw = function () {
    var self = this, head = document.querySelector("#table thead"), body = document.querySelector("#table tbody");
    head.textContent = "";
    body.textContent = "";
    var tr = document.createElement("tr");
    this.columns.forEach(function (column, i) {
      var th = document.createElement("th");
      th.textContent = column.label + (self.order.index === i ? (self.order.down ? " \u25be" : " \u25b4") : "");
      if (column.name) th.className = "name " + column.name;
      th.dataset.column = column.label;
      th.addEventListener("click", function () {
        self.order = { index: i, down: self.order.index === i ? !self.order.down : !column.name };
        self.draw();
      });
      tr.appendChild(th);
    });
    head.appendChild(tr);
    var column = this.columns[this.order.index], down = this.order.down;
    var rows = !column ? this.rows : this.rows.slice().sort(function (a, b) {
      var x = column.get(a), y = column.get(b);
      if (x === null || y === null) return (x === null) - (y === null);  // blanks last either way
      var c = typeof x === "string" ? compareNames(x, y) : x - y;
      return down ? -c : c;
    });
    rows.forEach(function (row) {
      var line = document.createElement("tr");
      self.columns.forEach(function (column) {
        var td = document.createElement("td"), value = column.get(row);
        td.textContent = value === null ? "" : column.show ? column.show(value, row) : value;
        if (column.name) { td.className = "name " + column.name; td.title = column.title ? column.title(row) : td.textContent; }
        line.appendChild(td);
      });
      self.onRow(line, row);
      body.appendChild(line);
    });
  };

  function caption(text) { document.getElementById("table-caption").textContent = text; }

  return { read: read, dur: dur, num: num, compareNames: compareNames, notes: notes, describe: describe,
           recheck: recheck, hide: hide, Table: Table, caption: caption };
})();
