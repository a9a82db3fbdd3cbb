// A run's labels, each one's count per step (/api/runs/<id>/labels/counts), with its total linking to the rollouts
// that carry it. Label names are a reviewer's text: escaped for Plotly, textContent elsewhere.

import { el, getJSON, plotlyText, stepAxis } from "./dom.js";

const root = document.getElementById("labels");
const runId = root.dataset.run;

async function draw() {
  const d = await getJSON(`/api/runs/${runId}/labels/counts`);
  document.getElementById("labels-empty").hidden = d.labels.length > 0;
  document.getElementById("label-totals").replaceChildren(...d.labels.map((s) => el("li", {},
    el("a", { href: `/runs/${runId}/rollouts/?${new URLSearchParams({ label: s.name, sort: "step_asc" })}`,
              class: "label-total", text: `${s.name}: ${s.total}` }))));
  if (!d.labels.length) return;
  const steps = d.labels.flatMap((s) => s.steps);
  const [lo, hi] = [Math.min(...steps), Math.max(...steps)];
  const pad = Math.max(3, (hi - lo) * 0.02); // a few steps' width either side: one labeled step is not a wall
  const traces = d.labels.map((s) => ({ x: s.steps, y: s.counts, name: plotlyText(s.name), type: "bar" }));
  Plotly.react("chart-labels", traces, {
    title: { text: "labels per step", font: { size: 13 } }, height: 280, barmode: "stack",
    margin: { l: 48, r: 10, t: 30, b: 36 }, xaxis: { ...stepAxis(steps), range: [lo - pad, hi + pad] }, yaxis: { title: { text: "labels" }, rangemode: "tozero" },
    legend: { font: { size: 10 } },
  }, { displayModeBar: false, responsive: true });
}

window.addEventListener("load", draw);
