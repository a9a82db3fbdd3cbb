// The comparison page: overlaid metric curves, one prompt side by side across runs, and where the runs disagree.
// Its state lives in the URL, so the address is the shareable link. Model output is inserted as text (transcript.js):
// it is never parsed as HTML.

import { el, fmt, getJSON, plotlyText } from "./dom.js";
import { transcript } from "./transcript.js";

const root = document.getElementById("compare");
const $ = (id) => document.getElementById(id);
const runIds = root.dataset.runs.split(",");
const COLORS = ["#4a5cf0", "#d2453d", "#1f9d61", "#c98a00", "#8e44ad", "#16a2b8"];
const chart = $("compare-chart");
const stepSelect = $("step-select");
const follow = $("follow");

const query = new URLSearchParams(location.search);
const state = {
  metric: $("metric").value,
  smooth: $("smooth").value,
  x: $("x-axis").value,
  prompt: query.get("prompt") || "",
  step: follow.checked ? null : Number(query.get("step")),
  solvedBy: $("solved-by").value,
  threshold: $("threshold").value,
};
let steps = [];
let shownStep = null;

const pct = (v) => `${Math.round(v * 100)}%`;
const color = (i) => COLORS[i % COLORS.length];

function queryString() {
  const p = new URLSearchParams({ runs: runIds.join(","), metric: state.metric, smooth: state.smooth, x: state.x,
    solved_by: state.solvedBy, threshold: state.threshold });
  if (state.prompt) p.set("prompt", state.prompt);
  if (state.step !== null) p.set("step", state.step);
  return p.toString().replaceAll("%2C", ",");
}

function saveUrl() {
  history.replaceState(null, "", `${location.pathname}?${queryString()}`);
  $("share-url").value = location.href;
}

// --- curves ---

const lastStep = (m) => Math.max(0, ...m.runs.flatMap((run) => run.x));

// By step, each run's curve is bucketed on the server (min, max and last value per bucket, runs.series): the line
// is the last values, a faint band the min/max; zooming asks again for the range in view (exact once it is short).
let zoomRange = null;
let metricsAsked = 0;

async function refreshMetrics() {
  const asked = (metricsAsked += 1);
  const range = state.x === "step" ? zoomRange : null;
  const bounds = range ? `&from=${Math.max(0, Math.floor(range[0]))}&to=${Math.max(0, Math.ceil(range[1]))}` : "";
  const m = await getJSON(`/runs/compare/metrics.json?${queryString()}${bounds}`);
  if (asked !== metricsAsked) return m.runs.every((run) => run.finished); // a later zoom is under way
  const traces = [];
  m.runs.forEach((run, i) => {
    if (!run.exact) {
      traces.push({ x: [...run.x, ...[...run.x].reverse()], y: [...run.max, ...[...run.min].reverse()],
        name: "min–max", mode: "lines", fill: "toself", opacity: 0.15, fillcolor: color(i),
        line: { width: 0, color: color(i) }, showlegend: false, hoverinfo: "skip" });
    }
    if (m.smooth > 0) {
      traces.push({ x: run.x, y: run.y, name: `${plotlyText(run.name)} (logged)`, mode: "lines", opacity: 0.25,
        line: { color: color(i), width: 1 }, showlegend: false, hoverinfo: "skip" });
    }
    traces.push({ x: run.x, y: m.smooth > 0 ? run.smoothed : run.y, name: plotlyText(run.name), mode: "lines",
      line: { color: color(i), width: 2 }, meta: run.id });
  });
  Plotly.react(chart, traces, {
    title: { text: plotlyText(m.metric), font: { size: 13 } },
    margin: { l: 50, r: 10, t: 30, b: 40 },
    height: 360,
    // whole steps: ticks at 1, 2, 3 rather than 1.5 while a comparison is short
    xaxis: { title: { text: plotlyText(m.x_title) }, ...(m.x === "step" && lastStep(m) <= 10 ? { dtick: 1 } : {}),
             ...(range ? { range, autorange: false } : { autorange: true }) },
    legend: { orientation: "h" },
  }, { displayModeBar: false, responsive: true });
  if (!chart.dataset.zoomable) {
    chart.dataset.zoomable = "1";
    chart.on("plotly_relayout", (event) => {
      const r = event["xaxis.range"] ?? (event["xaxis.range[0]"] !== undefined
        ? [event["xaxis.range[0]"], event["xaxis.range[1]"]] : null);
      if (r) zoomRange = [Number(r[0]), Number(r[1])];
      else if (event["xaxis.autorange"]) zoomRange = null;
      else return;
      if (state.x === "step") refreshMetrics();
    });
  }
  chart.dataset.metric = m.metric;
  chart.dataset.x = m.x;

  const metric = $("metric");
  const known = new Set([...metric.options].map((o) => o.value));
  for (const name of m.available) if (!known.has(name)) metric.append(el("option", { value: name, text: name }));
  for (const run of m.runs) {
    const row = document.querySelector(`#compared-runs tr[data-run="${run.id}"]`);
    const badge = row.querySelector("[data-field=status]");
    badge.textContent = run.status;
    badge.className = `badge ${run.status}`;
    row.querySelector("[data-field=step]").textContent = `${run.step} / ${run.total_steps || "unknown"}`;
  }
  return m.runs.every((run) => run.finished);
}

