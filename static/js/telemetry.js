// The run page's Resources section: telemetry.json drawn as charts (each step's time split and tokens/s; CPU, RSS
// and per-GPU utilisation and memory over time) and a one-line summary, redrawn as steps arrive and, while the run
// trains, every few seconds (the worker samples between steps too, and a step can take minutes on a GPU). The charts
// are drawn once the Resources tab is shown (dom.js's drawWhenShown); the Overview's step time at once.

import { drawWhenShown, el, getJSON, plotlyText, stepAxis } from "./dom.js";
import { onRunEvents } from "./live.js";

const runId = document.getElementById("run").dataset.run;
const config = { displayModeBar: false, responsive: true };
const layout = (title, xtitle, ytitle, extra = {}) => ({
  title: { text: title, font: { size: 13 } }, height: 240, margin: { l: 48, r: 10, t: 30, b: 36 },
  xaxis: { title: { text: xtitle } }, yaxis: { title: { text: ytitle }, rangemode: "tozero" },
  legend: { font: { size: 10 }, orientation: "h" }, ...extra,
});
const line = (x, y, name) => ({ x, y, name, mode: "lines+markers", marker: { size: 3 }, line: { width: 2 } });
const PARTS = [["generation_s", "generation"], ["reward_s", "reward scoring"], ["update_s", "policy update"],
               ["eval_s", "eval"]];
const POLL_MS = 5000;
let finished = false;

function summary(d) {
  const s = d.summary;
  const parts = [];
  if (d.timing.steps.length) {
    const shares = [["generation", s.generation_share], ["rewards", s.reward_share], ["update", s.update_share],
                    ["eval", s.eval_share]].filter(([name, v]) => v !== null && (name !== "eval" || v > 0));
    parts.push(`${shares.map(([name, v]) => `${name} ${Math.round(v * 100)}%`).join(" · ")} of step time`);
  }
  if (s.peak_rss_mb !== null) parts.push(`peak RAM ${Math.round(s.peak_rss_mb)} MB`);
  if (s.tokens_per_s !== null) parts.push(`${Math.round(s.tokens_per_s)} tokens/s`);
  return parts.length ? parts.join("; ") : "No samples yet.";
}

function drawGpus(samples) {
  const box = document.getElementById("resource-charts");
  const indices = Object.keys(samples.gpus);
  document.getElementById("no-gpu").hidden = indices.length > 0 || !samples.t.length;
  if (!indices.length) return;
  for (const id of ["chart-gpu-util", "chart-gpu-mem"]) {
    if (!document.getElementById(id)) box.append(el("div", { class: "chart", id }));
  }
  const traces = (key) => indices.map((i) => line(samples.t, samples.gpus[i][key], plotlyText(`GPU ${i}`)));
  Plotly.react("chart-gpu-util", traces("util"), layout("GPU utilisation", "seconds", "%",
    { yaxis: { title: { text: "%" }, range: [0, 100] } }), config);
  const total = Math.max(...indices.map((i) => samples.gpus[i].mem_total_mb ?? 0));
  Plotly.react("chart-gpu-mem", traces("mem_used_mb"), layout("GPU memory", "seconds", "MB",
    total ? { yaxis: { title: { text: "MB" }, range: [0, total] } } : {}), config);
}

function draw(d) {
  const t = d.timing;
  const bars = PARTS.filter(([key]) => t[key].some((v) => v !== null))
    .map(([key, name]) => ({ x: t.steps, y: t[key], name, type: "bar" }));
  Plotly.react("chart-step-split", bars, layout("time per step", "step", "seconds", {
    xaxis: stepAxis(t.steps), barmode: "stack", height: 260, margin: { l: 48, r: 10, t: 30, b: 60 }, legend: { orientation: "h", y: -0.35 },
  }), config);
  Plotly.react("chart-tokens", [line(t.steps, t.tokens_per_s, "tokens/s")],
    layout("completion tokens per second", "step", "tokens/s", { xaxis: stepAxis(t.steps) }), config);
  const s = d.samples;
  Plotly.react("chart-cpu", [line(s.t, s.cpu_percent, "CPU")],
    layout("CPU of the training processes (100 = one core)", "seconds", "%"), config);
  Plotly.react("chart-rss", [line(s.t, s.rss_mb, "RSS")],
    layout("RAM (RSS) of the training processes", "seconds", "MB"), config);
  drawGpus(s);
}

async function refresh() {
  const d = await getJSON(`/runs/${runId}/telemetry.json`);
  const t = d.timing;
  document.getElementById("resource-summary").textContent = summary(d);
  // the Overview's step time: the last timed step's
  const last = t.steps.length - 1;
  document.getElementById("figure-step-time").textContent =
    last < 0 || t.step_s[last] === null ? "–" : `${t.step_s[last].toFixed(2)} s (step ${t.steps[last]})`;
  drawWhenShown(document.getElementById("resource-charts"), () => draw(d)); // once the Resources tab is shown
  finished = d.finished;
  return finished;
}

onRunEvents(runId, refresh);
const poll = setInterval(() => (finished ? clearInterval(poll) : refresh()), POLL_MS);
