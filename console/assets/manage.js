"use strict";
// Issue 38: the management pages and the list's bulk selection. No HTML
// is built from data: fragments come rendered from the server.

// Buttons with data-confirm ask before their form is sent.
function confirmButtons() {
  document.querySelectorAll("button[data-confirm]").forEach((b) => {
    b.addEventListener("click", (ev) => {
      if (!window.confirm(b.dataset.confirm)) ev.preventDefault();
    });
  });
}

// The list's selection survives the live refresh of its rows, and says
// how many are selected.
function bulkSelection() {
  const form = document.getElementById("bulk"), rows = document.getElementById("rows");
  if (!form || !rows) return;
  const picked = new Set();
  const count = document.getElementById("bulk-count");
  const say = () => {
    count.textContent = picked.size ? picked.size + " selected:" : "Select executions to act on them:";
    form.querySelectorAll("button").forEach((b) => { b.disabled = picked.size === 0; });
  };
  const restore = () => rows.querySelectorAll("input.pick").forEach((c) => { c.checked = picked.has(c.value); });
  rows.addEventListener("change", (ev) => {
    const c = ev.target;
    if (!c.classList || !c.classList.contains("pick")) return;
    if (c.checked) picked.add(c.value); else picked.delete(c.value);
    say();
  });
  const all = document.getElementById("select-all");
  if (all) {
    all.addEventListener("change", () => {
      rows.querySelectorAll("input.pick").forEach((c) => {
        c.checked = all.checked;
        if (all.checked) picked.add(c.value); else picked.delete(c.value);
      });
      say();
    });
  }
  // Rows the refresh removed stay selected: their ids go as hidden fields.
  form.addEventListener("submit", () => {
    form.querySelectorAll("input.kept").forEach((i) => i.remove());
    const shown = new Set([...rows.querySelectorAll("input.pick")].map((c) => c.value));
    for (const id of picked) {
      if (shown.has(id)) continue;
      const i = document.createElement("input");
      i.type = "hidden"; i.name = "id"; i.value = id; i.className = "kept";
      form.appendChild(i);
    }
  });
  new MutationObserver(restore).observe(rows, {childList: true});
  say();
}

// The schedule form previews the cron's next fire times as it is typed.
function cronPreview() {
  const box = document.getElementById("cron-preview");
  const cron = document.getElementById("cron"), tz = document.getElementById("timezone");
  if (!box || !cron) return;
  let timer = null;
  const look = async () => {
    if (!cron.value.trim()) { box.textContent = ""; return; }
    const q = new URLSearchParams({cron: cron.value, timezone: tz.value});
    const res = await fetch(box.dataset.preview + "?" + q, {credentials: "same-origin"});
    if (!res.ok) return;
    box.innerHTML = await res.text();
    if (typeof showTimes === "function") showTimes(box);
    box.dataset.cron = cron.value;
  };
  for (const el of [cron, tz]) {
    el.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(look, 250); });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  confirmButtons();
  bulkSelection();
  cronPreview();
});
