// Rune console: the visual workflow editor (/editor, /editor/{id}).
// Plain JavaScript, no build. The node types, their parameters and the
// forms come from the API's OpenAPI document (/v1/openapi.json); the
// server checks every edit (/ui/editor/validate) and saves through the
// API. Like console.js it never builds HTML from data: values go in with
// textContent and attributes.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const root = $("editor");
  if (!root) return;

  // el builds an element: attrs are attributes (on* are listeners), kids
  // are nodes or text.
  function el(tag, attrs, ...kids) {
    const svg = tag.startsWith("svg:");
    const e = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4)) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const k of kids) if (k !== undefined && k !== null) e.append(k);
    return e;
  }

  const csrf = () => (document.querySelector('meta[name="csrf"]') || {}).content || "";
  const W = 150, H = 56, DX = 210, DY = 86, PAD = 24;

  const state = {
    id: root.dataset.id, version: Number(root.dataset.version || 0),
    schemas: null, types: {}, // type → {schema, params, description}
    model: null,       // the definition being edited (parsed JSON, key order kept)
    baseText: "",      // the JSON text last loaded or typed: shown unchanged when the model is
    baseCanon: "",
    storedText: "",    // the current version's text (the save's diff), "" for a new workflow
    pos: {},           // node id → {x, y}: the canvas only, never saved
    sel: null,         // {kind: "node"|"edge", id} or null: the workflow
    connect: null,     // a node id whose outgoing edge is being drawn
    problems: [], paths: [], view: "canvas", seq: 0,
  };
  const canon = (v) => JSON.stringify(v);

  function status(text, kind) {
    const s = $("ed-status");
    s.textContent = text;
    s.className = kind || "";
  }

  // --- schemas ---------------------------------------------------------------

  const refName = (ref) => ref.slice(ref.lastIndexOf("/") + 1);
  function resolve(s) {
    let d = s && s.description;
    while (s && s.$ref) { s = state.schemas[refName(s.$ref)]; d = d || (s && s.description); }
    return s ? Object.assign({}, s, d ? {description: d} : {}) : {};
  }

  // loadTypes reads the node types from the discriminator of the Node
  // schema: the palette is what the API documents, nothing more.
  function loadTypes(doc) {
    state.schemas = doc.components.schemas;
    const mapping = state.schemas.Node.discriminator.mapping;
    for (const [type, ref] of Object.entries(mapping)) {
      const s = resolve({$ref: ref});
      const own = (s.allOf || []).find((p) => p.properties && p.properties.type) || {properties: {}};
      state.types[type] = {description: s.description || "", params: own.properties.parameters ? resolve(own.properties.parameters) : null,
        needsParams: (own.required || []).includes("parameters")};
    }
  }

  // --- the model ---------------------------------------------------------------

  const nodes = () => (state.model.nodes = state.model.nodes || []);
  const edges = () => (state.model.edges = state.model.edges || []);
  const nodeOf = (id) => nodes().find((n) => n && n.id === id);
  const edgeOf = (id) => edges().find((e) => e && e.id === id);

  function uniqueID(prefix, taken) {
    for (let i = 1; ; i++) if (!taken.has(prefix + i)) return prefix + i;
  }

  // changed re-draws the canvas and has the server check the edit.
  function changed() {
    drawCanvas();
    scheduleCheck();
  }

  function addNode(type) {
    const ids = new Set(nodes().map((n) => n && n.id));
    const n = {id: type === "trigger" && !ids.has("start") ? "start" : uniqueID(type + "_", ids), type};
    if (type === "trigger") n.trigger = true;
    if (state.types[type].needsParams || state.types[type].params && Object.keys(state.types[type].params.properties || {}).length) n.parameters = {};
    nodes().push(n);
    const from = state.sel && state.sel.kind === "node" ? state.sel.id : null;
    if (from && nodeOf(from)) {
      const p = state.pos[from];
      const below = Object.values(state.pos).filter((q) => q.x === p.x + DX).length;
      state.pos[n.id] = {x: p.x + DX, y: p.y + below * DY};
      addEdge(from, n.id);
    } else {
      const ys = Object.values(state.pos).map((q) => q.y);
      state.pos[n.id] = {x: PAD, y: ys.length ? Math.max(...ys) + DY : PAD};
    }
    select({kind: "node", id: n.id});
    changed();
    status("Added " + n.id + " (" + type + ")");
  }

  function addEdge(src, dst) {
    if (edges().some((e) => e && e.src === src && e.dst === dst)) return null;
    const e = {id: uniqueID("e", new Set(edges().map((x) => x && x.id))), src, dst};
    edges().push(e);
    return e;
  }

  function deleteSelection() {
    const s = state.sel;
    if (!s) return;
    if (s.kind === "edge") {
      state.model.edges = edges().filter((e) => !e || e.id !== s.id);
      status("Deleted edge " + s.id);
    } else {
      state.model.nodes = nodes().filter((n) => !n || n.id !== s.id);
      state.model.edges = edges().filter((e) => !e || (e.src !== s.id && e.dst !== s.id));
      delete state.pos[s.id];
      status("Deleted node " + s.id);
    }
    select(null);
    changed();
  }

  // renameNode moves a node's id to its edges and its place.
  function renameNode(n, to) {
    const from = n.id;
    n.id = to;
    for (const e of edges()) {
      if (!e) continue;
      if (e.src === from) e.src = to;
      if (e.dst === from) e.dst = to;
    }
    state.pos[to] = state.pos[from];
    delete state.pos[from];
    state.sel = {kind: "node", id: to};
  }

  // --- auto-layout ---------------------------------------------------------------

  // layout puts each node in the column of its longest path from a node
  // without incoming edges (a cycle stops at the node count), rows in
  // definition order.
  function layout(onlyMissing) {
    const ns = nodes().filter((n) => n && typeof n.id === "string");
    const depth = {};
    const incoming = new Set(edges().filter((e) => e).map((e) => e.dst));
    for (const n of ns) depth[n.id] = incoming.has(n.id) ? -1 : 0;
    for (let round = 0; round < ns.length; round++) {
      let moved = false;
      for (const e of edges()) {
        if (!e || !(e.src in depth) || !(e.dst in depth) || depth[e.src] < 0) continue;
        if (depth[e.dst] < depth[e.src] + 1) { depth[e.dst] = depth[e.src] + 1; moved = true; }
      }
      if (!moved) break;
    }
    const rows = {};
    for (const n of ns) {
      const d = Math.max(0, depth[n.id]);
      rows[d] = (rows[d] || 0) + 1;
      if (!onlyMissing || !state.pos[n.id]) state.pos[n.id] = {x: PAD + d * DX, y: PAD + (rows[d] - 1) * DY};
    }
  }

  // --- the canvas ---------------------------------------------------------------

  function drawCanvas() {
    const box = $("ed-nodes"), g = $("ed-edge-g");
    // A redraw keeps the keyboard focus on the node button it was on.
    const a = document.activeElement, refocus = a && box.contains(a) ? (a.dataset.select ? "select" : "port") + ":" + (a.dataset.select || a.dataset.port) : "";
    box.replaceChildren();
    g.replaceChildren();
    layout(true);
    let maxX = 0, maxY = 0;
    for (const n of nodes()) {
      if (!n || typeof n.id !== "string") continue;
      const p = state.pos[n.id];
      maxX = Math.max(maxX, p.x + W); maxY = Math.max(maxY, p.y + H);
      const sel = state.sel && state.sel.kind === "node" && state.sel.id === n.id;
      const main = el("button", {type: "button", class: "ed-node-main", "data-select": n.id, "data-label": n.id + ", " + n.type + (sel ? ", selected" : "")},
        el("b", {}, n.id), el("span", {}, String(n.type) + (n.name ? " · " + n.name : "")));
      const port = el("button", {type: "button", class: "ed-port", "data-port": n.id, "aria-label": "Connect " + n.id + " to another node",
        title: "Connect " + n.id + " to…", "aria-pressed": state.connect === n.id ? "true" : "false"}, "→");
      const d = el("div", {class: "ed-node" + (sel ? " ed-sel" : "") + (state.connect && state.connect !== n.id ? " ed-target" : ""),
        "data-node": n.id}, main, port);
      // Through the CSSOM: the page's CSP refuses style attributes.
      d.style.left = p.x + "px";
      d.style.top = p.y + "px";
      box.append(d);
      dragNode(main, n.id);
      port.addEventListener("click", () => {
        state.connect = state.connect === n.id ? null : n.id;
        status(state.connect ? "Choose the node " + n.id + " leads to (Escape stops)." : "");
        drawCanvas();
      });
    }
    for (const e of edges()) {
      if (!e) continue;
      const a = state.pos[e.src], b = state.pos[e.dst];
      if (!a || !b) continue;
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
      const d = x2 > x1 + 20 ? `M${x1} ${y1} C${mx} ${y1} ${mx} ${y2} ${x2} ${y2}`
        : `M${x1} ${y1} C${x1 + 60} ${y1} ${x2 - 60} ${y2} ${x2} ${y2}`;
      const sel = state.sel && state.sel.kind === "edge" && state.sel.id === e.id;
      const grp = el("svg:g", {class: sel ? "ed-sel" : "", "data-edge": e.id},
        el("svg:path", {class: "ed-edge", d}), el("svg:path", {class: "ed-hit", d, onclick: () => { select({kind: "edge", id: e.id}); }}));
      const label = e.label || (isErrorEdge(e) ? "error" : "");
      if (label) grp.append(el("svg:text", {x: mx, y: (y1 + y2) / 2 - 6, "text-anchor": "middle"}, label.length > 24 ? label.slice(0, 23) + "…" : label));
      g.append(grp);
    }
    if (refocus) {
      const [k, id] = [refocus.slice(0, refocus.indexOf(":")), refocus.slice(refocus.indexOf(":") + 1)];
      const b = box.querySelector(`[data-${k}="${CSS.escape(id)}"]`);
      if (b) b.focus();
    }
    const svg = $("ed-edges");
    svg.setAttribute("width", maxX + PAD * 4);
    svg.setAttribute("height", maxY + PAD * 4);
    $("ed-canvas").style.width = maxX + PAD * 4 + "px";
    $("ed-canvas").style.height = maxY + PAD * 4 + "px";
    $("ed-delete").disabled = !state.sel;
    markProblems();
  }

  // markProblems shows the server's problems on the drawn graph, in place:
  // a check's answer does not redraw what the user may be pressing.
  function markProblems() {
    const bad = new Map(), badEdges = new Set();
    for (const p of state.problems) {
      if (p.node) bad.set(p.node, (bad.get(p.node) || []).concat(p.message));
      if (p.edge) badEdges.add(p.edge);
    }
    for (const d of $("ed-nodes").children) {
      const probs = bad.get(d.dataset.node) || [];
      d.classList.toggle("ed-bad", probs.length > 0);
      const main = d.querySelector(".ed-node-main");
      main.setAttribute("aria-label", main.dataset.label + (probs.length ? ", " + probs.length + " problem(s)" : ""));
      if (probs.length) main.title = probs.join("\n"); else main.removeAttribute("title");
      let c = d.querySelector(".ed-count");
      if (probs.length && !c) d.append(c = el("span", {class: "ed-count", "aria-hidden": "true"}));
      if (c && !probs.length) c.remove();
      else if (c) c.textContent = String(probs.length);
    }
    for (const g of $("ed-edge-g").children) g.classList.toggle("ed-bad", badEdges.has(g.dataset.edge));
  }

  function isErrorEdge(e) {
    const n = nodeOf(e.src);
    return !!(n && n.error && n.error.error_edge === e.id);
  }

  // dragNode moves a node with the pointer; a press without a move is a
  // click (select, or finish a connection).
  function dragNode(handle, id) {
    handle.addEventListener("pointerdown", (ev) => {
      if (ev.button !== 0) return;
      const start = {x: ev.clientX, y: ev.clientY, p: Object.assign({}, state.pos[id])};
      let moved = false;
      const card = handle.parentElement;
      const move = (m) => {
        const dx = m.clientX - start.x, dy = m.clientY - start.y;
        if (!moved && Math.abs(dx) + Math.abs(dy) < 4) return;
        moved = true;
        state.pos[id] = {x: Math.max(0, start.p.x + dx), y: Math.max(0, start.p.y + dy)};
        card.style.left = state.pos[id].x + "px";
        card.style.top = state.pos[id].y + "px";
      };
      const up = () => {
        handle.removeEventListener("pointermove", move);
        handle.removeEventListener("pointerup", up);
        if (moved) { handle.dataset.dragged = "1"; drawCanvas(); }
      };
      handle.setPointerCapture(ev.pointerId);
      handle.addEventListener("pointermove", move);
      handle.addEventListener("pointerup", up);
    });
    handle.addEventListener("click", () => {
      if (handle.dataset.dragged) { delete handle.dataset.dragged; return; }
      if (state.connect && state.connect !== id) {
        const e = addEdge(state.connect, id);
        const from = state.connect;
        state.connect = null;
        status(e ? "Connected " + from + " → " + id + " (" + e.id + ")" : from + " already leads to " + id);
        select(e ? {kind: "edge", id: e.id} : {kind: "node", id});
        changed();
        return;
      }
      state.connect = null;
      select({kind: "node", id});
    });
  }

  function select(s) {
    state.sel = s;
    drawCanvas();
    drawForm();
    if (s && s.kind === "node") {
      const b = document.querySelector(`[data-select="${CSS.escape(s.id)}"]`);
      if (b && document.activeElement !== b && !$("ed-form").contains(document.activeElement)) b.focus();
    }
  }

  // --- forms generated from the schemas ----------------------------------------

  let fieldSeq = 0;

  // field renders one property: obj[key] under schema, into box. Text
  // fields complete $-paths. A change edits the model in place (an
  // existing key keeps its place) and re-checks.
  function field(box, schema, obj, key, required, onSet) {
    const s = resolve(schema);
    const id = "ed-f" + (++fieldSeq);
    const types = [].concat(s.type || []);
    const cur = obj()[key];
    const set = (v) => {
      const o = obj(true);
      if (v === undefined) delete o[key]; else o[key] = v;
      if (onSet) onSet(v);
      changed();
    };
    const help = s.description ? el("small", {id: id + "-h"}, s.description) : null;
    const err = el("span", {class: "error", id: id + "-e", role: "status"});
    const label = el("label", {for: id}, key + (required ? " *" : ""));
    const wrap = el("div", {class: "ed-field", "data-field": key});
    if (s.properties && Object.keys(s.properties).length && types.includes("object") && cur !== null && (cur === undefined || typeof cur === "object" && !Array.isArray(cur))) {
      // A fixed object (error, retry, settings …): its own fieldset.
      const fs = el("fieldset", {"data-field": key}, el("legend", {}, key + (required ? " *" : "")));
      if (help) fs.append(help);
      const sub = (create) => {
        const o = obj(create);
        if (o[key] === undefined && create) o[key] = {};
        return o[key] || {};
      };
      // An object whose last field was cleared goes too.
      const prune = () => {
        const o = obj();
        if (o[key] && typeof o[key] === "object" && !Object.keys(o[key]).length) delete o[key];
      };
      for (const [k, ps] of Object.entries(s.properties)) field(fs, ps, sub, k, (s.required || []).includes(k), prune);
      box.append(fs);
      return;
    }
    let input;
    if (s.enum) {
      input = el("select", {id, "aria-describedby": help ? id + "-h" : undefined, onchange: () => set(input.value === "" ? undefined : input.value)},
        el("option", {value: ""}, required ? "(choose)" : "(default)"), ...s.enum.map((v) => el("option", {value: v}, v)));
      input.value = cur === undefined ? "" : String(cur);
    } else if (types.length === 1 && types[0] === "boolean") {
      input = el("input", {type: "checkbox", id, "aria-describedby": help ? id + "-h" : undefined, onchange: () => set(input.checked ? true : undefined)});
      input.checked = cur === true;
      wrap.classList.add("ed-check");
      wrap.append(input, label);
      if (help) wrap.append(help);
      box.append(wrap);
      return;
    } else if (types.length && types.every((t) => t === "string" || t === "number" || t === "integer") && (cur === undefined || typeof cur !== "object")) {
      const numeric = !types.includes("string");
      input = el("input", {type: "text", id, autocomplete: "off", spellcheck: "false", "aria-describedby": (help ? id + "-h " : "") + id + "-e",
        inputmode: numeric ? "decimal" : undefined, "aria-autocomplete": numeric ? undefined : "list"});
      input.value = cur === undefined ? "" : String(cur);
      const read = () => {
        const v = input.value;
        if (v === "") return undefined;
        if (types.includes("number") || types.includes("integer")) {
          if (/^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(v.trim())) return Number(v);
          if (numeric) { err.textContent = key + ": not a number"; }
        }
        return v;
      };
      input.addEventListener("input", () => { err.textContent = ""; set(read()); });
      if (!numeric) complete(input);
    } else {
      // Anything else (a map, a list, any JSON value): JSON text.
      input = el("textarea", {id, rows: 4, spellcheck: "false", "aria-describedby": (help ? id + "-h " : "") + id + "-e", "aria-autocomplete": "list"});
      input.value = cur === undefined ? "" : JSON.stringify(cur, null, 2);
      input.addEventListener("input", () => {
        if (input.value.trim() === "") { err.textContent = ""; input.removeAttribute("aria-invalid"); set(undefined); return; }
        try {
          const v = JSON.parse(input.value);
          err.textContent = ""; input.removeAttribute("aria-invalid");
          set(v);
        } catch (e) { err.textContent = key + ": not JSON yet (" + e.message + ")"; input.setAttribute("aria-invalid", "true"); }
      });
      complete(input);
    }
    wrap.append(label, input);
    if (help) wrap.append(help);
    wrap.append(err);
    box.append(wrap);
  }

  function drawForm() {
    const box = $("ed-form"), h = $("ed-form-h");
    box.replaceChildren();
    const s = state.sel;
    if (s && s.kind === "node" && nodeOf(s.id)) return nodeForm(box, h, nodeOf(s.id));
    if (s && s.kind === "edge" && edgeOf(s.id)) return edgeForm(box, h, edgeOf(s.id));
    state.sel = null;
    h.textContent = "Workflow";
    const def = resolve({$ref: "#/components/schemas/Definition"});
    for (const [k, ps] of Object.entries(def.properties)) {
      if (k === "nodes" || k === "edges") continue;
      field(box, ps, () => state.model, k, (def.required || []).includes(k));
    }
    box.append(el("p", {class: "ed-hint"}, "Select a node or an edge on the canvas to edit it."));
  }

  function nodeForm(box, h, n) {
    const t = state.types[n.type];
    h.textContent = "Node " + n.id;
    if (t) box.append(el("p", {class: "ed-hint"}, t.description));
    const common = resolve({$ref: "#/components/schemas/NodeCommon"});
    // id: renaming moves the edges along.
    const idf = el("input", {type: "text", id: "ed-node-id", value: n.id, spellcheck: "false", "aria-describedby": "ed-node-id-e"});
    const ide = el("span", {class: "error", id: "ed-node-id-e", role: "status"});
    idf.addEventListener("change", () => {
      const to = idf.value.trim();
      if (to === n.id) return;
      if (!new RegExp(common.properties.id.pattern).test(to)) { ide.textContent = "id: must match " + common.properties.id.pattern; return; }
      if (nodeOf(to)) { ide.textContent = "id: node " + to + " exists"; return; }
      ide.textContent = "";
      renameNode(n, to);
      h.textContent = "Node " + to;
      changed();
    });
    box.append(el("div", {class: "ed-field", "data-field": "id"}, el("label", {for: "ed-node-id"}, "id *"), idf, ide));
    box.append(el("p", {class: "ed-hint"}, "type: " + n.type));
    if (t && t.params && t.params.properties) {
      const fs = el("fieldset", {id: "ed-params"}, el("legend", {}, "parameters"));
      const params = (create) => {
        if (!n.parameters && create) n.parameters = {};
        return n.parameters || {};
      };
      for (const [k, ps] of Object.entries(t.params.properties)) field(fs, ps, params, k, (t.params.required || []).includes(k));
      box.append(fs);
    }
    const skip = new Set(["id", "type", "trigger", "output"]);
    for (const [k, ps] of Object.entries(common.properties)) {
      if (skip.has(k)) continue;
      field(box, ps, () => n, k, false);
    }
    // Edges: connect to another node, and the node's edges to select or delete.
    const others = nodes().filter((o) => o && o.id !== n.id);
    const to = el("select", {id: "ed-connect-to"}, ...others.map((o) => el("option", {value: o.id}, o.id)));
    box.append(el("div", {class: "ed-field"}, el("label", {for: "ed-connect-to"}, "Connect to"),
      el("span", {}, to, " ", el("button", {type: "button", id: "ed-connect", disabled: !others.length, onclick: () => {
        const e = addEdge(n.id, to.value);
        status(e ? "Connected " + n.id + " → " + to.value + " (" + e.id + ")" : n.id + " already leads to " + to.value);
        if (e) { changed(); drawForm(); }
      }}, "Add edge"))));
    const list = el("ul", {class: "ed-edgelist", "aria-label": "Edges of " + n.id});
    for (const e of edges()) {
      if (!e || (e.src !== n.id && e.dst !== n.id)) continue;
      list.append(el("li", {}, el("span", {}, e.id + ": " + e.src + " → " + e.dst + (e.label ? " (" + e.label + ")" : "")),
        el("button", {type: "button", onclick: () => select({kind: "edge", id: e.id})}, "Edit"),
        el("button", {type: "button", class: "danger", "data-delete-edge": e.id, onclick: () => { select({kind: "edge", id: e.id}); deleteSelection(); select({kind: "node", id: n.id}); }}, "Delete " + e.id)));
    }
    box.append(list);
    box.append(el("button", {type: "button", class: "danger", onclick: deleteSelection}, "Delete node " + n.id));
  }

  function edgeForm(box, h, e) {
    h.textContent = "Edge " + e.id + ": " + e.src + " → " + e.dst;
    const s = resolve({$ref: "#/components/schemas/Edge"});
    for (const [k, ps] of Object.entries(s.properties)) {
      if (k === "src" || k === "dst" || k === "id") continue;
      field(box, ps, () => e, k, (s.required || []).includes(k));
    }
    box.append(el("button", {type: "button", class: "danger", id: "ed-delete-edge", onclick: deleteSelection}, "Delete edge " + e.id));
  }

  // --- expression completion ---------------------------------------------------

  // complete offers, while a $-name is typed, the nodes' names and the
  // paths seen in recent runs.
  const list = $("ed-complete");
  let compl = null; // {input, start, items, i}
  function candidates() {
    const out = new Set(["$trigger", "$item", "$item_index", "$vars", "$execution", "$now", "$node"]);
    for (const n of nodes()) if (n && n.id && n.type !== "trigger") { out.add("$" + n.id); out.add("$node." + n.id); }
    for (const p of state.paths) {
      out.add(p);
      if (!p.startsWith("$trigger")) out.add("$node." + p.slice(1));
    }
    return [...out];
  }
  function complete(input) {
    input.addEventListener("input", () => suggest(input));
    input.addEventListener("keydown", (ev) => {
      if (!compl || compl.input !== input) return;
      if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
        compl.i = (compl.i + (ev.key === "ArrowDown" ? 1 : compl.items.length - 1)) % compl.items.length;
        drawList(); ev.preventDefault();
      } else if (ev.key === "Enter" || ev.key === "Tab") {
        accept(compl.i); ev.preventDefault();
      } else if (ev.key === "Escape") { closeList(); ev.preventDefault(); ev.stopPropagation(); }
    });
    input.addEventListener("blur", () => setTimeout(() => { if (compl && compl.input === input) closeList(); }, 150));
  }
  function suggest(input) {
    const upto = input.value.slice(0, input.selectionStart);
    const m = /\$[A-Za-z0-9_.[\]"]*$/.exec(upto);
    if (!m) return closeList();
    const typed = m[0];
    const items = candidates().filter((c) => c.startsWith(typed) && c !== typed).sort().slice(0, 50);
    if (!items.length) return closeList();
    compl = {input, start: m.index, end: input.selectionStart, items, i: 0};
    const r = input.getBoundingClientRect();
    list.style.left = window.scrollX + r.left + "px";
    list.style.top = window.scrollY + r.bottom + 2 + "px";
    list.hidden = false;
    drawList();
  }
  function drawList() {
    list.replaceChildren(...compl.items.map((c, i) => el("li", {role: "option", id: "ed-opt-" + i, "aria-selected": i === compl.i ? "true" : "false",
      onmousedown: (ev) => { ev.preventDefault(); accept(i); }}, c)));
    compl.input.setAttribute("aria-controls", "ed-complete");
    compl.input.setAttribute("aria-activedescendant", "ed-opt-" + compl.i);
    const sel = list.children[compl.i];
    if (sel) sel.scrollIntoView({block: "nearest"});
  }
  function accept(i) {
    const {input, start, end, items} = compl;
    input.value = input.value.slice(0, start) + items[i] + input.value.slice(end);
    const at = start + items[i].length;
    input.setSelectionRange(at, at);
    closeList();
    input.dispatchEvent(new Event("input"));
  }
  function closeList() {
    if (compl) { compl.input.removeAttribute("aria-activedescendant"); }
    compl = null;
    list.hidden = true;
  }

  // --- validation as you edit -----------------------------------------------

  let timer = null;
  function scheduleCheck() {
    clearTimeout(timer);
    timer = setTimeout(check, 250);
  }
  async function check() {
    if (!root.dataset.check) return;
    const seq = ++state.seq;
    let text;
    try { text = currentText(); } catch (e) { return; }
    try {
      const res = await fetch("/ui/editor/validate", {method: "POST", credentials: "same-origin",
        headers: {"Content-Type": "application/json", "X-Rune-CSRF": csrf()}, body: text});
      if (!res.ok) throw new Error(res.status + " " + (await res.text()));
      const data = await res.json();
      if (seq !== state.seq) return; // a newer edit is being checked
      state.problems = data.problems || [];
      drawProblems();
      markProblems();
      root.dataset.checked = String(seq);
    } catch (e) { status("The check failed: " + e.message, "bad"); }
  }
  function drawProblems() {
    const ul = $("ed-problems");
    ul.replaceChildren(...state.problems.map((p) => el("li", {"data-node": p.node || undefined},
      (p.node ? p.node + ": " : p.edge ? "edge " + p.edge + ": " : "") + (p.path ? p.path + ": " : "") + p.message,
      p.node && nodeOf(p.node) ? el("button", {type: "button", onclick: () => select({kind: "node", id: p.node})}, "Show " + p.node) : null)));
    if (!state.problems.length) ul.append(el("li", {class: "ok"}, "No problems: the server accepts this definition."));
    root.dataset.problems = String(state.problems.length);
  }

  // --- the JSON view and the round trip ---------------------------------------

  // currentText is the definition as text: the text last loaded or typed
  // while the model still equals it (byte for byte, key order, spacing
  // and all), else the model written out.
  function currentText() {
    if (state.view === "json") return $("ed-json").value;
    return canon(state.model) === state.baseCanon ? state.baseText : JSON.stringify(state.model, null, 2);
  }

  // load makes text the definition being edited; false if it is not JSON.
  function load(text) {
    let v;
    try { v = JSON.parse(text); } catch (e) { status("The JSON view is not valid JSON: " + e.message, "bad"); return false; }
    if (!v || typeof v !== "object" || Array.isArray(v)) { status("The definition must be a JSON object.", "bad"); return false; }
    state.model = v;
    state.baseText = text;
    state.baseCanon = canon(v);
    return true;
  }

  function setView(v) {
    if (v === state.view) return;
    if (v === "json") {
      $("ed-json").value = currentText();
      state.view = "json";
    } else {
      const text = $("ed-json").value;
      if (text !== state.baseText && !load(text)) return;
      state.view = "canvas";
      if (state.sel && !(state.sel.kind === "node" ? nodeOf(state.sel.id) : edgeOf(state.sel.id))) state.sel = null;
      drawCanvas();
      drawForm();
    }
    $("ed-json-wrap").hidden = v !== "json";
    $("ed-main").hidden = v === "json";
    $("ed-layout").disabled = v === "json";
    $("ed-view").textContent = v === "json" ? "Canvas view" : "JSON view";
    $("ed-view").setAttribute("aria-pressed", v === "json" ? "true" : "false");
    root.dataset.view = v;
  }

  // --- save, with a diff against the current version -------------------------

  // diffLines is a line diff (longest common subsequence) of a and b.
  function diffLines(a, b) {
    const x = a.split("\n"), y = b.split("\n");
    if (x.length * y.length > 4e6) return [["del", a], ["add", b]];
    const m = x.length, n = y.length, L = Array.from({length: m + 1}, () => new Uint32Array(n + 1));
    for (let i = m - 1; i >= 0; i--) for (let j = n - 1; j >= 0; j--) L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
    const out = [];
    let i = 0, j = 0;
    while (i < m || j < n) {
      if (i < m && j < n && x[i] === y[j]) { out.push(["same", x[i]]); i++; j++; }
      else if (j < n && (i === m || L[i][j + 1] >= L[i + 1][j])) out.push(["add", y[j++]]);
      else out.push(["del", x[i++]]);
    }
    return out;
  }

  async function save() {
    let text;
    try { text = currentText(); JSON.parse(text); } catch (e) { status("Not saved: the definition is not valid JSON (" + e.message + ")", "bad"); return; }
    if (state.id && canon(JSON.parse(text)) === canon(JSON.parse(state.storedText))) {
      status("No changes: nothing saved (still version " + state.version + ").", "good");
      return;
    }
    const dlg = $("ed-dialog");
    $("ed-save-error").textContent = "";
    const before = state.id ? JSON.stringify(JSON.parse(state.storedText), null, 2) : "";
    const after = JSON.stringify(JSON.parse(text), null, 2);
    const d = diffLines(before, after);
    const adds = d.filter((l) => l[0] === "add").length, dels = d.filter((l) => l[0] === "del").length;
    $("ed-dialog-h").textContent = state.id ? "Save version " + (state.version + 1) + " of " + state.id : "Save the new workflow";
    $("ed-diff-sum").textContent = state.id ? `Against version ${state.version}: ${adds} line(s) added, ${dels} removed.` : `${adds} line(s).`;
    // Unchanged lines far from a change are left out.
    const near = d.map((l, k) => d.slice(Math.max(0, k - 2), k + 3).some((q) => q[0] !== "same"));
    const lines = [];
    d.forEach((l, k) => {
      if (near[k]) lines.push(el("span", {class: l[0]}, (l[0] === "add" ? "+ " : l[0] === "del" ? "- " : "  ") + l[1]));
      else if (k > 0 && near[k - 1]) lines.push(el("span", {class: "same"}, "  …"));
    });
    $("ed-diff").replaceChildren(...lines);
    $("ed-confirm").textContent = state.id ? "Save version " + (state.version + 1) : "Save";
    $("ed-confirm").onclick = () => store(text);
    dlg.showModal();
  }

  async function store(text) {
    const err = $("ed-save-error");
    err.textContent = "Saving…";
    try {
      const headers = {"Content-Type": "application/json", "X-Rune-CSRF": csrf()};
      let url = "/ui/api/v1/workflows", method = "POST";
      if (state.id) {
        url += "/" + encodeURIComponent(state.id); method = "PUT";
        headers["If-Match"] = '"v' + state.version + '"'; // another editor's save is not overwritten (412)
      }
      const res = await fetch(url, {method, credentials: "same-origin", headers, body: text});
      let data = null;
      try { data = await res.json(); } catch (e) { /* no body */ }
      if (!res.ok) {
        const ps = data && data.problems ? data.problems.map((p) => (p.path ? p.path + ": " : "") + p.message).join("; ") : "";
        throw new Error((data && data.detail ? data.detail : res.status + " " + res.statusText) + (ps && !(data.detail || "").includes(ps) ? " — " + ps : ""));
      }
      location.assign("/workflows/" + encodeURIComponent(data.id) + "?version=" + data.version);
    } catch (e) { err.textContent = e.message; }
  }

  // --- start ---------------------------------------------------------------

  async function start() {
    const text = $("ed-json").value;
    state.storedText = state.id ? text : "";
    if (!load(state.id ? text : '{"id": "", "nodes": [], "edges": []}')) return;
    if (!state.id) $("ed-json").value = state.baseText;
    try {
      const res = await fetch("/ui/api/v1/openapi.json", {credentials: "same-origin"});
      if (!res.ok) throw new Error(res.status + " " + res.statusText);
      loadTypes(await res.json());
    } catch (e) { status("The node schemas could not be read: " + e.message, "bad"); return; }
    $("ed-types").replaceChildren(...Object.keys(state.types).map((t) => el("button", {type: "button", "data-type": t,
      title: state.types[t].description, onclick: () => addNode(t)}, t)));
    layout(false);
    drawCanvas();
    drawForm();
    $("ed-view").addEventListener("click", () => setView(state.view === "json" ? "canvas" : "json"));
    $("ed-layout").addEventListener("click", () => { layout(false); drawCanvas(); status("Laid out."); });
    $("ed-delete").addEventListener("click", deleteSelection);
    $("ed-json").addEventListener("input", scheduleCheck);
    if ($("ed-save")) $("ed-save").addEventListener("click", save);
    $("ed-cancel").addEventListener("click", () => $("ed-dialog").close());
    document.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape" && state.connect) { state.connect = null; status(""); drawCanvas(); return; }
      if (ev.key === "Escape" && state.sel && ev.target.closest && ev.target.closest("#ed-canvas")) select(null);
      const t = ev.target;
      if ((ev.key === "Delete" || ev.key === "Backspace") && state.sel && state.view === "canvas" &&
          t.closest && t.closest("#ed-canvas")) { ev.preventDefault(); deleteSelection(); }
    });
    if (state.id) {
      fetch("/ui/editor/paths?workflow=" + encodeURIComponent(state.id), {credentials: "same-origin"})
        .then((r) => r.ok ? r.json() : {paths: []}).then((d) => { state.paths = d.paths || []; root.dataset.paths = String(state.paths.length); }).catch(() => {});
    }
    // A click on the canvas's background selects the workflow itself.
    $("ed-canvas").addEventListener("click", (ev) => {
      if (ev.target === $("ed-canvas") || ev.target === $("ed-nodes") || ev.target === $("ed-edges")) { state.connect = null; select(null); }
    });
    await check();
    root.dataset.loadms = String(Math.round(performance.now())); // from the navigation's start
    root.dataset.ready = "1"; // for tests and the load measurement
  }
  start();
})();
