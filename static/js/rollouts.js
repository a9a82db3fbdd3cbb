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
  const article = el("article", { class: "rollout", "data-id": r.id }, head, prompt);
  if (r.step_scores) {
    article.append(el("details", { class: "process-details", open: "" },
      el("summary", { text: "steps, shaded by their process score" }), processSteps(r.completion, r.step_scores)));
  }
  if (hasTools(r.messages)) {
    article.append(turns(r.messages));
  } else if (r.hits && r.hits.length && r.completion.length > LONG) {
    // a long completion the page was searched in: a box of its own, scrolled to the first hit once shown (load)
    article.append(el("div", { class: "hit-box" }, transcript(r.completion, r.spans, { hits: r.hits })));
  } else {
    article.append(transcript(r.completion, r.spans, { hits: r.hits }));
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