// --- shared prompts and disagreements ---

function pickPrompt(hash) {
  state.prompt = hash;
  state.step = null;
  follow.checked = true;
  $("prompt-select").value = hash;
  saveUrl();
  return refreshTranscripts();
}

async function refreshPrompts() {
  const p = await getJSON(`/runs/compare/prompts.json?${queryString()}`);
  const select = $("prompt-select");
  const options = p.shared.map((s) => el("option", { value: s.hash, text: s.preview }));
  if (!state.prompt && p.shared.length) {
    state.prompt = (p.disagreements[0] || p.shared[0]).hash; // the most telling prompt first
    saveUrl();
  }
  if (state.prompt && !p.shared.some((s) => s.hash === state.prompt)) {
    options.unshift(el("option", { value: state.prompt, text: "(a prompt not every run sampled)" }));
  }
  select.replaceChildren(...(options.length ? options : [el("option", { value: "", text: "(no prompt shared yet)" })]));
  select.value = state.prompt;
  $("random-prompt").disabled = p.shared.length < 2;
  $("random-prompt").dataset.hashes = p.shared.map((s) => s.hash).join(",");

  $("criterion-text").textContent = p.criterion.text;
  const rows = p.disagreements.map((row) => {
    const prompt = el("pre", { class: "prompt-cell" });
    prompt.textContent = row.prompt;
    const tr = el("tr", { "data-hash": row.hash, class: "pick", title: "show side by side" },
      el("td", {}, prompt),
      ...row.runs.map((r) => el("td", { class: "num", "data-run": r.id, text: `${r.solved}/${r.n} (${pct(r.rate)})` })),
      el("td", { class: "num spread", text: pct(row.spread) }));
    tr.addEventListener("click", () => pickPrompt(row.hash));
    return tr;
  });
  const none = p.shared.length ? "The runs agree on every prompt they share."
    : "No prompt has been sampled by every one of these runs yet.";
  $("disagreements").tBodies[0].replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", {
    colspan: runIds.length + 2, class: "muted", text: none }))]));
  $("shared-count").textContent = `${p.shared.length} prompts sampled by every run (each run sampled: ` +
    `${p.runs.map((r) => `${r.name} ${r.prompts}`).join(", ")}).`;
}

// --- side by side ---

function completionBlock(c, rewardNames) {
  const nums = el("div", { class: "nums" },
    el("span", { class: `adv ${c.advantage >= 0 ? "pos" : "neg"}`, text: `adv ${c.advantage >= 0 ? "+" : ""}${fmt(c.advantage)}` }),
    el("span", { class: "total", text: `reward ${fmt(c.reward)}` }),
    ...rewardNames.map((n) => el("span", { class: "muted", text: `${n} ${fmt(c.rewards[n], 2)}` })),
    el("span", { class: "muted", text: `${c.length} tok${c.truncated ? " ✂" : ""}` }),
    el("span", { class: `badge ${c.solved ? "completed" : "failed"}`, text: c.solved ? "solved" : "unsolved" }));
  // <think>, LaTeX and code rendered from the text, the run's own reflection phrases marked (spans from the server)
  const text = el("div", { class: "completion" }, transcript(c.completion, c.spans));
  return el("div", { class: "completion-row", "data-index": c.index, "data-solved": c.solved ? "1" : "0" }, nums, text);
}

