// The self-reflection tracker: reflection.json drawn as three charts (share per step, overall and per phrase; mean
// reward and mean length with and without a phrase) and a few figures, redrawn as new steps arrive.

import { el, fmt, getJSON, plotlyText, stepAxis } from "./dom.js";
import { onRunEvents } from "./live.js";

const root = document.getElementById("tracker");
const runId = root.dataset.run;
const layout = (title, ytitle, steps) => ({
  title: { text: title, font: { size: 13 } }, height: 260, margin: { l: 48, r: 10, t: 30, b: 36 },
  xaxis: stepAxis(steps), yaxis: { title: { text: ytitle } }, legend: { font: { size: 10 } },
});
const line = (x, y, name, extra = {}) => ({ x, y, name, mode: "lines+markers", marker: { size: 4 }, ...extra });

function stat(id, label, value) {
  return [el("dt", { text: label }), el("dd", { id, text: value })];
}

async function refresh() {
  const d = await getJSON(`/runs/${runId}/reflection.json`);
  const r = d.correlation;
  const corr = (v) => (v === null ? "–" : fmt(v, 3));
  document.getElementById("reflection-stats").replaceChildren(
    ...stat("stat-completions", "completions", `${d.completions} (${d.reflective} with a phrase)`),
    ...stat("stat-first", "first step with a phrase", d.first_step === null ? "none yet" : `step ${d.first_step}`),
    ...stat("stat-corr-reward", "correlation with reward", `${corr(r.reward)} overall · ${corr(r.reward_within_step)} within steps`),
    ...stat("stat-corr-length", "correlation with length", `${corr(r.length)} overall · ${corr(r.length_within_step)} within steps`),
    ...stat("stat-first-phrases", "first step per phrase",
      d.phrases.map((p) => `${p}: ${d.first_step_per_phrase[p] ?? "–"}`).join(" · ")));
  const perPhrase = d.phrases.filter((p) => d.per_phrase[p].some((v) => v > 0))
    .map((p) => line(d.steps, d.per_phrase[p], plotlyText(p), { line: { width: 1 }, marker: { size: 3 }, visible: "legendonly" }));
  const config = { displayModeBar: false, responsive: true };
  Plotly.react("chart-share", [line(d.steps, d.share, "any phrase", { line: { width: 3 } }), ...perPhrase],
    { ...layout("share of completions with a reflection phrase", "share", d.steps), yaxis: { tickformat: ".0%", rangemode: "tozero" } }, config);
  Plotly.react("chart-reward", [line(d.steps, d.reward_with, "with a phrase"), line(d.steps, d.reward_without, "without")],
    layout("mean reward", "reward", d.steps), config);
  Plotly.react("chart-length", [line(d.steps, d.length_with, "with a phrase"), line(d.steps, d.length_without, "without")],
    layout("mean length", "tokens", d.steps), config);
  return false;
}

onRunEvents(runId, refresh);
