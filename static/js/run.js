// The run page: progress, health signals, TRL's metric curves, and one step's groups, refreshed when the server
// pushes new steps. The step in view is in the URL (?step=N, #group-G), so a view can be shared.
// Everything from the model goes in as text (dom.js, transcript.js): it is never parsed as HTML.

import { drawShown, drawWhenShown, el, fmt, getJSON, isShown, permalink, plotlyText, stepAxis } from "./dom.js";
import { onRunEvents } from "./live.js";
import { showRunStatus } from "./run_status.js";
import { tokenPanel } from "./tokens.js";
import { hasTools, longCompletion, transcript, turns } from "./transcript.js";

const root = document.getElementById("run");
const runId = root.dataset.run;
const base = `/runs/${runId}`;
const browse = `${base}/rollouts/`;
const slider = document.getElementById("step-slider");
const select = document.getElementById("step-select");
const follow = document.getElementById("follow");
const wanted = new URLSearchParams(location.search).get("step");
// ?replay=N: a reward replay's reward and advantage beside each completion's stored ones
const replayId = new URLSearchParams(location.search).get("replay");
const replayParam = replayId ? `&replay=${encodeURIComponent(replayId)}` : "";
let steps = [];
let shownStep = null;
let finished = false;

if (wanted !== null) follow.checked = false;

async function refreshStatus() {
  const s = await getJSON(`${base}/status.json`);
  showRunStatus({ status: s.status });
  document.getElementById("progress-bar").style.width = `${Math.round(s.progress * 100)}%`;
  // a run trained elsewhere whose client or files never said its length: "unknown", never "/ 0"
  document.getElementById("progress-text").textContent = `step ${s.step} / ${s.total_steps || "unknown"}`;
  const bar = document.getElementById("progress");
  bar.setAttribute("aria-valuenow", s.step);
  bar.setAttribute("aria-valuemax", s.total_steps);
  const error = document.getElementById("run-error");
  error.hidden = !s.error;
  error.textContent = s.error;
  finished = s.finished;
  if (s.steps.length !== steps.length) {
    steps = s.steps;
    select.replaceChildren(...steps.map((n) => el("option", { value: n, text: `step ${n}` })));
    slider.min = steps[0] ?? 1;
    slider.max = steps[steps.length - 1] ?? 1;
  }
  if (!steps.length) return;
  if (shownStep === null && wanted !== null) await showStep(Number(wanted), { scroll: true });
  else if (follow.checked || shownStep === null) await showStep(steps[steps.length - 1]);
}

async function refreshHealth() {
  const { signals } = await getJSON(`${base}/health.json`);
  const list = document.getElementById("health");
  list.replaceChildren(...signals.map((s) => {
    const item = el("li", { class: `signal ${s.level}`, "data-key": s.key },
      el("strong", { text: s.title }), document.createTextNode(` · ${s.detail}`));
    if (s.step !== null && s.step !== undefined) item.append(el("span", { class: "muted", text: ` (step ${s.step})` }));
    if (s.url) item.append(" ", el("a", { href: s.url, text: "show them" }));
    if (s.verdict) {
      item.append(el("span", { class: "badge verdict", text: `${s.verdict.verdict} by ${s.verdict.by}` }));
    } else if (s.evidence) {
      // a verdict labels the rollouts behind the alert; a dismissal holds until the evidence changes
      for (const [verdict, label] of [["confirm", "confirm"], ["dismiss", "false alarm"]]) {
        const button = el("button", { type: "button", class: "link-button verdict-button", "data-verdict": verdict, text: label });
        button.addEventListener("click", () => giveVerdict(s, verdict));
        item.append(" ", button);
      }
    }
    return item;
  }));
}

async function giveVerdict(signal, verdict) {
  const response = await fetch(`/api/runs/${runId}/alerts/verdicts`, { method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
    body: JSON.stringify({ key: signal.key, evidence: signal.evidence, verdict }) });
  if (!response.ok) {
    const data = await response.json().catch(() => ({}));
    alert(data.detail || `error ${response.status}`);
  }
  await refreshHealth();
}

const smoothing = document.getElementById("smoothing");
smoothing.value = localStorage.getItem("grpo-smoothing") ?? smoothing.value;
document.getElementById("smoothing-value").textContent = smoothing.value;
smoothing.addEventListener("change", () => {
  localStorage.setItem("grpo-smoothing", smoothing.value);
  document.getElementById("smoothing-value").textContent = smoothing.value;
  loadMetrics();
});

