// The rollout browser: rows of the filtered, sorted rollouts (rollouts.json with this page's own query string), one
// keyset page at a time, each a transcript. New steps pushed by the server refresh the first page in place; deeper
// pages say they have arrived. Model text goes in as text only (transcript.js).

import { el, fmt, getJSON, permalink } from "./dom.js";
import { onRunEvents } from "./live.js";
import { hasTools, processSteps, transcript, turns } from "./transcript.js";

const root = document.getElementById("browser");
const runId = root.dataset.run;
const query = new URLSearchParams(location.search);
const firstPage = !query.has("after");
const lengthsKnown = root.dataset.lengthsKnown === "1"; // an import's files may hold no token counts (stored as 0)
let shown = 0;
const LONG = 4000; // characters past which a searched completion gets a scrolled box of its own

function rewardsText(rewards) {
  return Object.entries(rewards).map(([name, v]) => `${name} ${fmt(v)}`).join(" · ");
}

const csrf = document.querySelector("#sft-form [name=csrfmiddlewaretoken]")?.value ?? "";

// A label's badge: its name (and "group" when it is on the row's group), its author and note on hover, the note
// shown under it; one of your own has a button that removes it.
function labelBadge(r, label) {
  const badge = el("span", { class: `badge label-tag${label.on === "group" ? " on-group" : ""}`, "data-label": label.id,
    title: `${label.name} · by ${label.author}${label.on === "group" ? " · on the whole group" : ""}${label.note ? `\n${label.note}` : ""}`,
    text: `${label.name}${label.on === "group" ? " (group)" : ""} · ${label.author}` });
  if (label.mine) {
    const remove = el("button", { type: "button", class: "link-button label-remove", "aria-label": `remove the label ${label.name}`, text: "×" });
    remove.addEventListener("click", async () => {
      const response = await fetch(`/api/runs/${runId}/labels/${label.id}`, { method: "DELETE", headers: { "X-CSRFToken": csrf } });
      if (response.ok) redraw(r, r.labels.filter((l) => l.id !== label.id));
    });
    badge.append(" ", remove);
  }
  const item = el("li", {}, badge);
  if (label.note) item.append(el("span", { class: "small muted label-note", text: ` ${label.note}` }));
  return item;
}

// The text selected inside this row's completion, as [start, end) of the completion (UTF-16 units, as the server
// keeps spans), or null; the selection is found as written (a rendered formula's text is not the completion's).
function selectedSpan(article, completion) {
  const selection = window.getSelection();
  if (!selection || selection.isCollapsed || !article.contains(selection.anchorNode)) return null;
  const text = selection.toString();
  if (!text.trim()) return null;
  const start = completion.indexOf(text);
  return start < 0 ? { missing: text } : [start, start + text.length];
}

function labelForm(r, article) {
  const span = selectedSpan(article, r.completion);
  const name = el("input", { type: "text", name: "label", list: "label-names", required: "", maxlength: "64",
    placeholder: "reward hack", "aria-label": "label", class: "label-name" });
  const note = el("textarea", { name: "note", rows: "2", maxlength: "4000", placeholder: "note (optional)", "aria-label": "note", class: "label-note-input" });
  const error = el("span", { class: "error small label-error", role: "alert" });
  const form = el("form", { class: "label-form inline-form" }, name, note);
  if (Array.isArray(span)) {
    form.append(el("span", { class: "small muted label-span-note", text: `points at the selected text (${span[1] - span[0]} characters)` }));
  } else if (span && span.missing) {
    form.append(el("span", { class: "small muted label-span-note", text: "the selected text is not in the completion as written: no span" }));
  }
  form.append(el("button", { type: "submit", text: "Save label" }), error);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const label = { name: name.value, rollout: r.id, note: note.value };
    if (Array.isArray(span)) label.span = span;
    const response = await fetch(`/api/runs/${runId}/labels`, { method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf }, body: JSON.stringify({ labels: [label] }) });
    const data = await response.json().catch(() => ({}));
    if (!response.ok) {
      error.textContent = data.detail || `error ${response.status}`;
      return;
    }
    const known = new Set(r.labels.map((l) => l.id));
    redraw(r, [...r.labels, ...data.labels.filter((l) => !known.has(l.id))]);
  });
  setTimeout(() => name.focus(), 0);
  return form;
}

function labelsBlock(r, article) {
  const list = el("ul", { class: "labels" }, ...r.labels.map((label) => labelBadge(r, label)));
  const open = el("button", { type: "button", class: "link-button label-open", text: "label…",
    title: "label this completion (select some of its text first to point at it)" });
  // the selection is read before the click takes it away
  let form = null;
  open.addEventListener("mousedown", () => { form = labelForm(r, article); });
  open.addEventListener("click", () => {
    const old = article.querySelector(".label-form");
    if (old) old.remove();
    article.querySelector(".labels-block").append(form || labelForm(r, article));
    form = null;
  });
  return el("div", { class: "labels-block" }, list, open);
}

function redraw(r, labels) {
  r.labels = labels;
  const old = document.querySelector(`article.rollout[data-id="${r.id}"]`);
  if (old) old.replaceWith(rowCard(r));
}

