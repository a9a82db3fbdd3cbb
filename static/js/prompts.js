// Prompt history: the flipped prompts list (prompts.json) or one prompt's mean reward and solve rate per step
// (prompts/<key>.json), with the solve criterion of the page's own query string; redrawn as new steps arrive.

import { el, fmt, getJSON, stepAxis } from "./dom.js";
import { onRunEvents } from "./live.js";

const query = new URLSearchParams(location.search);
const list = document.getElementById("prompts");
const one = document.getElementById("prompt-history");
const runId = (list || one).dataset.run;
const pct = (v) => (v === null || v === undefined ? "–" : `${Math.round(v * 100)}%`);
const criterionParams = new URLSearchParams([...query].filter(([k]) => k === "solved_by" || k === "threshold"));

async function refreshList() {
  const d = await getJSON(`/runs/${runId}/prompts.json?${criterionParams}`);
  document.getElementById("criterion").textContent = d.criterion.text;
  document.getElementById("flip-summary").textContent = d.prompts && !d.revisited
    ? `None of the ${d.prompts} prompts has been sampled at two steps yet, so none could flip: a flip needs a prompt ` +
      "seen again (a dataset smaller than the prompts the run samples comes back to its prompts)."
    : `${d.flipped} of ${d.prompts} prompts flipped from all wrong to mixed or all right (${d.revisited} were ` +
      `sampled at two steps or more)` + (d.shown.length < d.flipped ? ` (the first ${d.shown.length} shown)` : "");
  document.querySelector("#flipped tbody").replaceChildren(...d.shown.map((f) => el("tr", { "data-key": f.key },
    el("td", {}, el("a", { href: `${f.url}?${criterionParams}`, class: "prompt-link" },
      el("span", { class: "prompt-preview", text: f.prompt.length > 160 ? `${f.prompt.slice(0, 160)}…` : f.prompt }))),
    el("td", { class: "num", text: `step ${f.all_wrong_step}` }),
    el("td", { class: "num", text: `step ${f.flip_step}` }),
    el("td", { text: `${f.flipped_to} (${pct(f.solve_rate_at_flip)})` }),
    el("td", { class: "num", text: `${pct(f.last_solve_rate)} at step ${f.last_step}` }))));
  return false;
}

async function refreshOne() {
  const d = await getJSON(`/runs/${runId}/prompts/${one.dataset.key}.json?${criterionParams}`);
  document.getElementById("prompt-text").textContent = d.prompt;
  document.getElementById("criterion").textContent = d.criterion.text;
  Plotly.react("chart-prompt", [
    { x: d.steps, y: d.mean_reward, name: "mean reward", mode: "lines+markers" },
    { x: d.steps, y: d.solve_rate, name: "solve rate", mode: "lines+markers", yaxis: "y2" },
  ], {
    // the legend above the plot: at the right (Plotly's place) it covered the solve-rate axis' labels
    height: 300, margin: { l: 48, r: 48, t: 40, b: 36 }, xaxis: stepAxis(d.steps),
    legend: { orientation: "h", x: 0, xanchor: "left", y: 1.02, yanchor: "bottom" },
    yaxis: { title: { text: "mean reward" } },
    // a share: 0 to 100% in quarters, whatever the height; no grid of its own across the reward axis' grid
    yaxis2: { title: { text: "solve rate" }, overlaying: "y", side: "right", range: [0, 1], tickmode: "linear",
              tick0: 0, dtick: 0.25, tickformat: ".0%", showgrid: false, zeroline: false },
  }, { displayModeBar: false, responsive: true });
  return false;
}

onRunEvents(runId, list ? refreshList : refreshOne);
