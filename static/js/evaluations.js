// The run's evaluations on its page: a row each (the periodic ones collapsed to the latest unless asked for), their
// figures, the change against the base model, and a link to the completions. Re-read after every push on the run's
// stream, and every 2 s while one is queued or running. Labels, model names and errors go in as text.

import { el, fmt, getJSON } from "./dom.js";
import { onRunEvents } from "./live.js";

const runId = document.getElementById("run").dataset.run;
const body = document.querySelector("#evaluation-table tbody");
const showPeriodic = document.getElementById("show-periodic");
const METRICS = ["mean@k", "pass@k", "maj@k", "greedy", "reward_mean@k"];
let evaluations = [];
let timer = null;

const signed = (v) => (v >= 0 ? "+" : "") + fmt(v);

function deltaCell(e) {
  const cell = el("td", { class: "num small", "data-field": "delta" });
  if (!e.delta) {
    cell.textContent = e.step === 0 && e.status === "completed" ? "base" : "–";
    return cell;
  }
  cell.title = `against ${e.delta.base_label} (evaluation ${e.delta.base})`;
  for (const m of METRICS) {
    const v = e.delta.metrics[m];
    if (v !== undefined) cell.append(el("div", { "data-metric": m, "data-value": v, text: `${m} ${signed(v)}` }));
  }
  return cell;
}

function rows(e) {
  const figure = (m) => el("td", { class: "num", "data-field": m, "data-value": e.metrics[m] ?? "",
                                    text: fmt(e.metrics[m]) });
  const row = el("tr", { "data-id": e.id, "data-kind": e.kind, "data-label": e.label, "data-status": e.status },
    el("td", { "data-field": "label", text: e.label }),
    el("td", { class: "small", "data-field": "model", text: e.evaluated }),
    e.imported_from
      ? el("td", { class: "small", "data-field": "dataset", text: e.imported_from })
      : el("td", { class: "small", "data-field": "dataset" }, el("a", { href: e.dataset_url, text: e.dataset_version }),
        e.split === "all" ? " · every row" : " · eval split"),
    el("td", { class: "num", text: e.k || "–" }),
    el("td", { class: "small", "data-field": "generation",
               text: e.imported_from ? "as verl sampled (val_kwargs)" : `T=${e.temperature} · ${e.max_new_tokens} tokens` }),
    ...METRICS.map(figure),
    deltaCell(e),
    el("td", {}, el("span", { class: `badge ${e.status}`, "data-field": "status", text: e.status })),
    el("td", {}, e.status === "completed" ? el("a", { href: e.url, class: "browse", text: "browse" }) : ""));
  if (!e.error) return [row];
  return [row, el("tr", { "data-error-for": e.id },
    el("td", { colspan: 13 }, el("div", { class: "error", text: `${e.label}: ${e.error}` })))];
}

function render() {
  const periodic = evaluations.filter((e) => e.kind === "periodic");
  const latest = periodic[periodic.length - 1];
  const shown = evaluations.filter((e) => e.kind !== "periodic" || showPeriodic.checked || e === latest);
  document.getElementById("periodic-count").textContent = periodic.length;
  document.getElementById("periodic-toggle").hidden = periodic.length < 2;
  document.getElementById("no-evaluations").hidden = evaluations.length > 0;
  body.replaceChildren(...shown.flatMap(rows));
  // the Overview's figure: mean@k of the latest completed evaluation
  const latestDone = evaluations.filter((e) => e.status === "completed" && e.metrics["mean@k"] !== undefined).pop();
  document.getElementById("figure-mean-at-k").textContent = latestDone
    ? `${fmt(latestDone.metrics["mean@k"])} (${latestDone.label}, k=${latestDone.k})` : "–";
}

async function refresh() {
  clearTimeout(timer);
  const data = await getJSON(`/runs/${runId}/evaluations.json`).catch(() => null);
  if (data) {
    evaluations = data.evaluations;
    render();
  }
  timer = !data || data.active ? setTimeout(refresh, 2000) : null;
  return false; // evaluations start after training too: keep listening
}

showPeriodic.addEventListener("change", render);
onRunEvents(runId, refresh);
