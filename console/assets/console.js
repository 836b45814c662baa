// Rune console: the live parts. Pages are rendered by the server; this file
// only refreshes them from the server's event stream and sends the writes.
// It never builds HTML from data: fragments come rendered (and escaped) by
// the server, single values go in with textContent.
"use strict";

// Preferences kept in the browser: the colour theme (auto follows the
// system) and the zone times are shown in.
const pref = (k, d) => { try { return localStorage.getItem("rune." + k) || d; } catch (e) { return d; } };
const setPref = (k, v) => { try { localStorage.setItem("rune." + k, v); } catch (e) { /* private mode */ } };

function applyTheme() {
  const t = pref("theme", "auto");
  if (t === "auto") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = t;
  const b = document.getElementById("theme");
  if (b) {
    b.textContent = "Theme: " + t;
    b.setAttribute("aria-label", "Colour theme: " + (t === "auto" ? "as the system's" : t) + "; switch");
  }
}
applyTheme(); // before the first paint where the script is cached

const pad = (n, w) => String(n).padStart(w || 2, "0");

// absTime writes d in the chosen zone; clockTime its time of day alone.
function absTime(d, clock) {
  const utc = pref("tz", "utc") === "utc";
  const p = utc ? [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds()]
    : [d.getFullYear(), d.getMonth() + 1, d.getDate(), d.getHours(), d.getMinutes(), d.getSeconds(), d.getMilliseconds()];
  const time = pad(p[3]) + ":" + pad(p[4]) + ":" + pad(p[5]) + "." + pad(p[6], 3);
  if (clock) return time;
  return p[0] + "-" + pad(p[1]) + "-" + pad(p[2]) + " " + time + (utc ? " UTC" : " local");
}

// relTime says how long ago (or until) d is: "12 s ago", "in 3 min".
function relTime(d) {
  const s = Math.round((d.getTime() - Date.now()) / 1000), a = Math.abs(s);
  let v;
  if (a < 1) return "now";
  if (a < 60) v = a + " s";
  else if (a < 3600) v = Math.round(a / 60) + " min";
  else if (a < 86400) v = Math.round(a / 3600) + " h";
  else v = Math.round(a / 86400) + " d";
  return s < 0 ? v + " ago" : "in " + v;
}

// showTimes rewrites every <time data-t> under root from its datetime:
// abs (the time, relative in its tooltip), rel (the reverse), clock.
function showTimes(root) {
  (root || document).querySelectorAll("time[data-t]").forEach((el) => {
    const d = new Date(el.getAttribute("datetime"));
    if (isNaN(d)) return;
    const kind = el.dataset.t;
    el.textContent = kind === "rel" ? relTime(d) : absTime(d, kind === "clock");
    el.title = kind === "rel" ? absTime(d) : relTime(d) + (kind === "clock" ? " · " + absTime(d) : "");
  });
}

// The list's date filters are in UTC on the server: in local mode the
// inputs show and take local times and are sent converted.
function localInput(utcValue) {
  const d = new Date(utcValue + "Z");
  if (isNaN(d)) return utcValue;
  return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" + pad(d.getHours()) + ":" + pad(d.getMinutes());
}
function zoneFilters() {
  const form = document.getElementById("filters");
  if (!form || pref("tz", "utc") === "utc") return;
  form.querySelectorAll(".zone").forEach((z) => { z.textContent = "(local)"; });
  const inputs = form.querySelectorAll("input[data-utc]");
  inputs.forEach((i) => { if (i.value) i.value = localInput(i.value); });
  form.addEventListener("submit", () => {
    inputs.forEach((i) => {
      if (!i.value) return;
      const d = new Date(i.value);
      if (!isNaN(d)) i.value = d.toISOString().slice(0, 16);
    });
  });
}

