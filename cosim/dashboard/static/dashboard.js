/* The cosim dashboard page: applies the state and deltas of cosim.dashboard.board, draws the
   model (dagre layout, SVG), progress, the units table, and uPlot charts of the chosen
   signals, per-unit step time and coupling iterations with marks. No network but its own
   server (live) or none at all (a static page carries its state in #cosim-state). */
(function () {
  "use strict";
  var SVGNS = "http" + "://www.w3.org/2000/svg";
  var D = {
    state: null, expanded: null, plots: {}, dirty: {}, ready: false, renders: 0,
    started: performance.now(), firstPaintMs: null, diagramMs: null, layoutMs: null,
    source: null,
  };
  window.cosimDashboard = D;

  // -- state ------------------------------------------------------------------------------
  function emptyState() {
    return {title: "cosim", mode: "live", diagram: null, units: {}, couplings: [],
            progress: {}, links: {}, signal_keys: [], selected: [], sweep: null,
            timing: {t: [], units: {}}, steps: {t: [], iterations: [], rejected: []},
            marks: [], signals: {}, rows: []};
  }

  function apply(delta) {
    if (delta.reset || !D.state) { D.state = emptyState(); D.dirty.all = true; D.stepMs = {}; }
    var s = D.state, k;
    var set = delta.set || {};
    for (k in set) { s[k] = set[k]; D.dirty[k] = true; }
    if (delta.timing && delta.timing.t.length) {
      var n0 = s.timing.t.length;
      Array.prototype.push.apply(s.timing.t, delta.timing.t);
      for (k in delta.timing.units) {
        if (!s.timing.units[k]) { s.timing.units[k] = new Array(n0).fill(null); }
        Array.prototype.push.apply(s.timing.units[k], delta.timing.units[k]);
        // Running mean and last step time per unit (the table), not recomputed per render.
        var acc = D.stepMs[k] || (D.stepMs[k] = {sum: 0, n: 0, last: null});
        delta.timing.units[k].forEach(function (v) {
          if (v !== null) { acc.sum += v; acc.n++; acc.last = v; }
        });
      }
      for (k in s.timing.units) {
        while (s.timing.units[k].length < s.timing.t.length) { s.timing.units[k].push(null); }
      }
      D.dirty.timing = true;
    }
    if (delta.steps && delta.steps.t.length) {
      ["t", "iterations", "rejected"].forEach(function (f) {
        Array.prototype.push.apply(s.steps[f], delta.steps[f]);
      });
      D.dirty.steps = true;
    }
    if (delta.marks && delta.marks.length) {
      Array.prototype.push.apply(s.marks, delta.marks);
      D.dirty.marks = true;
    }
    if (delta.signals) {
      for (k in delta.signals) {
        var mine = s.signals[k] || (s.signals[k] = [[], []]);
        var add = delta.signals[k];
        if (add[0].length && mine[0].length && add[0][0] < mine[0][mine[0].length - 1]) {
          // Back in time (a recovery's replay): the new samples replace the old from there.
          var lo = 0, hi = mine[0].length;
          while (lo < hi) {
            var mid = (lo + hi) >> 1;
            if (mine[0][mid] < add[0][0]) { lo = mid + 1; } else { hi = mid; }
          }
          mine[0].length = lo; mine[1].length = lo;
        }
        for (var i = 0; i < add[0].length; i++) { mine[0].push(add[0][i]); mine[1].push(add[1][i]); }
        if (mine[0].length > 400000) {           // bounded: every other sample kept
          mine[0] = mine[0].filter(function (_, j) { return j % 2 === 0; });
          mine[1] = mine[1].filter(function (_, j) { return j % 2 === 0; });
        }
      }
      D.dirty.signals = true;
    }
    if (delta.rows && delta.rows.length) {
      Array.prototype.push.apply(s.rows, delta.rows);
      D.dirty.rows = true;
    }
    schedule();
  }

  // Rendering is throttled: at most once every MIN_GAP ms, and never more than 1/DUTY of
  // the time (a render that took 80 ms waits 1.6 s): the page must not take the CPU the run
  // it shows needs (on a laptop both share a few cores; a render costs the browser several
  // times its script's time in layout and paint). A hidden page renders when shown again;
  // what the user does (ticking a signal) is drawn at once.
  var MIN_GAP = 1000, DUTY = 20;
  var pending = false, lastRender = -Infinity;
  D.renderMs = 0;
  function schedule() {
    if (pending) { return; }
    pending = true;
    var gap = Math.max(MIN_GAP, DUTY * D.renderMs);
    var wait = Math.max(0, gap - (performance.now() - lastRender));
    setTimeout(function () {
      pending = false;
      if (document.hidden) { D.dirty.hidden = true; return; }
      var t0 = performance.now();
      lastRender = t0;
      render();
      var took = performance.now() - t0;
      D.renderMs = D.renderMs ? 0.7 * D.renderMs + 0.3 * took : took;
    }, wait);
  }
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && D.dirty.hidden) { delete D.dirty.hidden; schedule(); }
  });

  // -- helpers ----------------------------------------------------------------------------
  function $(id) { return document.getElementById(id); }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var a in attrs || {}) { e.setAttribute(a, attrs[a]); }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }
  function svg(tag, attrs) {
    var e = document.createElementNS(SVGNS, tag);
    for (var a in attrs || {}) { e.setAttribute(a, attrs[a]); }
    return e;
  }
  function fmt(x, digits) {
    if (x === null || x === undefined || !isFinite(x)) { return "-"; }
    return Number(x).toPrecision(digits || 4).replace(/\.?0+(e|$)/, "$1");
  }
  function duration(s) {
    if (s === null || s === undefined || !isFinite(s)) { return "-"; }
    if (s < 60) { return s.toFixed(1) + " s"; }
    if (s < 3600) { return Math.floor(s / 60) + " min " + Math.round(s % 60) + " s"; }
    return Math.floor(s / 3600) + " h " + Math.round((s % 3600) / 60) + " min";
  }
  var PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
                 "#e377c2", "#7f7f7f", "#bcbd22"];
  var KIND_COLOUR = {"in process": "#b7e4c7", "process": "#a9c8f5", "ray": "#ffd59e",
                     "remote": "#f4b6b6", "planned": "#e3e3e3"};
  var PROCESS_SHADES = ["#a9c8f5", "#c3b5f0", "#9fd8e8", "#b8cff7", "#d0c0f5", "#a0e0d0"];
  var RAY_SHADES = ["#ffd59e", "#ffbf80", "#f7c873", "#ffe0b3", "#f2b880", "#fcd0a1"];
  function rank(field, value) {
    // Which of the distinct hosts (processes, Ray nodes) this is, in unit order: a shade each.
    var seen = [], units = D.state.units;
    Object.keys(units).forEach(function (u) {
      var w = units[u].where;
      if (w && w[field] !== undefined && seen.indexOf(String(w[field])) < 0) {
        seen.push(String(w[field]));
      }
    });
    return Math.max(0, seen.indexOf(String(value)));
  }
  function unitColour(u) {
    var p = D.state.units[u];
    if (!p) { return "#eeeeee"; }
    if (p.kind === "ray" && p.where && p.where.node) {
      return RAY_SHADES[rank("node", p.where.node) % RAY_SHADES.length];
    }
    if (p.kind === "process" && p.where && p.where.pid) {
      return PROCESS_SHADES[rank("pid", p.where.pid) % PROCESS_SHADES.length];
    }
    return KIND_COLOUR[p.kind] || "#eeeeee";
  }

  // -- progress ---------------------------------------------------------------------------
  function renderProgress() {
    var s = D.state, p = s.progress || {};
    $("title").textContent = s.title;
    document.title = s.title + " - cosim dashboard";
    var status = p.status || (s.mode === "view" ? "not running" : s.mode === "static" ?
                                "finished" : "waiting");
    $("status").textContent = status;
    $("status").className = "status status-" + status.replace(/\s+/g, "-");
    if (p.t === undefined) {
      ["p-time", "p-rate", "p-eta", "p-wall", "p-stats"].forEach(function (id) {
        $(id).textContent = "";
      });
      return;
    }
    var span = p.t_end - p.t0, done = span > 0 ? (p.t - p.t0) / span : 1;
    $("progress-fill").style.width = Math.max(0, Math.min(100, 100 * done)).toFixed(1) + "%";
    var st = p.stats || {};
    var runs = p.unit === "runs", live = p.rate !== undefined;
    $("p-time").textContent = runs ? p.t + " of " + p.t_end + " runs finished" :
      "t = " + fmt(p.t, 6) + " of " + fmt(p.t_end, 6) + " s";
    $("p-rate").textContent = live ? fmt(p.rate, 4) + (runs ? " runs/s" : " macro steps/s") : "";
    $("p-eta").textContent = live ? "time left " + (p.status === "done" ? "0 s" :
                                                    duration(p.eta)) : "";
    $("p-wall").textContent = live ? "wall " + duration(p.wall) : "";
    if (runs) { $("p-stats").textContent = ""; return; }
    $("p-stats").textContent = (st.macro_steps || 0) + " steps, " + (st.iterations || 0) +
      " coupling iterations, " + (st.rejected || 0) + " rejected, " + (st.recoveries || 0) +
      " recoveries";
  }

  // -- units table ------------------------------------------------------------------------
  function renderUnits(rebuild) {
    // Rows are made when the units change; a timing update rewrites two cells a row.
    var s = D.state, table = $("units-table"), names = Object.keys(s.units);
    if (rebuild || table.rows.length !== names.length + 1) {
      table.textContent = "";
      var head = el("tr");
      ["unit", "runs on", "step", "solver", "feedthrough", "last ms/step", "mean ms/step"]
        .forEach(function (h) { head.appendChild(el("th", {}, h)); });
      table.appendChild(head);
      names.forEach(function (u) {
        var p = s.units[u];
        var ft = p.feedthrough ? Object.keys(p.feedthrough).map(function (o) {
          return o + "<-" + p.feedthrough[o].join(","); }).join("; ") : "";
        var tr = el("tr", {"data-unit": u});
        var swatch = el("td", {}, u);
        swatch.style.borderLeft = "10px solid " + unitColour(u);
        tr.appendChild(swatch);
        tr.appendChild(el("td", {"class": "where"}, p.label || p.kind || ""));
        tr.appendChild(el("td", {}, p.dt === null || p.dt === undefined ? "-" :
                                    p.dt === 0 ? "any" : fmt(p.dt) + " s"));
        tr.appendChild(el("td", {}, p.solver || "-"));
        tr.appendChild(el("td", {}, ft || "-"));
        tr.appendChild(el("td", {"class": "last"}));
        tr.appendChild(el("td", {"class": "mean"}));
        table.appendChild(tr);
      });
    }
    var worst = null, means = {};
    names.forEach(function (u) {
      var acc = D.stepMs[u];
      if (acc && acc.n) {
        means[u] = acc.sum / acc.n;
        if (worst === null || means[u] > means[worst]) { worst = u; }
      }
    });
    for (var i = 1; i < table.rows.length; i++) {
      var tr = table.rows[i], u = tr.getAttribute("data-unit"), acc = D.stepMs[u];
      var last = fmt(acc ? acc.last : null, 3), mean = fmt(means[u], 3);
      var cls = u === worst && names.length > 1 ? "straggler" : "";
      if (tr.cells[5].textContent !== last) { tr.cells[5].textContent = last; }
      if (tr.cells[6].textContent !== mean) { tr.cells[6].textContent = mean; }
      if (tr.className !== cls) { tr.className = cls; }
    }
  }

  // -- the diagram ------------------------------------------------------------------------
  var G = null;      // {byId, children, edges} of the current diagram
  var GROUP_OVER = 300;   // more top-level blocks than this: drawn as their unit's one box

  function indexDiagram(d) {
    var byId = {}, children = {"": []}, nodes = d.nodes, edges = d.edges;
    var loose = nodes.filter(function (n) { return !n.parent && n.kind !== "unit"; });
    if (loose.length > GROUP_OVER) {
      // The blocks outside atomic subsystems form the unit "main": one box to open, so a
      // huge top level does not hold the drawing of the units back.
      var id = "main", taken = {};
      nodes.forEach(function (n) { taken[n.id] = true; });
      while (taken[id]) { id += "_"; }
      var group = {id: id, name: "main", parent: null, kind: "unit", unit: "main",
                   type: "top-level blocks", blocks: loose.length, synthetic: true};
      var inside = {};
      loose.forEach(function (n) { inside[n.id] = true; });
      nodes = [group].concat(nodes.map(function (n) {
        return inside[n.id] ? Object.assign({}, n, {parent: id}) : n;
      }));
      edges = edges.map(function (e) {
        return !e.parent && inside[e.src] && inside[e.dst] ? Object.assign({}, e, {parent: id})
                                                              : e;
      });
    }
    nodes.forEach(function (n) {
      byId[n.id] = n;
      var p = n.parent || "";
      (children[p] || (children[p] = [])).push(n.id);
    });
    return {byId: byId, children: children, edges: edges};
  }
  function isDiagram(n) { return n.kind === "unit" || n.kind === "subsystem"; }

  function defaultExpansion() {
    // Open subsystems a whole level at a time while the drawing stays readable (~24 boxes):
    // a partly opened level would look like a different model.
    var open = new Set(), visible = G.children[""].length, level = G.children[""].slice();
    while (level.length) {
      var diagrams = level.filter(function (id) { return isDiagram(G.byId[id]); });
      var next = [];
      diagrams.forEach(function (id) { Array.prototype.push.apply(next, G.children[id] || []); });
      if (!diagrams.length || visible + next.length - diagrams.length > 24) { break; }
      diagrams.forEach(function (id) { open.add(id); });
      visible += next.length - diagrams.length;
      level = next;
    }
    return open;
  }

  function endpoint(id, port, out) {
    // A wire's end on a box that is drawn: an opened subsystem's port block inside it, or
    // the outermost closed box around it.
    var n = G.byId[id];
    while (n && isDiagram(n) && D.expanded.has(n.id) && G.byId[n.id + "/" + port]) {
      n = G.byId[n.id + "/" + port];
    }
    if (!n) { return null; }
    var shown = n.id;
    for (var p = n.parent; p; p = G.byId[p].parent) {
      if (!D.expanded.has(p)) { shown = p; }
    }
    return shown;
  }

  function couplingOf(u) {
    var cs = D.state.couplings || [];
    for (var i = 0; i < cs.length; i++) { if (cs[i].indexOf(u) >= 0) { return i; } }
    return -1;
  }

  function nodeLines(n) {
    var s = D.state;
    if (n.synthetic) {
      var q = s.units[n.unit] || {};
      return [n.name + " (" + n.blocks + " top-level blocks)", q.label || ""];
    }
    if (n.kind === "unit") {
      var p = s.units[n.id] || {};
      return [n.name, p.label || "", (p.dt ? "dt " + fmt(p.dt) + " s" : "") +
              (p.solver ? " " + p.solver : "")];
    }
    if (isDiagram(n)) { return [n.name, "subsystem (" + (G.children[n.id] || []).length + ")"]; }
    return [n.name, n.type + (n.sample_time && n.sample_time !== "inherited" ?
                              " @" + n.sample_time : "")];
  }

  function layoutDiagram() {
    var t0 = performance.now();
    var d = D.state.diagram, box = $("diagram");
    box.textContent = "";
    if (!d || !d.nodes.length) { box.textContent = "No model diagram."; return; }
    if (!G || G.source !== d) { G = indexDiagram(d); G.source = d; D.expanded = null; }
    if (!D.expanded) { D.expanded = defaultExpansion(); }
    var big = d.nodes.length > 300;
    var g = new dagre.graphlib.Graph({compound: true, multigraph: true});
    g.setGraph({rankdir: "LR", nodesep: 14, ranksep: 36, edgesep: 8, marginx: 8, marginy: 8,
                ranker: big ? "longest-path" : "network-simplex"});
    g.setDefaultEdgeLabel(function () { return {}; });
    var shown = [];
    var flat = null;        // an opened group of top-level blocks: laid out without its box
    (function add(parent) {
      (G.children[parent] || []).forEach(function (id) {
        var n = G.byId[id];
        shown.push(id);
        if (n.synthetic && D.expanded.has(id)) {
          flat = n;         // a compound layout of hundreds of blocks is several times slower
          add(id);
          return;
        }
        if (isDiagram(n) && D.expanded.has(id)) {
          g.setNode(id, {cluster: true, label: n.name});
          add(id);
        } else {
          var lines = nodeLines(n);
          var w = 12 + 6.6 * Math.max.apply(null, lines.map(function (l) { return l.length; }));
          g.setNode(id, {width: Math.max(46, Math.min(w, 260)), height: 14 + 13 * lines.length,
                         lines: lines});
        }
        if (parent && !G.byId[parent].synthetic) { g.setParent(id, parent); }
      });
    })("");
    var drawn = [];
    G.edges.forEach(function (e, i) {
      if (e.parent && !(D.expanded.has(e.parent) &&
                        (g.hasNode(e.parent) || G.byId[e.parent].synthetic))) { return; }
      var a = endpoint(e.src, e.sport, true), b = endpoint(e.dst, e.dport, false);
      if (!a || !b || a === b || !g.hasNode(a) || !g.hasNode(b) || g.node(a).cluster ||
          g.node(b).cluster) {
        return;
      }
      g.setEdge(a, b, {edge: e}, "e" + i);
      drawn.push(i);
    });
    dagre.layout(g);
    D.layoutMs = performance.now() - t0;
    var gg = g.graph();
    // Fit the panel's width, down to 55 % (smaller text is unreadable: scroll instead).
    var scale = Math.max(0.55, Math.min(1, (box.clientWidth - 4) / (gg.width + 4)));
    var root = svg("svg", {width: Math.ceil((gg.width + 4) * scale),
                           height: Math.ceil((gg.height + 4) * scale),
                           viewBox: "0 0 " + Math.ceil(gg.width + 4) + " " +
                                    Math.ceil(gg.height + 4),
                           "class": "diagram", id: "diagram-svg"});
    var defs = svg("defs");
    var marker = svg("marker", {id: "arrow", viewBox: "0 0 8 8", refX: 8, refY: 4,
                                markerWidth: 7, markerHeight: 7, orient: "auto"});
    marker.appendChild(svg("path", {d: "M0,0 L8,4 L0,8 z", fill: "#555"}));
    defs.appendChild(marker);
    root.appendChild(defs);
    var layers = {clusters: svg("g"), edges: svg("g"), nodes: svg("g"), labels: svg("g")};
    root.appendChild(layers.clusters); root.appendChild(layers.edges);
    root.appendChild(layers.nodes); root.appendChild(layers.labels);
    g.nodes().forEach(function (id) {
      var v = g.node(id), n = G.byId[id];
      if (!v || v.x === undefined) { return; }
      var x = v.x - v.width / 2, y = v.y - v.height / 2;
      var grp = svg("g", {"class": "node node-" + n.kind + (v.cluster ? " cluster" : ""),
                          "data-id": id, "data-unit": n.unit || ""});
      var title = svg("title");
      title.textContent = tooltip(n);
      grp.appendChild(title);
      var fill = n.unit ? unitColour(n.unit) : "#eee";
      if (v.cluster) {
        grp.appendChild(svg("rect", {x: x, y: y, width: v.width, height: v.height, rx: 6,
                                     fill: fill, "fill-opacity": 0.25, stroke: "#666",
                                     "stroke-dasharray": n.kind === "unit" ? "" : "4 3"}));
        var head = svg("text", {x: x + 6, y: y + 12, "class": "cluster-label"});
        var where = n.kind === "unit" && D.state.units[id] ? "  [" +
          (D.state.units[id].label || D.state.units[id].kind) + "]" : "";
        head.textContent = "\u25be " + n.name + where;
        grp.appendChild(head);
        grp.setAttribute("data-where", where.trim());
        layers.clusters.appendChild(grp);
      } else {
        grp.appendChild(svg("rect", {x: x, y: y, width: v.width, height: v.height,
                                     rx: isDiagram(n) ? 6 : 2, fill: fill,
                                     stroke: isDiagram(n) ? "#333" : "#777",
                                     "stroke-width": isDiagram(n) ? 1.6 : 1}));
        v.lines.forEach(function (line, j) {
          var t = svg("text", {x: v.x, y: y + 14 + 13 * j, "text-anchor": "middle",
                               "class": j === 0 ? "node-name" : "node-info"});
          t.textContent = (j === 0 && isDiagram(n) ? "\u25b8 " : "") + line;
          grp.appendChild(t);
        });
        if (n.kind === "unit") {
          grp.setAttribute("data-where", (D.state.units[id] || {}).label || "");
        }
        layers.nodes.appendChild(grp);
      }
      if (isDiagram(n)) {
        grp.style.cursor = "pointer";
        grp.addEventListener("click", function (ev) {
          ev.stopPropagation();
          if (D.expanded.has(id)) { D.expanded.delete(id); } else { D.expanded.add(id); }
          layoutDiagram();
        });
      }
    });
    g.edges().forEach(function (ed) {
      var v = g.edge(ed), e = v.edge;
      var pts = v.points.map(function (p) { return p.x.toFixed(1) + "," + p.y.toFixed(1); });
      var su = (G.byId[e.src] || {}).unit, du = (G.byId[e.dst] || {}).unit;
      var cross = !e.parent && su && du && su !== du;
      var algebraic = cross && couplingOf(su) >= 0 && couplingOf(su) === couplingOf(du);
      var path = svg("polyline", {points: pts.join(" "), fill: "none",
                                  "class": "wire" + (cross ? " link" : "") +
                                           (algebraic ? " algebraic" : ""),
                                  "marker-end": "url(#arrow)"});
      var title = svg("title");
      title.textContent = e.src + "." + e.sport + " -> " + e.dst + "." + e.dport +
        (algebraic ? " (algebraic coupling: iterated)" : cross ? " (link between units)" : "");
      path.appendChild(title);
      layers.edges.appendChild(path);
      if (cross) {
        var mid = v.points[Math.floor(v.points.length / 2)];
        var label = svg("text", {x: mid.x, y: mid.y - 3, "text-anchor": "middle",
                                 "class": "edge-value", "data-key": e.src + "." + e.sport});
        layers.labels.appendChild(label);
      }
    });
    if (flat) {
      var close = el("div", {"class": "group-open", "data-id": flat.id},
                     "\u25be " + flat.name + " (" + flat.blocks + " top-level blocks, open): " +
                     "click here to close");
      close.addEventListener("click", function () {
        D.expanded.delete(flat.id);
        layoutDiagram();
      });
      box.appendChild(close);
    }
    box.appendChild(root);
    updateLinkValues();
    renderLegend();
    if (D.diagramMs === null) {
      D.diagramMs = performance.now() - D.started;
      document.body.setAttribute("data-diagram", "ready");
    }
  }

  function tooltip(n) {
    var bits = [n.id + " (" + n.type + ")"];
    if (n.unit) {
      var p = D.state.units[n.unit];
      bits.push("unit " + n.unit + (p ? ": " + (p.label || p.kind) : ""));
    }
    if (n.sample_time) { bits.push("sample time " + n.sample_time); }
    if (n.feedthrough !== undefined) { bits.push(n.feedthrough ? "direct feedthrough" :
                                                 "no direct feedthrough"); }
    if (n.kind === "unit" && D.state.units[n.id]) {
      var u = D.state.units[n.id];
      if (u.feedthrough && Object.keys(u.feedthrough).length) {
        bits.push("feedthrough: " + Object.keys(u.feedthrough).map(function (o) {
          return o + " <- " + u.feedthrough[o].join(", "); }).join("; "));
      }
    }
    return bits.join("\n");
  }

  function updateLinkValues() {
    var links = D.state.links || {};
    var labels = document.querySelectorAll("#diagram .edge-value");
    for (var i = 0; i < labels.length; i++) {
      var v = links[labels[i].getAttribute("data-key")];
      labels[i].textContent = v ? v.map(function (x) { return fmt(x, 4); }).join(", ") : "";
    }
  }

  function renderLegend() {
    var box = $("legend"), seen = {};
    box.textContent = "";
    Object.keys(D.state.units).forEach(function (u) {
      var p = D.state.units[u], key = unitColour(u) + (p.kind || "");
      var text = p.kind === "ray" && p.where && p.where.node ?
        "ray node " + String(p.where.node).slice(0, 8) :
        p.kind === "process" && p.where && p.where.pid ? "process " + p.where.pid : p.kind;
      if (seen[key]) { return; }
      seen[key] = true;
      var item = el("span", {"class": "legend-item"}, text);
      item.style.borderLeft = "14px solid " + unitColour(u);
      box.appendChild(item);
    });
    if ((D.state.couplings || []).length) {
      box.appendChild(el("span", {"class": "legend-item legend-algebraic"},
                         "algebraic coupling"));
    }
  }

  // -- charts -----------------------------------------------------------------------------
  function decimate(ts, vs, lo, hi, buckets) {
    // Min and max of each of `buckets` time slices: what a line of that many pixels shows.
    var n = ts.length;
    if (n <= 2 * buckets) { return [ts, vs]; }
    var outT = [], outV = [], width = (hi - lo) / buckets || 1, i = 0;
    while (i < n) {
      var b = Math.floor((ts[i] - lo) / width), end = lo + (b + 1) * width;
      var iMin = i, iMax = i;
      i++;                  // (at least one sample a slice: rounding cannot stall the loop)
      while (i < n && ts[i] < end) {
        if (vs[i] !== null && (vs[iMin] === null || vs[i] < vs[iMin])) { iMin = i; }
        if (vs[i] !== null && (vs[iMax] === null || vs[i] > vs[iMax])) { iMax = i; }
        i++;
      }
      if (iMin === iMax) { outT.push(ts[iMin]); outV.push(vs[iMin]); }
      else {
        var a = Math.min(iMin, iMax), c = Math.max(iMin, iMax);
        outT.push(ts[a]); outV.push(vs[a]); outT.push(ts[c]); outV.push(vs[c]);
      }
    }
    return [outT, outV];
  }

  function markLines(u) {
    var ctx = u.ctx, marks = D.state.marks;
    if (!marks.length) { return; }
    var colours = {recovery: "#d62728", stop: "#000", rejected: "#ff7f0e",
                   nonconverged: "#9467bd", error: "#d62728"};
    ctx.save();
    marks.forEach(function (m) {
      var x = Math.round(u.valToPos(m.t, "x", true));
      if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) { return; }
      ctx.strokeStyle = colours[m.kind] || "#555";
      ctx.lineWidth = m.kind === "recovery" || m.kind === "stop" ? 2 : 1;
      ctx.setLineDash(m.kind === "recovery" ? [6, 3] : []);
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
    });
    ctx.restore();
  }

  function chart(id, series, data, opts) {
    var box = $(id), width = Math.max(300, box.clientWidth || 700);
    var old = D.plots[id];
    var key = series.map(function (s) { return s.label; }).join("|") + (opts.log ? "L" : "");
    if (old && old.key === key && old.width === width) {
      old.plot.setData(data);
      return old.plot;
    }
    if (old) { old.plot.destroy(); }
    var axes = [{}, {label: opts.ylabel, size: 60}];
    if (opts.y2) { axes.push({scale: "y2", side: 1, label: opts.y2, grid: {show: false}}); }
    var scales = {x: {time: false}};
    if (opts.log) { scales.y = {distr: 3}; }
    var plot = new uPlot({width: width, height: opts.height || 240, scales: scales,
                          series: [{label: "t [s]"}].concat(series), axes: axes,
                          legend: {live: true}, hooks: {draw: [markLines]}}, data, box);
    D.plots[id] = {plot: plot, key: key, width: width};
    return plot;
  }

  var PICKER_MAX = 300;     // boxes listed at once; the filter finds the others
  function renderPicker() {
    var s = D.state, picker = $("signal-picker"), text = $("signal-filter").value.trim();
    var shown = s.selected.filter(function (k) { return s.signal_keys.indexOf(k) >= 0; });
    var rest = s.signal_keys.filter(function (k) {
      return shown.indexOf(k) < 0 && (!text || k.indexOf(text) >= 0);
    });
    picker.textContent = "";
    shown.concat(rest.slice(0, PICKER_MAX)).forEach(function (k) {
      var lab = el("label", {"class": "pick"});
      var box = el("input", {type: "checkbox", value: k});
      box.checked = s.selected.indexOf(k) >= 0;
      box.addEventListener("change", choose);
      lab.appendChild(box);
      lab.appendChild(document.createTextNode(" " + k));
      picker.appendChild(lab);
    });
    $("signal-count").textContent = s.signal_keys.length + " signals" +
      (rest.length > PICKER_MAX ? ", " + PICKER_MAX + " of " + rest.length +
                                  " matching listed: type to narrow" : "");
  }

  function renderSignals() {
    var s = D.state;
    if (D.dirty.signal_keys || D.dirty.selected || D.dirty.all ||
        !$("signal-picker").childNodes.length) { renderPicker(); }
    var keys = s.selected.filter(function (k) { return s.signals[k]; });
    if (!keys.length) { return; }
    var lo = Infinity, hi = -Infinity;
    keys.forEach(function (k) {
      var ts = s.signals[k][0];
      if (ts.length) { lo = Math.min(lo, ts[0]); hi = Math.max(hi, ts[ts.length - 1]); }
    });
    if (!isFinite(lo)) { return; }
    var width = Math.max(300, $("signal-plot").clientWidth || 700);
    var tables = keys.map(function (k) {
      var dd = decimate(s.signals[k][0], s.signals[k][1], lo, hi > lo ? hi : lo + 1, width);
      return [dd[0], dd[1]];
    });
    var data = tables.length === 1 ? tables[0] : uPlot.join(tables);
    chart("signal-plot", keys.map(function (k, i) {
      return {label: k, stroke: PALETTE[i % PALETTE.length], width: 1.5, spanGaps: true};
    }), data, {ylabel: "value"});
  }

  function choose(ev) {
    // The ticked box joins (or leaves) the chosen signals; those the filter hides stay.
    var chosen = D.state.selected.slice(), k = ev.target.value, at = chosen.indexOf(k);
    if (ev.target.checked && at < 0) { chosen.push(k); }
    if (!ev.target.checked && at >= 0) { chosen.splice(at, 1); }
    D.state.selected = chosen;
    D.dirty.signals = true;
    if (D.state.mode === "live" && D.token) {
      fetch("select?token=" + encodeURIComponent(D.token),
            {method: "POST", headers: {"Content-Type": "application/json"},
             body: JSON.stringify({signals: chosen})});
    }
    render();               // the user's own change: drawn now, not at the next update
  }

  function renderTiming() {
    var s = D.state, units = Object.keys(s.timing.units);
    if (!s.timing.t.length || !units.length) {
      $("timing-note").textContent = s.mode === "view" ? "" :
        "No per-unit step times recorded yet.";
      return;
    }
    $("timing-note").textContent = "";
    var data = [s.timing.t.slice()].concat(units.map(function (u) {
      return s.timing.units[u].map(function (v) { return v === null || v <= 0 ? null : v; });
    }));
    chart("timing-plot", units.map(function (u, i) {
      return {label: u, stroke: PALETTE[i % PALETTE.length], width: 1.5, spanGaps: true};
    }), data, {ylabel: "ms per macro step", log: true});
  }

  function renderSteps() {
    var s = D.state;
    if (s.steps.t.length) {
      chart("steps-plot", [
        {label: "coupling iterations", stroke: "#1f77b4", width: 1.5},
        {label: "rejected steps", stroke: "#ff7f0e", width: 1.5, scale: "y2",
         points: {show: false}}],
        [s.steps.t.slice(), s.steps.iterations.slice(), s.steps.rejected.slice()],
        {ylabel: "iterations", y2: "rejected", height: 200});
    }
  }

  function renderMarks() {
    var s = D.state, list = $("marks");
    list.textContent = "";
    var shown = s.marks.filter(function (m) { return m.kind !== "rejected"; });
    var rejected = s.marks.length - shown.length;
    shown.slice(-50).forEach(function (m) {
      list.appendChild(el("li", {"class": "mark mark-" + m.kind, "data-kind": m.kind,
                                 "data-t": m.t}, m.kind + " at t = " + fmt(m.t, 6) + " s: " +
                                                   m.text));
    });
    if (rejected) {
      list.appendChild(el("li", {"class": "mark mark-rejected", "data-kind": "rejected"},
                          rejected + " rejected macro steps (orange lines)"));
    }
    for (var id in D.plots) { D.plots[id].plot.redraw(false, false); }   // the mark lines
  }

  // -- sweeps -----------------------------------------------------------------------------
  function renderSweep() {
    var s = D.state, sw = s.sweep;
    $("sweep-panel").hidden = !sw;
    $("run-panels").hidden = !!sw && !s.diagram;
    if (!sw) { return; }
    var wt = $("workers-table");
    wt.textContent = "";
    var head = el("tr");
    ["worker", "done", "failed"].forEach(function (h) { head.appendChild(el("th", {}, h)); });
    wt.appendChild(head);
    var workers = sw.workers || {};
    Object.keys(workers).sort().forEach(function (w) {
      var tr = el("tr", {"data-worker": w});
      [w, workers[w].done, workers[w].failed].forEach(function (v) {
        tr.appendChild(el("td", {}, String(v)));
      });
      wt.appendChild(tr);
    });
    $("sweep-summary").textContent = sw.done + " done, " + sw.failed + " failed, " +
      sw.pending + " pending of " + sw.total + " runs";
    var rt = $("rows-table");
    rt.textContent = "";
    var cols = sw.columns || [];
    var hr = el("tr");
    cols.forEach(function (c) { hr.appendChild(el("th", {}, c)); });
    rt.appendChild(hr);
    s.rows.slice(-500).forEach(function (r) {
      var tr = el("tr", {"class": r.status === "failed" ? "failed" : ""});
      cols.forEach(function (c) {
        var v = r[c];
        tr.appendChild(el("td", {}, typeof v === "number" ? fmt(v, 5) :
                                    v === null || v === undefined ? "" : String(v)));
      });
      rt.appendChild(tr);
    });
  }

  // -- rendering --------------------------------------------------------------------------
  function render() {
    if (!D.state) { return; }
    var d = D.dirty, all = d.all;
    D.dirty = {};
    try {
      renderProgress();
      if (all || d.sweep || d.rows) { renderSweep(); }
      if (all || d.units) { renderUnits(true); }
      if (D.firstPaintMs === null) { D.firstPaintMs = performance.now() - D.started; }
      if (all || d.diagram || d.couplings || d.units) {
        // After the first paint: a large model's layout must not hold the page back.
        setTimeout(layoutDiagram, 0);
      }
      if (all || d.marks) { renderMarks(); }
      if (all || d.signals || d.selected || d.signal_keys) { renderSignals(); }
      if (all || d.timing) { renderTiming(); renderUnits(false); }
      if (all || d.steps) { renderSteps(); }
      if (d.links && !(all || d.diagram || d.couplings || d.units)) { updateLinkValues(); }
    } catch (err) {
      $("error").textContent = "dashboard: " + err;
      throw err;
    }
    D.renders++;
    D.ready = true;
    document.body.setAttribute("data-renders", String(D.renders));
  }

  D.lastSignalTime = function () {
    var s = D.state, best = null;
    if (!s) { return null; }
    Object.keys(s.signals).forEach(function (k) {
      var ts = s.signals[k][0];
      if (ts.length && (best === null || ts[ts.length - 1] > best)) { best = ts[ts.length - 1]; }
    });
    return best;
  };
  D.lastPlotted = function (label) {
    // The latest time the signal plot draws a value of `label` at (what a person sees).
    var p = D.plots["signal-plot"];
    if (!p) { return null; }
    var u = p.plot, i = u.series.findIndex(function (x) { return x.label === label; });
    if (i < 1) { return null; }
    var xs = u.data[0], ys = u.data[i];
    for (var j = xs.length - 1; j >= 0; j--) {
      if (ys[j] !== null && ys[j] !== undefined) { return xs[j]; }
    }
    return null;
  };
  D.apply = apply;
  D.render_now = function () { D.dirty.signals = true; render(); };

  function start() {
    $("signal-filter").addEventListener("input", function () { if (D.state) { renderPicker(); } });
    var embedded = $("cosim-state");
    if (embedded) {
      apply(JSON.parse(embedded.textContent));
      return;
    }
    D.token = new URLSearchParams(location.search).get("token") || "";
    var source = new EventSource("events?token=" + encodeURIComponent(D.token));
    D.source = source;
    source.addEventListener("state", function (ev) { apply(JSON.parse(ev.data)); });
    source.addEventListener("delta", function (ev) { apply(JSON.parse(ev.data)); });
    source.onerror = function () {
      if (D.state && D.state.progress && D.state.progress.status !== "running") {
        source.close();                   // the run is over and its server gone
      }
      $("connection").textContent = source.readyState === 2 ? "disconnected" : "reconnecting";
    };
    source.onopen = function () { $("connection").textContent = "live"; };
    window.addEventListener("resize", function () { D.dirty.all = true; schedule(); });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else { start(); }
})();