// One hover for every chart: hovering a step on one shows each chart's values at that step (Plotly's unified hover
// within a chart, Plotly.Fx.hover on the others that are on screen).
let syncing = false;
const others = (source) => [...document.querySelectorAll("#charts .js-plotly-plot")]
  .filter((div) => div !== source && isShown(div));
function syncHover(source) {
  source.on("plotly_hover", (event) => {
    if (syncing || !event.points.length) return;
    syncing = true;
    try {
      for (const other of others(source)) Plotly.Fx.hover(other, { xval: event.points[0].x }, ["xy"]);
    } finally {
      syncing = false;
    }
  });
  source.on("plotly_unhover", () => {
    if (syncing) return;
    syncing = true;
    try {
      for (const other of others(source)) Plotly.Fx.unhover(other);
    } finally {
      syncing = false;
    }
  });
}

// The Overview's latest reward: the newest of the logged reward and the newest rollout batch's mean (the server's
// latest_reward), saying which it is.
function showLatestReward(m) {
  const r = m.latest_reward;
  document.getElementById("figure-reward").textContent = !r ? "–"
    : `${fmt(r.value)} (step ${r.step}${r.source === "rollouts" ? ", mean of its rollouts" : ""})`;
}

const chartId = (key) => `chart-${key.replace(/[^a-z0-9]+/gi, "-")}`;
const canWrite = root.dataset.canWrite === "1";
const csrf = document.querySelector("#run-actions [name=csrfmiddlewaretoken]")?.value ?? "";
let pinned = root.dataset.pinned;
let metrics = null; // the latest metrics.json
let metricsLoad = null; // the fetch under way, if any

// One metric's curve, bucketed on the server (series.json: min, max and last value per bucket, at most BUCKETS a
// chart): the last values as the line, the min/max as a band around it, TensorBoard's smoothing over the line.
// Zooming asks again for the range in view, down to a point a step once it is no wider than BUCKETS steps.
const BUCKETS = 1000;
const BLUE = "#4a5cf0";

function seriesURL(key, range) {
  const q = new URLSearchParams({ metric: key, buckets: BUCKETS, smooth: smoothing.value });
  if (range) {
    q.set("from", Math.max(0, Math.floor(range[0])));
    q.set("to", Math.max(0, Math.ceil(range[1])));
  }
  return `${base}/series.json?${q}`;
}

function curveTraces(s) {
  const smoothed = Boolean(s.smoothed);
  // a bucket's hover says its min and max too
  const extremes = s.exact ? {} : { customdata: s.step.map((_, i) => [s.min[i], s.max[i]]),
                                    hovertemplate: "%{y:.4g} (min %{customdata[0]:.4g}, max %{customdata[1]:.4g})" };
  // connectgaps: held-out curves (val-core/...) have points only at the evaluated steps
  const traces = [{ x: s.step, y: s.last, name: "value", mode: s.exact ? "lines+markers" : "lines", connectgaps: true,
                    ...extremes,
                    line: { width: smoothed ? 1 : 2, color: BLUE }, marker: { size: 4, color: BLUE },
                    opacity: smoothed ? 0.35 : 1 }];
  // the band: one closed shape, along the maxima and back along the minima; not hovered (the line's hover says both)
  traces.push({ x: [...s.step, ...[...s.step].reverse()], y: [...s.max, ...[...s.min].reverse()], name: "min–max",
                mode: "lines", fill: "toself", fillcolor: "rgba(74,92,240,0.18)", line: { width: 0, color: BLUE },
                hoverinfo: "skip" });
  if (smoothed) traces.push({ x: s.step, y: s.smoothed, name: `smoothed (${s.smooth})`, mode: "lines",
                              connectgaps: true, line: { width: 2, color: BLUE } });
  return traces;
}

async function drawCurve(div, key, title = key) {
  div.seriesKey = key; // what a zoom asks for again: the chart's latest metric (the pinned one can change)
  div.seriesTitle = title;
  const asked = (div.seriesAsked = (div.seriesAsked || 0) + 1);
  const range = div.zoomRange ?? null;
  const s = await getJSON(seriesURL(key, range));
  if (asked !== div.seriesAsked) return; // a later draw (a zoom, a refresh) is under way
  Plotly.react(div, curveTraces(s), {
    title: { text: plotlyText(title), font: { size: 13 } },
    margin: { l: 40, r: 10, t: 30, b: 30 },
    height: 220,
    xaxis: { ...stepAxis(s.step), ...(range ? { range, autorange: false } : { autorange: true }) },
    hovermode: "x unified",
    showlegend: false,
  }, { displayModeBar: false, responsive: true });
  if (!div.dataset.zoomable) {
    div.dataset.zoomable = "1";
    div.on("plotly_relayout", (event) => {
      const r = event["xaxis.range"] ?? (event["xaxis.range[0]"] !== undefined
        ? [event["xaxis.range[0]"], event["xaxis.range[1]"]] : null);
      if (r) div.zoomRange = [Number(r[0]), Number(r[1])];
      else if (event["xaxis.autorange"]) div.zoomRange = null;
      else return;
      drawCurve(div, div.seriesKey, div.seriesTitle);
    });
  }
}