function toolbar() {
  const theme = document.getElementById("theme");
  if (theme) {
    theme.hidden = false;
    theme.addEventListener("click", () => {
      const next = {auto: "dark", dark: "light", light: "auto"}[pref("theme", "auto")] || "auto";
      setPref("theme", next);
      applyTheme();
    });
  }
  const tz = document.getElementById("tz");
  if (tz) {
    const label = () => {
      const utc = pref("tz", "utc") === "utc";
      tz.textContent = utc ? "UTC" : "Local time";
      tz.setAttribute("aria-label", utc ? "Times are shown in UTC: show local time" : "Times are shown in local time: show UTC");
    };
    tz.hidden = false;
    label();
    tz.addEventListener("click", () => {
      setPref("tz", pref("tz", "utc") === "utc" ? "local" : "utc");
      label();
      showTimes();
      const form = document.getElementById("filters");
      if (form) location.reload(); // the filters' values change zone
    });
  }
  showTimes();
  setInterval(() => showTimes(), 15000);
  zoneFilters();
}

const csrf = () => (document.querySelector('meta[name="csrf"]') || {}).content || "";

// problemText is what an API error says: the detail of its problem details
// (RFC 9457, application/problem+json; an invalid workflow's detail lists
// every problem), else the status.
function problemText(data, res) {
  return data && data.detail ? data.detail : res.status + " " + res.statusText;
}

// post sends a console write through /ui/api with the CSRF header.
async function post(url, body) {
  const res = await fetch(url, {
    method: "POST", credentials: "same-origin",
    headers: {"Content-Type": "application/json", "X-Rune-CSRF": csrf()},
    body: body === undefined ? "" : body,
  });
  let data = null;
  try { data = await res.json(); } catch (e) { /* no body */ }
  if (!res.ok) {
    throw new Error(problemText(data, res));
  }
  return data;
}

// throttled runs f at most once per wait ms, and once more after the last
// call. The pause grows with f's own time (3×), so a page that is slow to
// re-read (a split of 10,000 branches) costs the server a third of a core
// at most, however fast events come.
function throttled(f, wait) {
  let timer = null, again = false;
  const run = async () => {
    again = false;
    const start = performance.now();
    try { await f(); } finally {
      const pause = Math.max(wait, 3 * (performance.now() - start));
      timer = setTimeout(() => { timer = null; if (again) trigger(); }, pause);
    }
  };
  const trigger = () => { if (timer) { again = true; } else { timer = -1; run(); } };
  return trigger;
}

// listen opens an event stream and calls f on every event kind the server sends.
function listen(url, f) {
  const es = new EventSource(url);
  for (const kind of ["status", "completion", "execution"]) {
    es.addEventListener(kind, (ev) => f(kind, ev, es));
  }
  return es;
}

function executionsPage() {
  const table = document.getElementById("executions");
  if (!table || !table.dataset.live) return;
  const refresh = throttled(async () => {
    const res = await fetch(table.dataset.rows, {credentials: "same-origin"});
    if (!res.ok) return;
    const rows = document.getElementById("rows");
    rows.innerHTML = await res.text();
    showTimes(rows);
  }, 500);
  listen(table.dataset.live, refresh);
  // Executions enqueued but not yet run have no event: look now and then.
  setInterval(refresh, 5000);
}