function column(run, i, step) {
  const shown = run.shown_step === null ? `not sampled by step ${step}`
    : run.shown_step === step ? `step ${step}` : `step ${run.shown_step} (its last before ${step})`;
  const parts = [
    el("div", { class: "column-head" }, el("span", { class: "swatch", style: `background:${color(i)}` }),
      el("strong", { text: run.name }), el("span", { class: "muted small", "data-field": "shown", text: ` ${shown}` })),
  ];
  for (const g of run.groups) {
    parts.push(el("p", { class: "muted small" }, `group ${g.group} · mean ${fmt(g.mean)} · std ${fmt(g.std)}`,
      g.zero_std ? el("span", { class: "badge warn", text: "zero variance: no learning signal" }) : ""));
    parts.push(...g.completions.map((c) => completionBlock(c, run.reward_names)));
  }
  return el("div", { class: "compare-column", "data-run": run.id }, ...parts);
}

async function refreshTranscripts() {
  if (!state.prompt) return;
  let t;
  try {
    t = await getJSON(`/runs/compare/transcripts.json?${queryString()}`);
  } catch (error) {
    $("prompt-text").textContent = "";
    // 404: a link to a prompt none of these runs sampled (yet); anything else is a failure to say as it is
    const text = error.status === 404 ? "None of these runs has sampled that prompt."
      : `The transcripts could not be loaded (${error.message}); they are fetched again with the next update.`;
    $("columns").replaceChildren(el("p", { class: error.status === 404 ? "muted" : "error", text }));
    return;
  }
  steps = t.steps;
  shownStep = t.step;
  const options = steps.map((s) => el("option", { value: s, text: `step ${s}` }));
  if (!steps.includes(t.step)) options.push(el("option", { value: t.step, text: `step ${t.step}` }));
  stepSelect.replaceChildren(...options);
  stepSelect.value = t.step;
  $("prompt-text").textContent = t.prompt.text;
  $("columns").replaceChildren(...t.runs.map((run, i) => column(run, i, t.step)));
  $("columns").dataset.step = t.step;
}

function goToStep(step) {
  follow.checked = false;
  state.step = Number(step);
  saveUrl();
  refreshTranscripts();
}

function stepBy(delta) {
  const i = steps.indexOf(shownStep);
  const next = steps[i === -1 ? (delta > 0 ? 0 : steps.length - 1) : i + delta];
  if (next !== undefined) goToStep(next);
}

// --- controls ---

$("metric").addEventListener("change", (e) => { state.metric = e.target.value; saveUrl(); refreshMetrics(); });
$("smooth").addEventListener("input", (e) => { $("smooth-value").textContent = e.target.value; });
$("smooth").addEventListener("change", (e) => { state.smooth = e.target.value; saveUrl(); refreshMetrics(); });
$("x-axis").addEventListener("change", (e) => { state.x = e.target.value; zoomRange = null; saveUrl(); refreshMetrics(); });
$("prompt-select").addEventListener("change", (e) => pickPrompt(e.target.value));
$("random-prompt").addEventListener("click", (e) => {
  const hashes = e.target.dataset.hashes.split(",").filter((h) => h && h !== state.prompt);
  if (hashes.length) pickPrompt(hashes[Math.floor(Math.random() * hashes.length)]);
});
stepSelect.addEventListener("change", () => goToStep(stepSelect.value));
$("step-prev").addEventListener("click", () => stepBy(-1));
$("step-next").addEventListener("click", () => stepBy(1));
follow.addEventListener("change", () => {
  if (!follow.checked) return;
  state.step = null;
  saveUrl();
  refreshTranscripts();
});
for (const id of ["solved-by", "threshold"]) {
  $(id).addEventListener("change", () => {
    state.solvedBy = $("solved-by").value;
    state.threshold = $("threshold").value;
    saveUrl();
    refreshPrompts().then(refreshTranscripts);
  });
}
document.querySelectorAll("#compared-runs .swatch").forEach((s) => { s.style.background = color(Number(s.dataset.index)); });

// --- live: one event stream for all the runs, until every one has finished ---

let events = null;
let busy = false;
let again = false;
async function refreshAll() {
  if (busy) {
    again = true; // a burst of pushed steps: one more refresh once this one is done
    return;
  }
  busy = true;
  try {
    const finished = await refreshMetrics();
    await refreshPrompts();
    if (follow.checked || !shownStep) await refreshTranscripts();
    if (finished && events) events.close();
  } finally {
    busy = false;
    if (again) {
      again = false;
      refreshAll();
    }
  }
}

saveUrl();
if (root.dataset.live === "1") {
  events = new EventSource(`/runs/compare/events?runs=${runIds.join(",")}`);
  events.addEventListener("open", refreshAll);
  events.addEventListener("message", refreshAll);
}
refreshAll();
