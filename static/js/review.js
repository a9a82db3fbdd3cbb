// A review queue, one rollout at a time (runs.review.api): the rollout in full with its labels, its group around it
// as previews, labels put on and taken off by number keys, j for the next, k to go back. Model text and reviewers'
// text go in as text only (transcript.js, textContent).

import { el, fmt } from "./dom.js";
import { transcript } from "./transcript.js";

const root = document.getElementById("review");
const base = `/api/runs/${root.dataset.run}/reviews/${root.dataset.review}`;
const names = JSON.parse(document.getElementById("label-names").textContent);
const csrf = root.querySelector("[name=csrfmiddlewaretoken]").value;
const itemBox = document.getElementById("item");
const errorBox = document.getElementById("review-error");
let current = null; // the item shown
let busy = false;

async function call(method, url, body) {
  const response = await fetch(url, { method, headers: { "Content-Type": "application/json", "X-CSRFToken": csrf,
    Accept: "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.detail || `error ${response.status}`);
  return data;
}

function showProgress(p) {
  document.getElementById("progress").textContent = `${p.done} of ${p.total} done` +
    (p.held ? ` · ${p.held} with reviewers now` : "");
  const bar = document.getElementById("progress-bar");
  bar.max = p.total;
  bar.value = p.done;
}

function showTallies(tallies) {
  document.getElementById("finished").hidden = false;
  document.getElementById("tallies").replaceChildren(...(tallies.length ? tallies.map((t) => el("li", {},
    el("a", { href: t.url, text: t.name }), `: ${t.rollouts} rollouts`)) : [el("li", { class: "muted", text: "No labels yet." })]));
}

function marks(r) {
  const labeled = r.labels.filter((l) => l.span).map((l) => [l.span[0], l.span[1], "label-span"]);
  return [...r.spans, ...labeled].sort((a, b) => a[0] - b[0]);
}

function groupTable(group, id) {
  const rows = group.completions.map((c) => el("tr", { class: c.id === id ? "current" : "", "data-id": c.id },
    el("td", { class: "num", text: `#${c.index}` }), el("td", { class: "num", text: fmt(c.reward) }),
    el("td", { class: "num", text: fmt(c.advantage) }),
    el("td", {}, el("div", { class: "preview", text: c.preview ? `${c.preview.head} … ${c.preview.tail}` : c.completion || "" }))));
  return el("details", { class: "review-group", open: "" },
    el("summary", { text: `its group: ${group.completions.length} completions, mean ${fmt(group.mean)}, std ${fmt(group.std)}` }),
    el("table", { class: "table" }, el("thead", {}, el("tr", {}, ...["", "reward", "advantage", "completion"].map((h) => el("th", { text: h })))),
      el("tbody", {}, ...rows)));
}

function show(data) {
  current = data.item;
  showProgress(data.progress);
  if (!current) {
    itemBox.replaceChildren(el("p", { id: "queue-empty", text: data.progress.done >= data.progress.total
      ? "Every rollout of this review is done." : "The rest are with other reviewers now." }));
    showTallies(data.tallies || []);
    return;
  }
  const r = current.rollout;
  if (!r) {
    itemBox.replaceChildren(el("p", { class: "muted", text: `Item ${current.position + 1}: its rollout is no longer stored.` }));
    return;
  }
  const rewards = Object.entries(r.rewards).map(([k, v]) => `${k} ${fmt(v)}`).join(" · ");
  const labels = el("ul", { class: "labels", id: "item-labels" }, ...r.labels.map((l) => el("li", {},
    el("span", { class: `badge label-tag${l.on === "group" ? " on-group" : ""}`, title: l.note || l.name,
      text: `${l.name}${l.on === "group" ? " (group)" : ""} · ${l.author}` }))));
  itemBox.replaceChildren(
    el("article", { class: "rollout", "data-id": r.id, "data-position": current.position },
      el("div", { class: "rollout-head" },
        el("strong", { text: `${current.position + 1} of ${data.progress.total}` }),
        el("a", { href: r.link, class: "where", text: `step ${r.step} · group ${r.group} · #${r.index}` }),
        el("span", { class: "num", text: `reward ${fmt(r.reward)}` }),
        el("span", { class: "num", text: `advantage ${fmt(r.advantage)}` }),
        el("span", { class: "muted", text: rewards }),
        current.done ? el("span", { class: "badge", text: "done" }) : ""),
      labels,
      el("details", { class: "prompt-details" }, el("summary", { text: "prompt" }), el("pre", { class: "prompt", text: r.prompt })),
      transcript(r.completion, marks(r))),
    current.rollout && current.group ? groupTable(current.group, r.id) : "");
  for (const li of document.querySelectorAll("#label-keys li")) {
    const name = names[Number(li.dataset.key) - 1];
    li.classList.toggle("on", r.labels.some((l) => l.mine && l.on === "rollout" && l.name === name));
  }
}

function selectedSpan(completion) {
  const selection = getSelection();
  if (!selection || selection.isCollapsed || !itemBox.contains(selection.anchorNode)) return null;
  const start = completion.indexOf(selection.toString());
  return selection.toString().trim() && start >= 0 ? [start, start + selection.toString().length] : null;
}

async function step(action) {
  if (busy) return;
  busy = true;
  errorBox.textContent = "";
  try {
    await action();
  } catch (e) {
    errorBox.textContent = e.message;
  } finally {
    busy = false;
  }
}

const next = () => step(async () => {
  show(await call("POST", `${base}/next`, current && !current.done ? { done: current.position } : {}));
  window.scrollTo(0, 0);
});
const back = () => step(async () => {
  if (!current) return;
  show(await call("GET", `${base}/items/${current.position}?previous=true`));
});

const toggle = (n) => step(async () => {
  const name = names[n - 1];
  const r = current && current.rollout;
  if (!name || !r) return;
  const mine = r.labels.find((l) => l.mine && l.on === "rollout" && l.name === name);
  if (mine) {
    const response = await fetch(`/api/runs/${root.dataset.run}/labels/${mine.id}`, { method: "DELETE", headers: { "X-CSRFToken": csrf } });
    if (!response.ok) throw new Error(`could not remove the label (${response.status})`);
  } else {
    const note = document.getElementById("label-note");
    const label = { name, rollout: r.id, review: Number(root.dataset.review) };
    if (note.value.trim()) label.note = note.value;
    const span = selectedSpan(r.completion);
    if (span) label.span = span;
    await call("POST", `/api/runs/${root.dataset.run}/labels`, { labels: [label] });
    note.value = "";
  }
  show(await call("GET", `${base}/items/${current.position}`));
});

document.addEventListener("keydown", (event) => {
  const help = document.getElementById("help");
  if (event.key === "Escape") { help.hidden = true; return; }
  if (event.target.closest("input, textarea, select") || event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.key === "?") help.hidden = !help.hidden;
  else if (event.key === "j") next();
  else if (event.key === "k") back();
  else if (/^[1-9]$/.test(event.key)) toggle(Number(event.key));
  else return;
  event.preventDefault();
});
document.getElementById("review-next").addEventListener("click", next);
document.getElementById("review-back").addEventListener("click", back);
next();
