// Rune console: the live parts. Pages are rendered by the server; this file
// only refreshes them from the server's event stream and sends the writes.
// It never builds HTML from data: fragments come rendered (and escaped) by
// the server, single values go in with textContent.
"use strict";

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
    if (res.ok) document.getElementById("rows").innerHTML = await res.text();
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
  let panelURL = null;

  // A load that answers after another began (a click during a refresh)
  // is dropped: the panel shows what was asked last.
  const loadPanel = async (url) => {
    panelURL = url;
    const res = await fetch(url, {credentials: "same-origin"});
    if (!res.ok || panelURL !== url) return;
    const html = await res.text();
    if (panelURL !== url) return;
    panel.innerHTML = html;
    panel.hidden = false;
  };
  panel.addEventListener("click", (ev) => {
    const a = ev.target.closest("a[data-panel]");
    if (a) { ev.preventDefault(); loadPanel(a.getAttribute("href")); return; }
    if (ev.target.closest("[data-close]")) { panel.hidden = true; panelURL = null; }
  });
  const openNode = (g) => loadPanel("/ui/executions/" + encodeURIComponent(id) + "/nodes/" + encodeURIComponent(g.dataset.node));
  document.querySelectorAll("#graph .node").forEach((g) => {
    g.addEventListener("click", () => openNode(g));
    g.addEventListener("keydown", (ev) => { if (ev.key === "Enter") openNode(g); });
  });

  const bindCancel = () => {
    const b = document.getElementById("cancel");
    if (!b) return;
    b.addEventListener("click", async () => {
      b.disabled = true;
      try { await post("/ui/api/v1/executions/" + encodeURIComponent(id) + "/cancel"); }
      catch (e) { b.disabled = false; b.title = e.message; }
      refresh();
    });
  };
  bindCancel();

  let final = !root.dataset.live;
  const refresh = throttled(async () => {
    const res = await fetch("/ui/executions/" + encodeURIComponent(id) + "/state", {credentials: "same-origin"});
    if (!res.ok) return;
    const st = await res.json();
    document.querySelectorAll("#graph .node").forEach((g) => {
      const n = st.nodes[g.dataset.node] || {state: "pending", progress: "", note: ""};
      g.setAttribute("class", "node st-" + n.state);
      g.querySelector(".state").textContent = n.state;
      g.querySelector(".progress").textContent = n.progress || n.note || "";
    });
    document.getElementById("summary").innerHTML = st.summary;
    bindCancel();
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
  const save = document.getElementById("save");
  if (save) save.addEventListener("click", async () => {
    const err = document.getElementById("save-error");
    err.textContent = "";
    try {
      const w = await fetch("/ui/api/v1/workflows/" + encodeURIComponent(wid), {
        method: "PUT", credentials: "same-origin",
        headers: {"Content-Type": "application/json", "X-Rune-CSRF": csrf()},
        body: document.getElementById("definition").value,
      });
      const data = await w.json();
      if (!w.ok) throw new Error(problemText(data, w));
      location.assign("/workflows/" + encodeURIComponent(wid) + "?version=" + data.version);
    } catch (e) { err.textContent = e.message; }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  executionsPage();
  executionPage();
  workflowPage();
});