function executionPage() {
  const root = document.getElementById("execution");
  if (!root) return;
  const id = root.dataset.id;
  const panel = document.getElementById("panel");
  let panelURL = null, opener = null;

  // A load that answers after another began (a click during a refresh)
  // is dropped: the panel shows what was asked last.
  const loadPanel = async (url) => {
    panelURL = url;
    const res = await fetch(url, {credentials: "same-origin"});
    if (!res.ok || panelURL !== url) return;
    const html = await res.text();
    if (panelURL !== url) return;
    const wasHidden = panel.hidden;
    panel.innerHTML = html;
    showTimes(panel);
    panel.hidden = false;
    if (wasHidden) { const h = document.getElementById("panel-h"); if (h) h.focus(); }
  };
  // Closing gives the focus back to what opened the panel, or to its
  // replacement when a live refresh re-rendered it meanwhile.
  const closePanel = () => {
    panel.hidden = true; panelURL = null;
    let back = opener;
    if (back && !document.contains(back)) {
      back = back.id ? document.getElementById(back.id)
        : document.querySelector('#graph .node[data-node="' + CSS.escape(back.dataset.node || back.dataset.nodeLink || "") + '"]');
    }
    if (back) back.focus();
  };
  // "Re-run from here" in a node's panel (issue 34): a new execution that
  // starts at the node with the (edited) context.
  panel.addEventListener("click", async (ev) => {
    const b = ev.target.closest("#rerun-node");
    if (!b) return;
    const err = document.getElementById("rerun-node-error");
    err.textContent = "";
    let acc;
    try { acc = JSON.parse(document.getElementById("rerun-context").value); }
    catch (e) { err.textContent = "The context is not JSON: " + e.message; return; }
    b.disabled = true;
    try {
      const x = await post("/ui/api/v1/executions/" + encodeURIComponent(id) + "/rerun",
        JSON.stringify({from_node: b.dataset.node, context: acc}));
      location.assign("/executions/" + encodeURIComponent(x.id));
    } catch (e) { b.disabled = false; err.textContent = e.message; }
  });
  panel.addEventListener("click", (ev) => {
    const a = ev.target.closest("a[data-panel]");
    if (a) { ev.preventDefault(); loadPanel(a.getAttribute("href")); return; }
    if (ev.target.closest("[data-close]")) closePanel();
  });
  document.addEventListener("keydown", (ev) => { if (ev.key === "Escape" && !panel.hidden) closePanel(); });
  const openNode = (node, from) => {
    opener = from || document.activeElement;
    loadPanel("/ui/executions/" + encodeURIComponent(id) + "/nodes/" + encodeURIComponent(node));
  };
  document.querySelectorAll("#graph .node").forEach((g) => {
    g.addEventListener("click", () => openNode(g.dataset.node, g));
    g.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); openNode(g.dataset.node, g); }
    });
  });
  // Links to a node (the failure banner, the timeline) open its panel;
  // ?node=ID does on load, so such a link can be shared.
  root.addEventListener("click", (ev) => {
    const a = ev.target.closest("a[data-node-link]");
    if (!a) return;
    ev.preventDefault();
    history.replaceState(null, "", "?node=" + encodeURIComponent(a.dataset.nodeLink));
    openNode(a.dataset.nodeLink, a);
  });
  const linked = new URLSearchParams(location.search).get("node");
  if (linked) openNode(linked, document.querySelector('#graph .node[data-node="' + CSS.escape(linked) + '"]'));

  // Cancel asks first: the button opens a confirmation beside it.
  const bindCancel = () => {
    const b = document.getElementById("cancel");
    if (!b) return;
    const box = document.getElementById("cancel-confirm");
    const yes = document.getElementById("cancel-yes"), no = document.getElementById("cancel-no");
    b.addEventListener("click", () => {
      box.hidden = false; b.setAttribute("aria-expanded", "true"); no.focus();
    });
    no.addEventListener("click", () => {
      box.hidden = true; b.setAttribute("aria-expanded", "false"); b.focus();
    });
    yes.addEventListener("click", async () => {
      yes.disabled = true;
      try { await post("/ui/api/v1/executions/" + encodeURIComponent(id) + "/cancel"); }
      catch (e) { yes.disabled = false; document.getElementById("cancel-error").textContent = e.message; return; }
      box.hidden = true;
      refresh();
    });
  };
  bindCancel();
  // Execution Pause / Resume ask first too (issue 34).
  const bindPause = () => {
    const b = document.getElementById("xpause");
    if (!b) return;
    const box = document.getElementById("xpause-confirm");
    const yes = document.getElementById("xpause-yes"), no = document.getElementById("xpause-no");
    b.addEventListener("click", () => { box.hidden = false; b.setAttribute("aria-expanded", "true"); no.focus(); });
    no.addEventListener("click", () => { box.hidden = true; b.setAttribute("aria-expanded", "false"); b.focus(); });
    yes.addEventListener("click", async () => {
      yes.disabled = true;
      try { await post("/ui/api/v1/executions/" + encodeURIComponent(id) + "/" + b.dataset.action); }
      catch (e) { yes.disabled = false; document.getElementById("xpause-error").textContent = e.message; return; }
      box.hidden = true;
      refresh();
    });
  };
  bindPause();

  let final = !root.dataset.live;
  const refresh = throttled(async () => {
    const tl = document.getElementById("timeline");
    const res = await fetch("/ui/executions/" + encodeURIComponent(id) + "/state?timeline=" + encodeURIComponent(tl.dataset.key || ""), {credentials: "same-origin"});
    if (!res.ok) return;
    const st = await res.json();
    document.querySelectorAll("#graph .node").forEach((g) => {
      const n = st.nodes[g.dataset.node] || {state: "pending", progress: "", note: ""};
      g.setAttribute("class", "node st-" + n.state);
      g.querySelector(".state").textContent = n.label || "not run yet";
      g.querySelector(".progress").textContent = n.progress || n.note || "";
      g.setAttribute("aria-label", g.getAttribute("aria-label").replace(/: [^:]*$/, ": " + (n.label || "not run yet")));
    });
    // A confirmation being answered is not swept away by a refresh.
    const confirming = document.getElementById("cancel-confirm"), pausing = document.getElementById("xpause-confirm");
    const summary = document.getElementById("summary");
    if (st.summary !== summary.dataset.html && !((confirming && !confirming.hidden || pausing && !pausing.hidden) && !st.final)) {
      // A keyboard user's focus inside the summary (the failure banner's
      // link) survives the re-render: the new element of that id takes it.
      const had = summary.contains(document.activeElement) ? document.activeElement.id : "";
      summary.innerHTML = st.summary;
      summary.dataset.html = st.summary;
      showTimes(summary);
      bindCancel();
      bindPause();
      const back = had && document.getElementById(had);
      if (back) back.focus();
    }
    // The timeline comes only when it changed since the one shown.
    if (st.timeline !== undefined) {
      const atEnd = tl.scrollTop + tl.clientHeight >= tl.scrollHeight - 4;
      tl.innerHTML = st.timeline;
      tl.dataset.key = st.timeline_key;
      showTimes(tl);
      if (atEnd) tl.scrollTop = tl.scrollHeight;
    }
    if (st.final) {
      final = true;
      const rerun = document.getElementById("rerun");
      if (rerun) rerun.disabled = false;
      if (es) es.close();
    }
    if (panelURL && !panel.hidden) loadPanel(panelURL);
  }, 300);

  let es = null;
  if (!final) {
    es = listen(root.dataset.live, (kind) => { refresh(); if (kind === "completion") setTimeout(refresh, 1000); });
  }

  const input = document.getElementById("rerun-input");
  const original = input.value;
  const rerun = document.getElementById("rerun");
  if (rerun) rerun.addEventListener("click", async () => {
    const err = document.getElementById("rerun-error");
    err.textContent = "";
    try {
      let x;
      if (input.value === original) {
        x = await post("/ui/api/v1/executions/" + encodeURIComponent(id) + "/rerun");
      } else {
        x = await post("/ui/api/v1/workflows/" + encodeURIComponent(root.dataset.workflow) +
          "/executions?version=" + encodeURIComponent(root.dataset.version), input.value);
      }
      location.assign("/executions/" + encodeURIComponent(x.id));
    } catch (e) { err.textContent = e.message; }
  });
}