async function drawMetricChart(div, key) {
  await drawCurve(div, key); // Plotly's events (div.on) are there once it has drawn
  if (!div.dataset.synced) {
    div.dataset.synced = "1";
    syncHover(div);
  }
  if (key === "frac_reward_zero_std" && !div.dataset.clickable) {
    div.dataset.clickable = "1";
    div.on("plotly_click", (event) => {
      const step = event.points[0].x;
      location.href = `${browse}?zero_std=yes&step_min=${step}&step_max=${step}`;
    });
  }
}

function chartWrap(key) {
  const div = el("div", { id: chartId(key), class: "chart", "data-metric": key });
  const wrap = el("div", { class: "chart-wrap", "data-metric": key }, div);
  if (key === "frac_reward_zero_std") {
    // the zero-variance share links to those groups: all of them, or a clicked step's
    wrap.append(el("a", { href: `${browse}?zero_std=yes`, id: "zero-std-link", class: "small",
                          text: "browse the zero-variance groups (click a point for its step)" }));
  }
  if (canWrite) {
    const pin = el("button", { type: "button", class: "secondary pin", "data-metric": key, "aria-pressed": "false",
                               text: "pin to Overview" });
    pin.addEventListener("click", () => pinMetric(pin.getAttribute("aria-pressed") === "true" ? "" : key));
    wrap.append(pin);
  }
  return wrap;
}

// The Metrics tab: a section per TRL prefix (metrics.json's "sections"), charts made once and drawn when seen.
function showSections(m) {
  const charts = document.getElementById("charts");
  for (const { name, charts: keys } of m.sections) {
    let section = charts.querySelector(`details[data-section="${CSS.escape(name)}"]`);
    if (!section) {
      section = el("details", { class: "metric-section", "data-section": name, open: "" },
        el("summary", { text: name }), el("div", { class: "charts" }));
      charts.append(section);
    }
    const grid = section.querySelector(".charts");
    for (const key of keys) {
      const div = document.getElementById(chartId(key)) ?? grid.appendChild(chartWrap(key)).firstChild;
      drawWhenShown(div, () => drawMetricChart(div, key));
    }
    section.querySelector("summary").textContent = `${name} · ${keys.length} chart${keys.length === 1 ? "" : "s"}`;
  }
  filterCharts();
  showPins();
}

// The filter box: charts whose name holds the text stay, the others are hidden (and are not drawn); a section with
// none left is hidden too.
const filter = document.getElementById("metric-filter");
function filterCharts() {
  const text = filter.value.trim().toLowerCase();
  let shown = 0;
  let total = 0;
  for (const section of document.querySelectorAll("#charts details.metric-section")) {
    let left = 0;
    for (const wrap of section.querySelectorAll(".chart-wrap")) {
      const match = wrap.dataset.metric.toLowerCase().includes(text);
      wrap.hidden = !match;
      left += match;
      total += 1;
    }
    section.hidden = left === 0;
    shown += left;
  }
  document.getElementById("metric-count").textContent = text ? `${shown} of ${total} charts` : "";
  drawShown();
}
filter.addEventListener("input", filterCharts);

// The Overview: the reward curve and the pinned one (saved with the run, so a reload and every viewer keep it).
function showOverview(m) {
  const reward = document.getElementById("overview-reward");
  const logged = m.charts.includes("reward");
  reward.hidden = !logged; // an SFT run logs none
  if (logged) drawWhenShown(reward, () => drawCurve(reward, "reward"));
  const wrap = document.getElementById("overview-pinned-wrap");
  const div = document.getElementById("overview-pinned");
  wrap.hidden = !pinned;
  document.getElementById("pin-hint").hidden = Boolean(pinned);
  if (pinned) {
    const key = pinned;
    drawWhenShown(div, () => drawCurve(div, key, `${key} (pinned)`));
  }
}

function showPins() {
  for (const pin of document.querySelectorAll("#charts .pin")) {
    const on = pin.dataset.metric === pinned;
    pin.setAttribute("aria-pressed", String(on));
    pin.textContent = on ? "pinned to Overview" : "pin to Overview";
  }
}

