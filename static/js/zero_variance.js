// The run page's zero-variance panel: per step, the share of groups where every completion solved the prompt (too
// easy) and where none did (too hard), from /runs/<pk>/zero_variance.json. Both carry no learning signal. Drawn once
// the Metrics tab is shown (dom.js's drawWhenShown).
import { drawWhenShown, stepAxis } from "./dom.js";

const root = document.getElementById("run");
const chart = document.getElementById("chart-zero-variance");
const url = `/runs/${root.dataset.run}/zero_variance.json`;

async function draw() {
  const response = await fetch(url);
  if (!response.ok) return;
  const data = await response.json();
  if (!data.steps.length) return;
  const trace = (y, name, color) => ({ x: data.steps, y, name, type: "bar", marker: { color } });
  drawWhenShown(chart, () => window.Plotly.react(chart, [
    trace(data.all_right, "all right (too easy)", "#2e7d4f"),
    trace(data.all_wrong, "all wrong (too hard)", "#b3261e"),
    trace(data.other, "all equal, in between", "#8a8f98"),
  ], {
    // the legend sits above the plot, under the title: below it, it covered the step axis' title
    title: { text: "Zero-variance groups", font: { size: 13 }, x: 0, xanchor: "left", y: 0.98, yanchor: "top" },
    barmode: "stack", height: 290, margin: { l: 48, r: 8, t: 64, b: 40 }, xaxis: stepAxis(data.steps),
    yaxis: { tickformat: ".0%", rangemode: "tozero" },
    legend: { orientation: "h", x: 0, xanchor: "left", y: 1.02, yanchor: "bottom" },
  }, { displayModeBar: false, responsive: true }));
  chart.setAttribute("aria-label", `zero-variance groups per step; ${data.criterion.text}`);
}

if (chart) {
  draw();
  const timer = setInterval(() => {
    draw();
    if (["completed", "failed", "cancelled"].includes(document.getElementById("run-status")?.textContent.trim())) {
      clearInterval(timer);
    }
  }, 15000);
}
