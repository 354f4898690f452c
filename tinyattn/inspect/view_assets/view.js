/* tinyattn view: the page's script (inlined into every page by tinyattn/inspect/view.py).
 *
 * Reads the numbers from <script id="tinyattn-data"> and draws two tabs:
 *  - Graph: one SVG row per node of the backward graph (#k, the numbering of every inspect
 *    tool), grouped by module (groups collapse), the parameters it reaches, and an arc per
 *    input edge; selecting a node or a parameter fills the side panel.
 *  - Training: per attention layer and head, P / dP / dS of the recorded steps (step slider),
 *    the norms per head, the softmax gain by query position, and the norms across steps.
 * No library, no network: plain DOM, inline SVG and <canvas> heatmaps.
 * window.tinyattnView exposes the state and a few actions (select, toggle, setStep) for tests.
 */
(function () {
  "use strict";
  var started = performance.now();
  var errors = [];
  window.addEventListener("error", function (event) { errors.push(String(event.message)); });

  var D = JSON.parse(document.getElementById("tinyattn-data").textContent);
  var app = document.getElementById("app");
  var SVGNS = "http://www.w3.org/2000/svg";
  var ROW = 26, GROUP_ROW = 22, GAP = 3, INDENT = 16, LEFT = 10, TOP = 10, BOX_W = 340;
  var HEAD_COLORS = ["#1c7ed6", "#f76707", "#37b24d", "#e03131", "#7048e8", "#9c6644",
                     "#d6336c", "#495057", "#1098ad", "#74b816", "#f59f00", "#3b5bdb"];
  var state = { tab: "graph", selected: null, collapsed: {}, step: 0, kind: "dS",
                pathNodes: null, pathLeaf: null };
  var api = { data: D, state: state, errors: errors, renderMs: null, lastSelectMs: null };
  window.tinyattnView = api;

  // ---- small helpers -------------------------------------------------------------------------
  function num(x) {
    if (x === null || x === undefined) { return null; }
    return typeof x === "string" ? parseFloat(x) : x;
  }
  function fmt(x) {
    x = num(x);
    if (x === null) { return "–"; }
    if (isNaN(x)) { return "NaN"; }
    if (!isFinite(x)) { return x > 0 ? "inf" : "-inf"; }
    if (x === 0) { return "0"; }
    return x.toPrecision(6);
  }
  function fmtShort(x) {
    x = num(x);
    if (x === null) { return "–"; }
    if (!isFinite(x)) { return String(x); }
    if (x === 0) { return "0"; }
    return x.toExponential(2);
  }
  function fmtGain(x) { x = num(x); return x === 0 ? "0" : fmtShort(x); }
  function fmtBytes(n) {
    if (n >= 1048576) { return (n / 1048576).toFixed(2) + " MiB"; }
    if (n >= 1024) { return (n / 1024).toFixed(1) + " KiB"; }
    return n + " B";
  }
  function shape(s) { return "(" + s.join(", ") + ")"; }
  function esc(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
      .replace(/"/g, "&quot;");
  }
  function rich(text) {  // escaped, ``code`` spans as <code>
    return esc(text).replace(/``([^`]+)``/g, "<code>$1</code>");
  }
  function svgEl(tag, attrs, parent) {
    var node = document.createElementNS(SVGNS, tag);
    for (var key in attrs) { if (attrs.hasOwnProperty(key)) { node.setAttribute(key, attrs[key]); } }
    if (parent) { parent.appendChild(node); }
    return node;
  }
  function svgText(parent, x, y, text, cls) {
    var t = svgEl("text", { x: x, y: y }, parent);
    if (cls) { t.setAttribute("class", cls); }
    t.textContent = text;
    return t;
  }
  function cut(text, chars) { return text.length <= chars ? text : text.slice(0, chars - 1) + "…"; }

  // ---- colours and heatmaps ------------------------------------------------------------------
  var VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 73, 137], [49, 104, 142], [38, 130, 142],
                 [31, 158, 137], [53, 183, 121], [110, 206, 88], [181, 222, 43], [253, 231, 37]];
  function viridis(t) {
    t = Math.max(0, Math.min(1, t)) * (VIRIDIS.length - 1);
    var i = Math.min(VIRIDIS.length - 2, Math.floor(t)), f = t - i, a = VIRIDIS[i], b = VIRIDIS[i + 1];
    return [a[0] + f * (b[0] - a[0]), a[1] + f * (b[1] - a[1]), a[2] + f * (b[2] - a[2])];
  }
  function diverging(t) {  // 0 blue, 0.5 white, 1 red
    var blue = [33, 102, 172], red = [178, 24, 43], white = [247, 247, 247], a, f;
    if (t < 0.5) { a = blue; f = t / 0.5; return [a[0] + f * (white[0] - a[0]), a[1] + f * (white[1] - a[1]), a[2] + f * (white[2] - a[2])]; }
    a = red; f = (1 - t) / 0.5;
    return [a[0] + f * (white[0] - a[0]), a[1] + f * (white[1] - a[1]), a[2] + f * (white[2] - a[2])];
  }
  function rgb(c) { return "rgb(" + Math.round(c[0]) + "," + Math.round(c[1]) + "," + Math.round(c[2]) + ")"; }
  var decoded = new WeakMap();
  function levels(map) {
    var known = decoded.get(map);
    if (known) { return known; }
    var raw = atob(map.bytes), out = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) { out[i] = raw.charCodeAt(i); }
    decoded.set(map, out);
    return out;
  }
  function cellValue(map, i) {
    if (map.values) { return map.values[i]; }
    return map.lo + levels(map)[i] / 255 * (map.hi - map.lo);
  }
  function drawHeat(canvas, map, side) {
    var bytes = levels(map), ctx = canvas.getContext("2d");
    canvas.width = map.cols; canvas.height = map.rows;
    var scale = Math.max(1, Math.floor(side / Math.max(map.rows, map.cols)));
    canvas.style.width = (map.cols * scale) + "px"; canvas.style.height = (map.rows * scale) + "px";
    var image = ctx.createImageData(map.cols, map.rows);
    for (var i = 0; i < bytes.length; i++) {
      var t = bytes[i] / 255, c = map.signed ? diverging(t) : viridis(t);
      image.data[4 * i] = c[0]; image.data[4 * i + 1] = c[1]; image.data[4 * i + 2] = c[2];
      image.data[4 * i + 3] = 255;
    }
    ctx.putImageData(image, 0, 0);
    canvas._map = map;
  }
  function heatFigure(map, caption, cls, side) {
    if (!map) { return null; }
    var figure = document.createElement("figure");
    var canvas = document.createElement("canvas");
    canvas.className = "heat" + (cls ? " " + cls : "");
    drawHeat(canvas, map, side || 150);
    figure.appendChild(canvas);
    var text = document.createElement("figcaption");
    var pooled = map.rows !== map.source[0] || map.cols !== map.source[1];
    text.innerHTML = esc(caption) + "<br>" + esc("slice " + map.slice + " of " + map.shape +
      (pooled ? ", pooled to " + map.rows + "×" + map.cols : "")) + "<br>" +
      esc((map.signed ? "±" + fmtShort(map.hi) : fmtShort(map.lo) + " … " + fmtShort(map.hi)) +
      (map.nonfinite ? ", " + map.nonfinite + " non-finite drawn as 0" : ""));
    figure.appendChild(text);
    return figure;
  }
  var tooltip = document.createElement("div");
  tooltip.id = "tooltip";
  document.body.appendChild(tooltip);
  document.addEventListener("mousemove", function (event) {
    var canvas = event.target;
    if (!canvas || canvas.tagName !== "CANVAS" || !canvas._map) { tooltip.style.display = "none"; return; }
    var map = canvas._map, box = canvas.getBoundingClientRect();
    var col = Math.floor((event.clientX - box.left) / box.width * map.cols);
    var row = Math.floor((event.clientY - box.top) / box.height * map.rows);
    if (row < 0 || col < 0 || row >= map.rows || col >= map.cols) { tooltip.style.display = "none"; return; }
    var exact = !!map.values;
    tooltip.textContent = "row " + row + ", col " + col + ": " + (exact ? "" : "≈ ") +
      fmt(cellValue(map, row * map.cols + col));
    tooltip.style.left = (event.clientX + 12) + "px"; tooltip.style.top = (event.clientY + 12) + "px";
    tooltip.style.display = "block";
  });

  // ---- page frame ----------------------------------------------------------------------------
  var summary = D.summary || {};
  function headerHtml() {
    var parts = ["<h1>" + esc(D.title) + "</h1>"];
    if (D.loss !== null && D.loss !== undefined) { parts.push('<span class="fact">loss <b data-field="loss">' + fmt(D.loss) + "</b></span>"); }
    if (D.step !== null && D.step !== undefined) { parts.push('<span class="fact">backward call <b>' + D.step + "</b></span>"); }
    if (D.nodes.length) {
      parts.push('<span class="fact"><b data-field="node-count">' + D.nodes.length + "</b> nodes, <b>" + D.leaves.length + "</b> parameters</span>");
      var check = summary.check;
      if (check) {
        var cls = check.failed ? "FAIL" : "ok";
        parts.push('<span class="fact" title="' + esc(check.text) + '">finite-difference check <span class="badge ' + cls + '">' +
          (check.failed ? check.failed + " failed" : "all agree") + "</span>" +
          (check.skipped ? " (" + check.skipped + " skipped)" : "") + (check.kinks ? " (" + check.kinks + " at a kink)" : "") + "</span>");
      } else if (summary.check_error) {
        parts.push('<span class="fact">check could not run: ' + esc(summary.check_error) + "</span>");
      }
      if (summary.memory) {
        parts.push('<span class="fact" title="' + esc(summary.memory.text) + '">saved for backward <b>' +
          fmtBytes(summary.memory.distinct_bytes) + "</b> (T²: " + fmtBytes(summary.memory.quadratic_bytes) + ")</span>");
      }
    }
    return parts.join("");
  }
  app.innerHTML = "<header>" + headerHtml() + "</header>" +
    '<nav><button data-tab="graph">Graph</button><button data-tab="training">Training</button>' +
    '<span class="spacer"></span><button class="tool" data-action="collapse">collapse all</button>' +
    '<button class="tool" data-action="expand">expand all</button></nav>' +
    '<section class="tab" id="graph-tab"><div id="graph-pane"></div><aside id="panel"></aside></section>' +
    '<section class="tab" id="training-tab"></section>';
  var pane = document.getElementById("graph-pane");
  var panel = document.getElementById("panel");
  var trainingTab = document.getElementById("training-tab");

  function showTab(name) {
    state.tab = name;
    var buttons = app.querySelectorAll("nav button[data-tab]");
    for (var i = 0; i < buttons.length; i++) { buttons[i].classList.toggle("on", buttons[i].dataset.tab === name); }
    document.getElementById("graph-tab").classList.toggle("on", name === "graph");
    var tools = app.querySelectorAll("nav .tool");
    for (var j = 0; j < tools.length; j++) { tools[j].style.display = name === "graph" ? "" : "none"; }
    trainingTab.classList.toggle("on", name === "training");
  }
  app.querySelector("nav").addEventListener("click", function (event) {
    var button = event.target.closest("button");
    if (!button) { return; }
    if (button.dataset.tab) { showTab(button.dataset.tab); }
    if (button.dataset.action === "collapse") { setAllGroups(true); }
    if (button.dataset.action === "expand") { setAllGroups(false); }
  });

  // ---- the graph -----------------------------------------------------------------------------
  var entries = [], byKey = {}, groupMembers = {};
  function walk(items, depth, ancestors) {
    items.forEach(function (item) {
      var entry;
      if (item.g !== undefined) {
        entry = { key: "g:" + item.g, type: "group", gid: item.g, depth: depth, ancestors: ancestors };
        entries.push(entry);
        groupMembers[item.g] = [];
        walk(item.items, depth + 1, ancestors.concat([item.g]));
      } else if (item.n !== undefined) {
        entry = { key: "n" + item.n, type: "node", index: item.n, depth: depth, ancestors: ancestors };
        entries.push(entry);
      } else {
        entry = { key: D.leaves[item.p].id, type: "leaf", leaf: item.p, depth: depth, ancestors: ancestors };
        entries.push(entry);
      }
      byKey[entry.key] = entry;
      ancestors.forEach(function (gid) { groupMembers[gid].push(entry); });
    });
  }
  walk(D.tree, 0, []);

  var edges = [];
  D.nodes.forEach(function (node) {
    node.inputs.forEach(function (input) {
      if (input.from) { edges.push({ from: input.from, to: "n" + node.index, slot: input.slot }); }
    });
  });
  var gradNorms = D.nodes.map(function (node) {
    var g = node.outputs[0] && node.outputs[0].grad;
    return g ? num(g.norm) : null;
  }).filter(function (x) { return x !== null && isFinite(x) && x > 0; }).map(Math.log);
  var logLow = gradNorms.length ? Math.min.apply(null, gradNorms) : 0;
  var logHigh = gradNorms.length ? Math.max.apply(null, gradNorms) : 1;

  function shortName(leaf, entry) {  // "weight" inside the group "transformer.h.0.attn.c_attn"
    var gid = entry.ancestors[entry.ancestors.length - 1];
    var path = gid ? gid.split("/").slice(1).join("/") : "";
    return path && leaf.name.indexOf(path + ".") === 0 ? leaf.name.slice(path.length + 1) : leaf.name;
  }
  var svg = null, gEdges = null, gBoxes = null;
  function buildGraph() {
    if (!D.nodes.length) {
      pane.innerHTML = '<p class="loading">No graph was captured (a recording needs <code>graph_step=</code>); see the Training tab.</p>';
      return;
    }
    svg = svgEl("svg", { id: "graph" });
    var defs = svgEl("defs", {}, svg);
    var marker = svgEl("marker", { id: "arrow", viewBox: "0 0 8 8", refX: "7", refY: "4",
                                    markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" }, defs);
    svgEl("path", { d: "M0,0 L8,4 L0,8 z", fill: "#8a93a3" }, marker);
    gBoxes = svgEl("g", { "class": "boxes" }, svg);
    gEdges = svgEl("g", { "class": "edges" }, svg);
    var gRows = svgEl("g", { "class": "rows" }, svg);
    entries.forEach(function (entry) {
      var x = LEFT + entry.depth * INDENT, width = BOX_W - entry.depth * INDENT, g;
      if (entry.type === "group") {
        var info = D.groups[entry.gid] || { label: entry.gid };
        g = svgEl("g", { "class": "group-row", "data-group": entry.gid }, gRows);
        svgEl("rect", { "class": "ghead", width: width, height: GROUP_ROW - 2, rx: 3 }, g);
        entry.label = svgText(g, 8, (GROUP_ROW - 2) / 2, "", "");
        var count = groupMembers[entry.gid].filter(function (e) { return e.type === "node"; }).length;
        entry.text = cut(info.label + (info["class"] ? " · " + info["class"] : ""), Math.floor((width - 70) / 7)) +
          "  (" + count + " op" + (count === 1 ? "" : "s") + ")";
        entry.box = svgEl("rect", { "class": "gbox", rx: 4 }, gBoxes);
      } else if (entry.type === "node") {
        var node = D.nodes[entry.index];
        var out = node.outputs[0] || {};
        g = svgEl("g", { "class": "node", "data-index": node.index, "data-key": entry.key }, gRows);
        svgEl("title", {}, g).textContent = "#" + node.index + " " + node.op + " → " + node.label + " " +
          shape(out.shape || []) + (node.scope.length ? "\nin " + node.scope[node.scope.length - 1] : "") +
          (node.check ? "\ncheck: " + node.check.status : "");
        svgEl("rect", { "class": "box", width: width, height: ROW - 4, rx: 4 }, g);
        var status = node.check ? node.check.status : "none";
        svgEl("rect", { "class": "stripe " + status, x: 0, y: 0, width: 5, height: ROW - 4, rx: 2 }, g);
        var title = svgText(g, 11, (ROW - 4) / 2, "", "");
        var opText = document.createElementNS(SVGNS, "tspan");
        opText.setAttribute("class", "op"); opText.textContent = "#" + node.index + " " + node.op;
        title.appendChild(opText);
        var shapeText = document.createElementNS(SVGNS, "tspan");
        shapeText.setAttribute("class", "shape");
        shapeText.textContent = " " + cut(shape(out.shape || []), Math.max(6, Math.floor((width - 130) / 6.5) - node.op.length));
        title.appendChild(shapeText);
        var grad = out.grad, bad = (out.value && (out.value.nan || out.value.inf)) || (grad && (grad.nan || grad.inf));
        if (bad) { svgText(g, width - 104, (ROW - 4) / 2, "NaN/inf", "warn"); }
        if (node.hooks && node.hooks.length) { svgText(g, width - (bad ? 150 : 104), (ROW - 4) / 2, "⚓", "shape"); }
        svgText(g, width - 18, (ROW - 4) / 2, grad ? "|g| " + fmtShort(grad.norm) : "no grad", "gnorm")
          .setAttribute("text-anchor", "end");
        var chip = grad && num(grad.norm) > 0 && isFinite(num(grad.norm)) ?
          rgb(viridis((Math.log(num(grad.norm)) - logLow) / Math.max(1e-12, logHigh - logLow))) : "#e9ecef";
        svgEl("rect", { x: width - 14, y: 5, width: 9, height: ROW - 14, rx: 2, fill: chip }, g);
      } else {
        var leaf = D.leaves[entry.leaf];
        g = svgEl("g", { "class": "leaf", "data-leaf": leaf.id, "data-key": entry.key }, gRows);
        svgEl("title", {}, g).textContent = leaf.name + " " + shape(leaf.shape);
        svgEl("rect", { "class": "box", width: width, height: ROW - 4, rx: 11 }, g);
        svgText(g, 12, (ROW - 4) / 2, cut(shortName(leaf, entry) + " " + shape(leaf.shape), Math.floor((width - 90) / 6.8)), "");
        svgText(g, width - 10, (ROW - 4) / 2, leaf.grad ? "|g| " + fmtShort(leaf.grad.norm) : "no grad", "gnorm")
          .setAttribute("text-anchor", "end");
      }
      entry.el = g;
      entry.x = x;
    });
    pane.appendChild(svg);
    svg.addEventListener("click", function (event) {
      var target = event.target.closest("g.node, g.leaf, g.group-row");
      if (!target) { return; }
      if (target.classList.contains("group-row")) { toggle(target.dataset.group); return; }
      select(target.dataset.key);
    });
  }

  var positions = {};
  function anchorOf(key) {
    var entry = byKey[key];
    if (!entry) { return null; }
    for (var i = 0; i < entry.ancestors.length; i++) {
      if (state.collapsed[entry.ancestors[i]]) { return "g:" + entry.ancestors[i]; }
    }
    return key;
  }
  function layout() {
    if (!svg) { return; }
    var y = TOP;
    positions = {};
    entries.forEach(function (entry) {
      if (anchorOf(entry.key) !== entry.key) {
        entry.el.style.display = "none";
        if (entry.box) { entry.box.style.display = "none"; }
        return;
      }
      var height = entry.type === "group" ? GROUP_ROW : ROW;
      entry.el.style.display = "";
      entry.el.setAttribute("transform", "translate(" + entry.x + "," + y + ")");
      positions[entry.key] = { top: y, mid: y + (height - (entry.type === "group" ? 2 : 4)) / 2, bottom: y + height };
      if (entry.type === "group") {
        var collapsed = !!state.collapsed[entry.gid];
        entry.el.classList.toggle("collapsed", collapsed);
        entry.label.textContent = (collapsed ? "▸ " : "▾ ") + entry.text;
      }
      y += height + GAP;
    });
    entries.forEach(function (entry) {  // each open group's box spans its visible members
      if (entry.type !== "group" || !positions[entry.key]) { return; }
      if (state.collapsed[entry.gid]) { entry.box.style.display = "none"; return; }
      var bottom = positions[entry.key].bottom;
      groupMembers[entry.gid].forEach(function (member) {
        if (positions[member.key]) { bottom = Math.max(bottom, positions[member.key].bottom); }
      });
      entry.box.style.display = "";
      entry.box.setAttribute("x", entry.x - 4); entry.box.setAttribute("y", positions[entry.key].top - 2);
      entry.box.setAttribute("width", BOX_W - entry.depth * INDENT + 8);
      entry.box.setAttribute("height", bottom - positions[entry.key].top + 2);
    });
    var reach = drawEdges();
    svg.setAttribute("height", y + TOP);
    svg.setAttribute("width", LEFT + BOX_W + reach + 24);
  }
  function drawEdges() {
    while (gEdges.firstChild) { gEdges.removeChild(gEdges.firstChild); }
    var seen = {}, x0 = LEFT + BOX_W + 2, widest = 0;
    var selected = state.selected, onPath = state.pathNodes;
    gEdges.classList.toggle("dimmed", !!selected);
    edges.forEach(function (edge) {
      var from = anchorOf(edge.from), to = anchorOf(edge.to);
      if (!from || !to || from === to || !positions[from] || !positions[to]) { return; }
      var id = from + ">" + to;
      if (seen[id]) { return; }
      seen[id] = true;
      var y1 = positions[from].mid, y2 = positions[to].mid, dy = Math.abs(y1 - y2);
      var reach = 10 + Math.min(280, Math.sqrt(dy) * 7);
      widest = Math.max(widest, reach);
      var cls = "edge";
      if (selected && (edge.from === selected || edge.to === selected)) { cls += " sel"; }
      if (onPath && onPath[edge.to] && (onPath[edge.from] || edge.from === state.pathLeaf)) { cls += " path"; }
      svgEl("path", { "class": cls, "data-from": edge.from, "data-to": edge.to, "marker-end": "url(#arrow)",
                      d: "M" + x0 + "," + y1 + " C" + (x0 + reach) + "," + y1 + " " + (x0 + reach) + "," + y2 +
                         " " + (x0 + 6) + "," + y2 }, gEdges);
    });
    return widest;
  }
  function toggle(gid) {
    state.collapsed[gid] = !state.collapsed[gid];
    layout();
  }
  function setAllGroups(collapsed) {
    entries.forEach(function (entry) {
      if (entry.type === "group") { state.collapsed[entry.gid] = collapsed && entry.depth > 0; }
    });
    layout();
  }
  api.toggle = toggle;

  // ---- selection and the side panel -----------------------------------------------------------
  function statsTable(rows, value, grad, prefix) {
    var names = [["norm", "norm"], ["min", "min"], ["max", "max"], ["mean", "mean"],
                 ["zero_fraction", "fraction zero"], ["nan", "NaN"], ["inf", "inf"]];
    var html = '<table class="stats"><tr><th></th><th>value</th><th>gradient</th></tr>';
    names.forEach(function (pair) {
      html += "<tr><th>" + pair[1] + "</th>";
      [["value", value], ["grad", grad]].forEach(function (side) {
        var stats = side[1], field = prefix + side[0] + "-" + pair[0].replace("_", "-");
        if (!stats) { html += '<td class="num empty" data-field="' + field + '">–</td>'; return; }
        var v = stats[pair[0]];
        html += '<td class="num" data-field="' + field + '" data-value="' + esc(v === null ? "" : v) + '">' +
          (pair[0] === "nan" || pair[0] === "inf" ? String(v) : fmt(v)) + "</td>";
      });
      html += "</tr>";
    });
    return html + "</table>";
  }
  function link(key) {
    if (!key) { return "constant"; }
    if (key.charAt(0) === "n") { return '<a data-goto="' + key + '">#' + key.slice(1) + "</a>"; }
    var leaf = D.leaves.filter(function (l) { return l.id === key; })[0];
    return '<a data-goto="' + key + '">' + esc(leaf ? leaf.name : key) + "</a>";
  }
  function siteOf(name) {
    var steps = D.attention.steps, step = null;
    for (var i = 0; i < steps.length; i++) { if (steps[i].step === D.attention.graph_step) { step = steps[i]; } }
    if (!step && steps.length === 1) { step = steps[0]; }
    if (!step) { return null; }
    return step.sites.filter(function (s) { return s.name === name; })[0] || null;
  }
  function nodePanel(node) {
    var html = "<h2>#" + node.index + " " + esc(node.op) + ' <span class="where">→ ' + esc(node.label) + "</span></h2>";
    if (node.scope.length) {
      var gid = node.scope[node.scope.length - 1], info = D.groups[gid];
      html += '<div class="where">in <b>' + esc(gid.split("/").slice(1).join("/") || gid) + "</b>" +
        (info && info["class"] ? " · " + esc(info["class"]) : "") + "</div>";
    }
    (node.hooks || []).forEach(function (hook) {
      html += '<span class="badge hook">hook point ' + esc(hook.split("/").pop()) + "</span> ";
    });
    html += "<h3>Forward (the op's docstring)</h3><div class=\"doc\">" + rich(node.doc) + "</div>";
    var rules = node.inputs.filter(function (input) { return input.rule; });
    html += "<h3>Backward (the op's formula)</h3>";
    if (rules.length) {
      html += '<div class="formula" data-field="rules">' + rules.map(function (input) {
        return esc(input.symbol + " = " + input.rule);
      }).join("\n") + "</div>";
    } else {
      html += '<p class="empty">no input needs a gradient</p>';
    }
    html += '<h3>Inputs</h3><table><tr><th>argument</th><th>name</th><th>shape</th><th>dtype</th><th>from</th></tr>';
    node.inputs.forEach(function (input) {
      var argument = esc(input.param || input.slot);
      if (input.kind === "option") {
        html += "<tr><td>" + argument + '</td><td colspan="4" class="mono">' + esc(input.name) + "</td></tr>";
      } else {
        html += "<tr><td>" + argument + "</td><td>" + esc(input.name) + "</td><td>" + shape(input.shape) + "</td><td>" +
          esc(input.dtype) + "</td><td>" + link(input.from) + (input.kept ? "" : ' <span class="where">(value not kept)</span>') + "</td></tr>";
      }
    });
    html += "</table>";
    node.outputs.forEach(function (out, i) {
      html += "<h3>Output" + (node.outputs.length > 1 ? " " + i : "") + " " + shape(out.shape) + " " + esc(out.dtype || "") +
        " — value, and the gradient arriving at it</h3>" + statsTable(null, out.value, out.grad, i ? "out" + i + "-" : "") +
        '<div class="maps" data-maps="out' + i + '"></div>';
    });
    if (node.attention) {
      html += "<h3>" + esc(node.attention) + ": P, dP, dS per head (first sequence; rows are queries, columns keys)</h3>" +
        '<div class="maps" data-maps="attention"></div>';
    }
    html += "<h3>Finite-difference check</h3>";
    if (node.check) {
      html += '<span class="badge ' + esc(node.check.status) + '" data-field="check-status">' + esc(node.check.status) +
        '</span> <table><tr><th>max abs error</th><td class="num" data-field="check-abs" data-value="' + esc(node.check.max_abs_error === null ? "" : node.check.max_abs_error) + '">' + fmt(node.check.max_abs_error) +
        '</td></tr><tr><th>max rel error</th><td class="num" data-field="check-rel" data-value="' + esc(node.check.max_rel_error === null ? "" : node.check.max_rel_error) + '">' + fmt(node.check.max_rel_error) +
        "</td></tr><tr><th>inputs checked</th><td>" + (node.check.checked.join(", ") || "–") + "</td></tr></table>" +
        (node.check.note ? '<div class="where">' + esc(node.check.note) + "</div>" : "");
    } else {
      html += '<p class="empty">not checked</p>';
    }
    html += '<h3>Saved for backward</h3><div><b data-field="memory-bytes" data-value="' + node.memory.bytes + '">' +
      fmtBytes(node.memory.bytes) + "</b></div>";
    if (node.memory.items.length) {
      html += "<table><tr><th>item</th><th>shape</th><th>dtype</th><th>bytes</th><th></th></tr>";
      node.memory.items.forEach(function (item) {
        html += "<tr><td class=\"mono\">" + esc(item.item) + "</td><td>" + shape(item.shape) + "</td><td>" + esc(item.dtype) +
          '</td><td class="num">' + item.nbytes.toLocaleString("en") + "</td><td>" + (item.quadratic ? "T²" : "") +
          (item.shared_with ? " shares " + esc(item.shared_with) : "") + "</td></tr>";
      });
      html += "</table>";
    }
    panel.innerHTML = html;
    node.outputs.forEach(function (out, i) {
      var box = panel.querySelector('[data-maps="out' + i + '"]');
      [heatFigure(out.value_map, "value", "value-map"), heatFigure(out.grad_map, "gradient", "grad-map")]
        .forEach(function (f) { if (f) { box.appendChild(f); } });
    });
    if (node.attention) {
      var site = siteOf(node.attention), holder = panel.querySelector('[data-maps="attention"]');
      if (site) {
        for (var h = 0; h < site.shape[1]; h++) {
          ["P", "dP", "dS"].forEach(function (kind) {
            var f = heatFigure(site.maps[kind][h], "head " + h + " " + kind + " (|" + kind + "| " + fmtShort(site.norms[kind][h]) + ")", "attn-panel", 110);
            if (f) { holder.appendChild(f); }
          });
        }
      }
    }
  }
  function leafPanel(leaf) {
    var html = "<h2>" + esc(leaf.name) + '</h2><div class="where">parameter ' + shape(leaf.shape) + " " + esc(leaf.dtype) +
      ", used by " + leaf.consumers.map(function (c) { return link("n" + c[0]); }).join(", ") + "</div>" +
      "<h3>Value, and its gradient</h3>" + statsTable(null, leaf.value, leaf.grad, "") + '<div class="maps" data-maps="leaf"></div>';
    html += "<h3>The gradient's path from the output (explain)</h3>";
    if (leaf.explain && leaf.explain.formula) {
      html += '<div class="formula" data-field="explain-formula">' + esc(leaf.explain.formula) + "</div>" +
        '<div class="where">through ' + (leaf.explain.chain.map(function (k) { return link("n" + k); }).join(", ") || "–") +
        " · " + leaf.explain.paths + " path" + (leaf.explain.paths === 1 ? "" : "s") + " from the output · " +
        leaf.explain.nodes.length + " nodes highlighted</div><h3>Derivation, output side first</h3><div class=\"formula\">" +
        leaf.explain.steps.map(esc).join("\n") + "</div>";
    } else {
      html += '<p class="empty">' + esc(leaf.explain ? leaf.explain.error : "not explained") + "</p>";
    }
    panel.innerHTML = html;
    var box = panel.querySelector('[data-maps="leaf"]');
    [heatFigure(leaf.value_map, "value", "value-map"), heatFigure(leaf.grad_map, "gradient", "grad-map")]
      .forEach(function (f) { if (f) { box.appendChild(f); } });
  }
  function select(key) {
    var begin = performance.now();
    var entry = byKey[key];
    if (!entry || entry.type === "group") { return; }
    if (anchorOf(key) !== key) {  // open the groups that hide it
      entry.ancestors.forEach(function (gid) { state.collapsed[gid] = false; });
    }
    state.selected = key;
    state.pathNodes = null; state.pathLeaf = null;
    if (entry.type === "leaf") {
      var leaf = D.leaves[entry.leaf];
      if (leaf.explain && leaf.explain.nodes) {
        state.pathNodes = {};
        leaf.explain.nodes.forEach(function (k) { state.pathNodes["n" + k] = true; });
        state.pathLeaf = key;
      }
      leafPanel(leaf);
    } else {
      nodePanel(D.nodes[entry.index]);
    }
    entries.forEach(function (e) {
      if (e.type === "group") { return; }
      e.el.classList.toggle("selected", e.key === key);
      e.el.classList.toggle("onpath", !!(state.pathNodes && (state.pathNodes[e.key] || e.key === state.pathLeaf)));
    });
    layout();
    panel.scrollTop = 0;
    void panel.offsetHeight;  // include the layout in the measured time
    api.lastSelectMs = performance.now() - begin;
  }
  api.select = select;
  panel.addEventListener("click", function (event) {
    var a = event.target.closest("a[data-goto]");
    if (!a) { return; }
    event.preventDefault();
    select(a.dataset.goto);
    var entry = byKey[a.dataset.goto];
    if (entry && entry.el.scrollIntoView) { entry.el.scrollIntoView({ block: "center" }); }
  });

  // ---- the training view ---------------------------------------------------------------------
  function chart(opts) {
    var width = opts.width || 300, height = opts.height || 150, pad = { l: 44, r: 8, t: 16, b: 30 };
    var box = svgEl("svg", { "class": "chart", width: width, height: height });
    var xs = opts.x, low = opts.yLow, high = opts.yHigh;
    if (low === undefined || high === undefined) {
      var all = [];
      opts.series.forEach(function (s) { s.forEach(function (v) { if (v !== null && isFinite(v)) { all.push(v); } }); });
      low = all.length ? Math.min.apply(null, all) : 0; high = all.length ? Math.max.apply(null, all) : 1;
      if (opts.fromZero) { low = Math.min(0, low); }
    }
    if (high <= low) { high = low + 1; }
    var x0 = xs[0], x1 = xs[xs.length - 1] === x0 ? x0 + 1 : xs[xs.length - 1];
    function px(x) { return pad.l + (x - x0) / (x1 - x0) * (width - pad.l - pad.r); }
    function py(y) { return height - pad.b - (y - low) / (high - low) * (height - pad.t - pad.b); }
    svgEl("line", { "class": "axis", x1: pad.l, y1: height - pad.b, x2: width - pad.r, y2: height - pad.b }, box);
    svgEl("line", { "class": "axis", x1: pad.l, y1: pad.t, x2: pad.l, y2: height - pad.b }, box);
    svgText(box, pad.l - 3, py(high), fmtShort(high), "").setAttribute("text-anchor", "end");
    svgText(box, pad.l - 3, py(low), fmtShort(low), "").setAttribute("text-anchor", "end");
    svgText(box, pad.l, height - pad.b + 10, String(x0), "");
    svgText(box, width - pad.r, height - pad.b + 10, String(xs[xs.length - 1]), "").setAttribute("text-anchor", "end");
    svgText(box, (pad.l + width - pad.r) / 2, height - 4, opts.xLabel, "").setAttribute("text-anchor", "middle");
    svgText(box, pad.l, 9, opts.yLabel, "");
    if (opts.marker !== undefined && opts.marker !== null) {
      svgEl("line", { "class": "marker", x1: px(opts.marker), x2: px(opts.marker), y1: pad.t, y2: height - pad.b }, box);
    }
    opts.series.forEach(function (s, i) {
      var points = [];
      s.forEach(function (v, j) { if (v !== null && isFinite(v)) { points.push(px(xs[j]).toFixed(1) + "," + py(v).toFixed(1)); } });
      if (points.length === 1) { points.push(points[0]); }
      var line = svgEl("polyline", { "class": "series", points: points.join(" "), stroke: HEAD_COLORS[i % HEAD_COLORS.length] }, box);
      line.setAttribute("data-series", String(i));
      if (opts.dots && points.length) {
        points.forEach(function (p) { var xy = p.split(","); svgEl("circle", { cx: xy[0], cy: xy[1], r: 1.8, fill: HEAD_COLORS[i % HEAD_COLORS.length] }, box); });
      }
    });
    return box;
  }
  var steps = (D.attention && D.attention.steps) || [];
  function stepLabel(record) {
    var text = record.step === null || record.step === undefined ? "the captured graph" : "backward call " + record.step;
    if (record.loss !== null && record.loss !== undefined) { text += " · loss " + fmt(record.loss); }
    if (record.step !== null && record.step === D.attention.graph_step) { text += " · its graph is in the Graph tab"; }
    return text;
  }
  function buildTraining() {
    if (!steps.length || !steps.some(function (s) { return s.sites.length; })) {
      trainingTab.innerHTML = '<p class="hint">No attention was recorded: the graph has no attention op ' +
        "(a FusedAttention, or a softmax whose output multiplies the values).</p>";
      return;
    }
    var graphIndex = steps.length - 1;
    steps.forEach(function (s, i) { if (s.step !== null && s.step === D.attention.graph_step) { graphIndex = i; } });
    state.step = graphIndex;
    trainingTab.innerHTML = '<div class="controls"><label>step <input type="range" id="step" min="0" max="' +
      (steps.length - 1) + '" value="' + graphIndex + '"></label><span id="step-label"></span>' +
      '<span class="kinds">map: <button data-kind="P">P</button><button data-kind="dP">dP</button>' +
      '<button data-kind="dS">dS</button></span><span class="hint">first sequence of the batch, heads side by ' +
      "side; rows are queries, columns keys; dP and dS red where raising the entry raises the loss</span></div>" +
      '<div id="losses"></div><div id="sites"></div>';
    var slider = document.getElementById("step");
    slider.addEventListener("input", function () { setStep(parseInt(slider.value, 10)); });
    trainingTab.querySelector(".kinds").addEventListener("click", function (event) {
      var button = event.target.closest("button[data-kind]");
      if (button) { state.kind = button.dataset.kind; renderStep(); }
    });
    var losses = steps.map(function (s) { return num(s.loss); });
    if (steps.length > 1 && losses.some(function (l) { return l !== null; })) {
      document.getElementById("losses").appendChild(chart({
        x: steps.map(function (s) { return s.step; }), series: [losses], xLabel: "backward call",
        yLabel: "loss", width: 360, height: 120, dots: true }));
    }
    renderStep();
  }
  function renderStep() {
    var record = steps[state.step];
    document.getElementById("step-label").textContent = stepLabel(record);
    var buttons = trainingTab.querySelectorAll("button[data-kind]");
    for (var b = 0; b < buttons.length; b++) { buttons[b].classList.toggle("on", buttons[b].dataset.kind === state.kind); }
    var holder = document.getElementById("sites");
    holder.innerHTML = "";
    record.sites.forEach(function (site, index) {
      var section = document.createElement("section");
      section.className = "site";
      section.dataset.site = site.name;
      var H = site.shape[1], T = site.shape[2];
      var dS = site.norms.dS.map(num), top = dS.indexOf(Math.max.apply(null, dS));
      var meanGain = [];
      for (var q = 0; q < T; q++) {
        var sum = 0;
        for (var h0 = 0; h0 < H; h0++) { sum += site.gain[h0][q]; }
        meanGain.push(sum / H);
      }
      var least = meanGain.indexOf(Math.min.apply(null, meanGain));
      section.innerHTML = "<h3>" + esc(site.name) + ' <span class="hint">(' + esc(site.kind) + ", #" + site.node +
        ", B×H×T×S = " + site.shape.join("×") + ")</span></h3>" +
        '<div class="hint" data-field="answer">largest |dS|: head <b>' + top + "</b> · the softmax passes least gradient at query <b>" +
        least + "</b> (mean λ_max " + fmtGain(meanGain[least]) + ") · largest |dS| or |P| above the diagonal: " +
        fmt(site.above_diagonal) + '</div><div class="row heads"></div><div class="row charts"></div>';
      var heads = section.querySelector(".heads");
      for (var h = 0; h < H; h++) {
        var f = heatFigure(site.maps[state.kind][h], "head " + h + ": |" + state.kind + "| " + fmtShort(site.norms[state.kind][h]) +
          (h === top ? " ◀ largest |dS|" : ""), "attn-map", 150);
        if (f) {
          var canvas = f.querySelector("canvas");
          canvas.dataset.site = String(index); canvas.dataset.head = String(h);
          canvas.dataset.step = String(record.step); canvas.dataset.kind = state.kind;
          heads.appendChild(f);
        }
      }
      var charts = section.querySelector(".charts");
      var queries = [];
      for (var i = 0; i < T; i++) { queries.push(i); }
      charts.appendChild(chart({ x: queries, series: site.gain, yLow: 0, yHigh: 0.5, xLabel: "query position",
        yLabel: "softmax gain λ_max(diag(p) − ppᵀ), per head", width: 330, height: 160 }));
      var sameSite = steps.map(function (s) { return s.sites.filter(function (t) { return t.name === site.name; })[0]; });
      if (steps.length > 1) {
        var series = [];
        for (var hh = 0; hh < H; hh++) {
          series.push(sameSite.map(function (s) { return s ? num(s.norms[state.kind][hh]) : null; }));
        }
        charts.appendChild(chart({ x: steps.map(function (s) { return s.step; }), series: series, marker: record.step,
          xLabel: "backward call", yLabel: "|" + state.kind + "| per head", width: 330, height: 160, dots: true, fromZero: true }));
      }
      var table = "<table><tr><th>head</th><th>|P|</th><th>|dP|</th><th>|dS|</th><th>|dS|/|dP|</th><th>least λ_max</th></tr>";
      for (var k = 0; k < H; k++) {
        var gains = site.gain[k], qmin = gains.indexOf(Math.min.apply(null, gains));
        var dPk = num(site.norms.dP[k]);
        table += '<tr class="' + (k === top ? "top" : "") + '"><td style="color:' + HEAD_COLORS[k % HEAD_COLORS.length] + '">' + k + "</td><td>" +
          fmtShort(site.norms.P[k]) + "</td><td>" + fmtShort(site.norms.dP[k]) + '</td><td data-field="dS-norm" data-value="' +
          esc(site.norms.dS[k]) + '">' + fmtShort(site.norms.dS[k]) + "</td><td>" + (dPk > 0 ? (num(site.norms.dS[k]) / dPk).toFixed(3) : "–") +
          "</td><td>" + fmtGain(gains[qmin]) + " at query " + qmin + "</td></tr>";
      }
      var tableBox = document.createElement("div");
      tableBox.innerHTML = table + "</table>";
      charts.appendChild(tableBox);
      holder.appendChild(section);
    });
  }
  function setStep(index) {
    state.step = Math.max(0, Math.min(steps.length - 1, index));
    var slider = document.getElementById("step");
    if (slider && parseInt(slider.value, 10) !== state.step) { slider.value = String(state.step); }
    renderStep();
  }
  api.setStep = setStep;

  // ---- first render ----------------------------------------------------------------------------
  buildGraph();
  layout();
  buildTraining();
  if (D.nodes.length) {
    showTab("graph");
    panel.innerHTML = '<p class="empty">Select a node (an op) or a parameter. Rows are the backward graph, #0 ' +
      "(the output) first: a node's inputs lie below it, joined by the arcs on the right; grey boxes are the " +
      "modules that recorded the ops (click a header to collapse it). Selecting a parameter highlights the " +
      "gradient's path from the output to it.</p>";
  } else {
    showTab("training");
  }
  api.renderMs = performance.now();
  api.buildMs = performance.now() - started;
  document.body.dataset.ready = "1";
})();