async function pinMetric(key) {
  const response = await fetch(`${base}/pin/`, { method: "POST", body: new URLSearchParams({ metric: key }),
                                                 headers: { "X-CSRFToken": csrf } });
  if (!response.ok) return;
  pinned = (await response.json()).pinned_metric;
  showPins();
  if (metrics) showOverview(metrics);
}
document.getElementById("unpin")?.addEventListener("click", () => pinMetric(""));

async function loadMetrics() {
  metricsLoad = getJSON(`${base}/metrics.json`);
  try {
    metrics = await metricsLoad;
  } finally {
    metricsLoad = null;
  }
  showLatestReward(metrics);
  showSections(metrics);
  showOverview(metrics);
}

// The stream's "open" says which version of the run's data there is (runs.live.sse_response): the metrics fetched
// at load are refetched only when they are older; every push after that is news.
async function refreshMetrics(event) {
  if (metricsLoad) await metricsLoad.catch(() => null);
  const latest = event?.versions?.[runId];
  if (latest !== undefined && metrics && latest === metrics.version) return;
  await loadMetrics();
}

// data.epsilon: what whoever computed the advantages (data.advantages_by) pads the std with (TRL 1e-4, verl 1e-6)
function formulaText(group, data) {
  const eps = data.epsilon;
  if (data.aggregation === "normalize_then_sum") {
    return `each function normalised in this group, weighted and summed; advantage = (sum − step mean) / (step std + ${eps})`;
  }
  const mean = fmt(group.mean);
  if (data.scale_rewards === "none") return `advantage = reward − ${mean}`;
  const scale = group.scale === null || group.scale === undefined ? "NaN" : fmt(group.scale);
  const what = data.scale_rewards === "batch" ? "batch std" : "group std";
  return `advantage = (reward − ${mean}) / (${scale} ${what} + ${eps}) · by ${data.advantages_by}`;
}

// A completion in a group: its turns (tools), the whole transcript, or a long one's preview that loads in full
// when asked (runs.lifecycle.views.run_step_completion_json)
function completionView(c, data) {
  if (hasTools(c.messages)) return turns(c.messages);
  if (!c.preview) return transcript(c.completion, c.spans);
  return longCompletion(c.preview, c.spans, async () => {
    const full = await getJSON(`${base}/steps/${data.batch_step || data.step}/completions/${c.index}.json`);
    return transcript(full.completion, full.spans);
  });
}

function groupCard(group, data) {
  const rewardNames = data.reward_names;
  const maxAbs = Math.max(1e-9, ...group.completions.map((c) => Math.abs(c.advantage)));
  const header = el("div", { class: "group-head" },
    el("strong", { text: `Group ${group.group}` }),
    el("span", { class: "muted", text: ` mean ${fmt(group.mean)} · std ${fmt(group.std)}` }),
    group.zero_std
      ? el("a", { class: "badge warn", href: `${browse}?zero_std=yes&step_min=${data.step}&step_max=${data.step}`,
                  text: "zero variance: no learning signal" })
      : "",
    " ",
    el("a", { class: "small", href: `${base}/prompts/${group.prompt_key}/`, text: "this prompt over time" }),
    " ",
    permalink(`${base}/steps/${data.batch_step || data.step}/groups/${group.group}/`, "link to this group"));
  const prompt = el("pre", { class: "prompt" });
  prompt.textContent = group.prompt;
  const formula = el("p", { class: "formula muted", text: formulaText(group, data) });
  const rows = group.completions.map((c) => {
    const width = (Math.abs(c.advantage) / maxAbs) * 50;
    const bar = el("div", { class: "advbar", title: `advantage ${fmt(c.advantage, 4)}` }, el("div", {
      class: c.advantage >= 0 ? "pos" : "neg",
      style: c.advantage >= 0 ? `left:50%;width:${width}%` : `left:${50 - width}%;width:${width}%`,
    }));
    return el("tr", { "data-index": c.index },
      el("td", { class: "num adv", text: fmt(c.advantage), title: `by the formula: ${fmt(c.formula_advantage, 4)}` }),
      el("td", {}, bar),
      el("td", { class: "num total", text: fmt(c.reward) }),
      ...rewardNames.map((n) => el("td", { class: "num", text: fmt(c.rewards[n]) })),
      // lengths an import's files did not hold are stored as 0: shown as unknown
      el("td", { class: "num", text: `${data.lengths_known ? c.length : "?"}${c.truncated ? " ✂" : ""}`,
                 title: data.lengths_known ? "" : "length unknown: not in the files this run was imported from" }),
      ...(replayId ? [el("td", { class: "num replay", text: c.replay
        ? `${fmt(c.replay.new_advantage)} · ${fmt(c.replay.new_reward)} · rank ${c.replay.old_rank} → ${c.replay.new_rank}`
        : "–" })] : []),
      el("td", { class: "completion-cell" }, permalink(`${base}/rollouts/${c.id}/`, "link"), completionView(c, data)));
  });
  const heads = ["advantage", "", "reward", ...rewardNames, "tokens",
                 ...(replayId ? [`replay #${replayId}: advantage · reward · rank`] : []), "completion"];
  const table = el("table", { class: "group" },
    el("thead", {}, el("tr", {}, ...heads.map((h) => el("th", { text: h })))),
    el("tbody", {}, ...rows));
  // the update at this step kept this group's per-token values: the token-level view, loaded when opened
  const tokens = (data.token_groups || []).includes(group.group) ? [tokenPanel(base, data.step, group.group)] : [];
  return el("div", { class: `group-card${group.zero_std ? " zero-std" : ""}`, id: `group-${group.group}` },
    header, prompt, formula, table, ...tokens);
}

