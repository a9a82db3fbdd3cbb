// The run page: progress, TRL's metric curves, and one step's groups, refreshed when the server pushes new steps.
// Everything from the model is inserted with textContent: it is never parsed as HTML.

const root = document.getElementById("run");
const runId = root.dataset.run;
const base = `/runs/${runId}`;
const reflection = new RegExp(JSON.parse(document.getElementById("reflection-pattern").textContent), "gi");
const slider = document.getElementById("step-slider");
const select = document.getElementById("step-select");
const follow = document.getElementById("follow");
let steps = [];
let shownStep = null;
let finished = false;

const fmt = (v, digits = 3) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else if (k === "style") node.style.cssText = v;
    else node.setAttribute(k, v);
  }
  for (const child of children) node.append(child);
  return node;
}

// Model text with self-reflection phrases wrapped in <mark>, built from text nodes only.
function highlighted(text) {
  const frag = document.createDocumentFragment();
  let last = 0;
  for (const m of text.matchAll(reflection)) {
    frag.append(document.createTextNode(text.slice(last, m.index)));
    frag.append(el("mark", { class: "reflection", text: m[0] }));
    last = m.index + m[0].length;
  }
  frag.append(document.createTextNode(text.slice(last)));
  return frag;
}

async function getJSON(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  if (!response.ok) throw new Error(`${url}: ${response.status}`);
  return response.json();
}

async function refreshStatus() {
  const s = await getJSON(`${base}/status.json`);
  const badge = document.getElementById("run-status");
  badge.textContent = s.status;
  badge.className = `badge ${s.status}`;
  document.getElementById("progress-bar").style.width = `${Math.round(s.progress * 100)}%`;
  document.getElementById("progress-text").textContent = `step ${s.step} / ${s.total_steps}`;
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
  if (steps.length && (follow.checked || shownStep === null)) await showStep(steps[steps.length - 1]);
}

async function refreshMetrics() {
  const m = await getJSON(`${base}/metrics.json`);
  const charts = document.getElementById("charts");
  for (const key of m.charts) {
    const id = `chart-${key.replace(/[^a-z0-9]+/gi, "-")}`;
    let div = document.getElementById(id);
    if (!div) {
      div = el("div", { id, class: "chart", "data-metric": key });
      charts.append(div);
    }
    Plotly.react(div, [{ x: m.steps, y: m.series[key], mode: "lines+markers", line: { width: 2 }, marker: { size: 4 } }], {
      title: { text: key, font: { size: 13 } },
      margin: { l: 40, r: 10, t: 30, b: 30 },
      height: 220,
      xaxis: { title: { text: "step" } },
    }, { displayModeBar: false, responsive: true });
  }
}

function groupCard(group, rewardNames) {
  const maxAbs = Math.max(1e-9, ...group.completions.map((c) => Math.abs(c.advantage)));
  const header = el("div", { class: "group-head" },
    el("strong", { text: `Group ${group.group}` }),
    el("span", { class: "muted", text: ` mean ${fmt(group.mean)} · std ${fmt(group.std)}` }),
    group.zero_std ? el("span", { class: "badge warn", text: "zero variance: no learning signal" }) : "");
  const prompt = el("pre", { class: "prompt" });
  prompt.textContent = group.prompt;
  const rows = group.completions.map((c) => {
    const width = (Math.abs(c.advantage) / maxAbs) * 50;
    const bar = el("div", { class: "advbar" }, el("div", {
      class: c.advantage >= 0 ? "pos" : "neg",
      style: c.advantage >= 0 ? `left:50%;width:${width}%` : `left:${50 - width}%;width:${width}%`,
    }));
    const text = el("pre", { class: "completion" });
    text.append(highlighted(c.completion));
    return el("tr", { "data-index": c.index },
      el("td", { class: "num adv", text: fmt(c.advantage) }),
      el("td", {}, bar),
      el("td", { class: "num total", text: fmt(c.reward) }),
      ...rewardNames.map((n) => el("td", { class: "num", text: fmt(c.rewards[n]) })),
      el("td", { class: "num", text: `${c.length}${c.truncated ? " ✂" : ""}` }),
      el("td", {}, text));
  });
  const table = el("table", { class: "group" },
    el("thead", {}, el("tr", {}, ...["advantage", "", "reward", ...rewardNames, "tokens", "completion"].map((h) => el("th", { text: h })))),
    el("tbody", {}, ...rows));
  return el("div", { class: "group-card" }, header, prompt, table);
}

async function showStep(step) {
  shownStep = Number(step);
  slider.value = shownStep;
  select.value = shownStep;
  const data = await getJSON(`${base}/steps/${shownStep}.json`);
  const container = document.getElementById("groups");
  container.replaceChildren(el("p", { class: "muted", id: "shown-step", text: `Step ${data.step}: ${data.groups.length} groups` }),
    ...data.groups.map((g) => groupCard(g, data.reward_names)));
}

function pick(step) {
  follow.checked = false;
  showStep(step);
}
slider.addEventListener("change", () => pick(slider.value));
select.addEventListener("change", () => pick(select.value));

let pending = null;
function refreshSoon() {
  // coalesce bursts of pushed steps into one refresh
  if (pending) return;
  pending = setTimeout(async () => {
    pending = null;
    await Promise.all([refreshStatus(), refreshMetrics()]);
    if (finished) events.close();
  }, 150);
}

const events = new EventSource(`${base}/events`);
events.addEventListener("open", refreshSoon);
events.addEventListener("message", refreshSoon);
refreshSoon();