// The transcript's marks: reflection phrases, and the spans labels point at.
function marks(r) {
  const labeled = (r.labels || []).filter((l) => l.span).map((l) => [l.span[0], l.span[1], "label-span"]);
  return labeled.length ? [...r.spans, ...labeled].sort((a, b) => a[0] - b[0]) : r.spans;
}

function rowCard(r) {
  const head = el("div", { class: "rollout-head" },
    el("a", { href: r.group_url, class: "where", text: `step ${r.step} · group ${r.group} · #${r.index}` }),
    el("span", { class: `num adv ${r.advantage >= 0 ? "pos" : "neg"}`, text: `advantage ${fmt(r.advantage)}` }),
    el("span", { class: "num total", text: `reward ${fmt(r.reward)}` }),
    el("span", { class: "muted", text: rewardsText(r.rewards) }),
    el("span", { class: "num", text: `${lengthsKnown ? `${r.length} tokens` : "length unknown"}${r.truncated ? " · truncated ✂" : ""}` }));
  if (r.replay) {
    head.append(el("span", { class: "num replay", title: "the reward replay in view, beside what TRL stored",
      text: `replay: reward ${fmt(r.replay.new_reward)} · advantage ${fmt(r.replay.new_advantage)} · rank ${r.replay.old_rank} → ${r.replay.new_rank}` }));
  }
  if (r.zero_std) head.append(el("span", { class: "badge warn", text: "zero-variance group" }));
  for (const phrase of r.reflections) head.append(el("span", { class: "badge reflection-tag", text: phrase }));
  head.append(el("a", { href: r.prompt_url, class: "small", text: "prompt over time" }), " ",
    permalink(`/runs/${runId}/rollouts/${r.id}/`, "link"));
  const prompt = el("details", { class: "prompt-details" }, el("summary", { text: "prompt" }),
    el("pre", { class: "prompt", text: r.prompt }));
  const article = el("article", { class: "rollout", "data-id": r.id }, head);
  article.append(labelsBlock(r, article), prompt);
  if (r.step_scores) {
    article.append(el("details", { class: "process-details", open: "" },
      el("summary", { text: "steps, shaded by their process score" }), processSteps(r.completion, r.step_scores)));
  }
  if (hasTools(r.messages)) {
    article.append(turns(r.messages));
  } else if (r.hits && r.hits.length && r.completion.length > LONG) {
    // a long completion the page was searched in: a box of its own, scrolled to the first hit once shown (load)
    article.append(el("div", { class: "hit-box" }, transcript(r.completion, marks(r), { hits: r.hits })));
  } else {
    article.append(transcript(r.completion, marks(r), { hits: r.hits }));
  }
  if (r.code_tests && r.code_tests.length) article.append(codeTests(r.code_tests));
  return article;
}

// The code_tests reward's outcome: which tests passed, and each failure's error.
function codeTests(tests) {
  const passed = tests.filter((t) => t.passed).length;
  const list = el("ul", { class: "code-tests" });
  for (const t of tests) {
    const item = el("li", { class: t.passed ? "test-pass" : "test-fail" },
      el("span", { class: "badge", text: t.passed ? "pass" : "fail" }), el("code", { text: ` ${t.test}` }));
    if (!t.passed && t.error) item.append(el("span", { class: "muted small", text: ` — ${t.error}` }));
    list.append(item);
  }
  const details = el("details", { class: "code-tests-details" },
    el("summary", { text: `tests: ${passed}/${tests.length} passed` }), list);
  details.open = passed < tests.length;  // failures shown at once
  return details;
}

async function load() {
  const rowsDiv = document.getElementById("rows");
  const response = await fetch(`/runs/${runId}/rollouts.json?${query}`, { headers: { Accept: "application/json" } });
  const data = await response.json();
  if (!response.ok) {
    const messages = Object.entries(data.errors || {}).map(([k, v]) => `${k}: ${v.join(", ")}`).join("; ");
    rowsDiv.replaceChildren(el("div", { class: "error", id: "rows-error", text: messages || `error ${response.status}` }));
    return;
  }
  shown = data.rows.length;
  rowsDiv.replaceChildren(
    el("p", { class: "muted", id: "rows-count",
              text: data.rows.length ? `${data.rows.length} rollouts on this page${data.next ? ", more after" : ""}` : "No rollouts match." }),
    ...data.rows.map(rowCard));
  for (const box of rowsDiv.querySelectorAll(".hit-box")) {
    const hit = box.querySelector("mark.hit");
    if (hit) box.scrollTop = Math.max(0, hit.offsetTop - box.clientHeight / 3);
  }
  const next = document.getElementById("next-page");
  next.hidden = !data.next;
  if (data.next) next.href = data.next;
  document.getElementById("first-page").hidden = firstPage;
}

onRunEvents(runId, async (event) => {
  if (firstPage || shown === 0) {
    await load();
  } else if (event && event.steps && event.steps.length) {
    const note = document.getElementById("live-note");
    note.hidden = false;
    note.textContent = `New steps arrived (up to step ${Math.max(...event.steps)}); the first page shows them.`;
  }
  return event && ["completed", "failed", "cancelled"].includes(event.status);
});