function workflowPage() {
  const root = document.getElementById("workflow");
  if (!root) return;
  const wid = root.dataset.id;
  const trigger = document.getElementById("trigger");
  if (trigger) trigger.addEventListener("click", async () => {
    const err = document.getElementById("trigger-error");
    err.textContent = "";
    try {
      const x = await post("/ui/api/v1/workflows/" + encodeURIComponent(wid) + "/executions?version=" +
        encodeURIComponent(root.dataset.version), document.getElementById("trigger-input").value);
      location.assign("/executions/" + encodeURIComponent(x.id));
    } catch (e) { err.textContent = e.message; }
  });
  // Pause / Resume ask first (issue 34).
  const toggle = document.getElementById("pause-toggle");
  if (toggle) {
    const box = document.getElementById("pause-confirm");
    toggle.addEventListener("click", () => { box.hidden = false; toggle.setAttribute("aria-expanded", "true"); document.getElementById("pause-no").focus(); });
    document.getElementById("pause-no").addEventListener("click", () => { box.hidden = true; toggle.setAttribute("aria-expanded", "false"); toggle.focus(); });
    document.getElementById("pause-yes").addEventListener("click", async () => {
      try {
        await post("/ui/api/v1/workflows/" + encodeURIComponent(wid) + "/" + toggle.dataset.action);
        location.reload();
      } catch (e) { document.getElementById("pause-error").textContent = e.message; }
    });
  }
  const save = document.getElementById("save");
  if (save) save.addEventListener("click", async () => {
    const err = document.getElementById("save-error");
    err.textContent = "";
    try {
      const w = await fetch("/ui/api/v1/workflows/" + encodeURIComponent(wid), {
        method: "PUT", credentials: "same-origin",
        // The version the edit began from: another editor's save since
        // then is not overwritten (412, said in save-error).
        headers: {"Content-Type": "application/json", "X-Rune-CSRF": csrf(), "If-Match": '"v' + root.dataset.base + '"'},
        body: document.getElementById("definition").value,
      });
      const data = await w.json();
      if (!w.ok) throw new Error(problemText(data, w));
      location.assign("/workflows/" + encodeURIComponent(wid) + "?version=" + data.version);
    } catch (e) { err.textContent = e.message; }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  toolbar();
  executionsPage();
  executionPage();
  workflowPage();
  document.body.dataset.ready = "1"; // for tests: the handlers are bound
});

// Approvals (issue 34): Approve and Reject post the decision through
// /ui/api, then the page is read again.
document.querySelectorAll("td.approval").forEach((td) => {
  const decide = async (approved) => {
    td.querySelectorAll("button").forEach((b) => { b.disabled = true; });
    const comment = td.querySelector("input[name=comment]").value;
    try {
      await post("/ui/api/v1/executions/" + encodeURIComponent(td.dataset.execution) + "/approvals/" +
        encodeURIComponent(td.dataset.node), JSON.stringify({approved: approved, comment: comment}));
    } catch (e) {
      td.querySelector(".error").textContent = e.message;
      td.querySelectorAll("button").forEach((b) => { b.disabled = false; });
      return;
    }
    location.reload();
  };
  td.querySelector("button.approve").addEventListener("click", () => decide(true));
  td.querySelector("button.reject").addEventListener("click", () => decide(false));
});

// Templates (issue 36): the preview pane renders the shown version with
// the sample data through /ui/api, as POST /v1/templates/{name}/preview.
(() => {
  const pane = document.getElementById("template-preview");
  if (!pane) return;
  const err = document.getElementById("preview-error");
  document.getElementById("preview-run").addEventListener("click", async () => {
    err.textContent = "";
    let data;
    try {
      data = JSON.parse(document.getElementById("preview-data").value || "{}");
    } catch (e) {
      err.textContent = "Sample data: not JSON: " + e.message;
      return;
    }
    try {
      const out = await post("/ui/api/v1/templates/" + encodeURIComponent(pane.dataset.name) + "/preview",
        JSON.stringify({data: data, version: Number(pane.dataset.version)}));
      for (const f of ["subject", "text", "html", "body"]) {
        document.getElementById("preview-" + f).textContent = out[f] || "";
      }
      document.getElementById("preview-what").textContent = "Version " + out.version +
        (out.layouts.length ? ", in layout " + out.layouts.join(", then ") : "");
      document.getElementById("preview-out").hidden = false;
    } catch (e) {
      err.textContent = e.message;
    }
  });
})();