const GROUPS_PAGE = 32; // the server's page of groups (runs.rollouts.selectors.STEP_GROUPS_PAGE)

async function showStep(step, { scroll = false, from = null } = {}) {
  shownStep = Number(step);
  slider.value = shownStep;
  select.value = shownStep;
  // a link to #group-G opens the page of groups that holds G
  const target = scroll && location.hash.startsWith("#group-") ? Number(location.hash.slice(7)) || 0 : 0;
  const first = from ?? Math.floor(target / GROUPS_PAGE) * GROUPS_PAGE;
  const data = await getJSON(`${base}/steps/${shownStep}.json?from=${first}&groups=${GROUPS_PAGE}${replayParam}`);
  const container = document.getElementById("groups");
  const shown = data.groups.length;
  const nav = el("p", { class: "pager", id: "group-pager" });
  if (first > 0) {
    const before = el("button", { type: "button", class: "secondary", id: "groups-before", text: "← groups before" });
    before.addEventListener("click", () => showStep(shownStep, { from: Math.max(0, first - GROUPS_PAGE) }));
    nav.append(before);
  }
  if (first + shown < data.groups_total) {
    const after = el("button", { type: "button", class: "secondary", id: "groups-after", text: "groups after →" });
    after.addEventListener("click", () => showStep(shownStep, { from: first + GROUPS_PAGE }));
    nav.append(after);
  }
  container.replaceChildren(
    el("p", { class: "muted", id: "shown-step",
              text: `Step ${data.step}: ${data.groups_total} groups` +
                    (data.batch_step ? ` (trained again on the batch generated for step ${data.batch_step})` : "") +
                    (data.zero_std_groups ? `, ${data.zero_std_groups} with zero variance` : "") }),
    el("p", { class: "muted small", id: "group-range",
              text: shown < data.groups_total ? `groups ${first}–${first + shown - 1} shown` : "" }),
    ...data.groups.map((g) => groupCard(g, data)), nav);
  if (scroll && location.hash) document.getElementById(location.hash.slice(1))?.scrollIntoView();
  // a rollout's link (?completion=<index>#group-G): its row marked and brought to the middle of the view
  const linked = new URLSearchParams(location.search).get("completion");
  if (scroll && linked !== null && location.hash.startsWith("#group-")) {
    const row = document.querySelector(`${location.hash} tr[data-index="${CSS.escape(linked)}"]`);
    if (row) {
      row.classList.add("linked");
      row.scrollIntoView({ block: "center" });
    }
  }
}

function pick(step) {
  follow.checked = false;
  const url = new URL(location.href);
  url.searchParams.set("step", step);
  url.hash = "rollouts"; // the step replaces a linked group; the tab stays
  history.replaceState(null, "", url);
  showStep(step);
}
slider.addEventListener("change", () => pick(slider.value));
select.addEventListener("change", () => pick(select.value));
follow.addEventListener("change", () => {
  if (!follow.checked) return;
  const url = new URL(location.href);
  url.searchParams.delete("step");
  history.replaceState(null, "", url);
  if (steps.length) showStep(steps[steps.length - 1]);
});

onRunEvents(runId, async (event) => {
  await Promise.all([refreshStatus(), refreshMetrics(event), refreshHealth()]);
  return finished;
});
