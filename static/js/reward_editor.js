// The reward editor: CodeMirror on the code field, linted as you type (syntax errors, undefined and unused names,
// in the gutter: the server parses the code, it never runs it), and the Test panel that runs the editor's code in
// the sandbox (through a Celery task) and shows per-row scores, errors with their line (marked in the editor),
// stdout and time. Results are text only.

const rewardId = document.getElementById("reward").dataset.reward;
const csrf = document.querySelector("#reward-form [name=csrfmiddlewaretoken]").value;

async function lintCode(text) {
  const body = new FormData();
  body.append("source", text);
  body.append("entrypoint", document.getElementById("id_entrypoint").value);
  const response = await fetch(`/rewards/${rewardId}/lint/`, { method: "POST", body, headers: { "X-CSRFToken": csrf } });
  return response.ok ? (await response.json()).diagnostics : [];
}

const editor = GrpoEditor.mountEditor(document.getElementById("id_source"), { lint: lintCode });
window.grpoRewardEditor = editor; // the label suite's Test reads the same code (label_suite.js)
const status = document.getElementById("test-status");
const results = document.getElementById("test-results");

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (cls) node.className = cls;
  return node;
}

function showResult(r) {
  results.replaceChildren();
  if (r.weak && r.weak.length) {
    const box = el("div", undefined, "error test-weak");
    box.append(el("strong", "Weak sandbox (GRPO_SANDBOX_ALLOW_WEAK): "), el("span", r.weak.join("; ")));
    results.append(box);
  }
  if (r.error) {
    results.append(el("div", r.error, "error test-error"));
  }
  editor.mark(r.error && r.line ? [{ line: r.line, col: 0, severity: "error", message: `Test: ${r.error}` }] : []);
  if (r.rows && r.rows.length) {
    const table = el("table", undefined, "test-table");
    const head = el("tr");
    for (const h of ["row", "prompt", "completion", "score"]) head.append(el("th", h));
    table.append(el("thead"), el("tbody"));
    table.tHead.append(head);
    r.rows.forEach((row) => {
      const tr = el("tr");
      tr.append(el("td", String(row.row)), el("td"), el("td"), el("td", row.score === null ? "None" : row.score.toFixed(3), "num score"));
      tr.children[1].append(el("pre", row.prompt));
      tr.children[2].append(el("pre", row.completion));
      table.tBodies[0].append(tr);
    });
    results.append(table);
  }
  if (r.stdout) {
    results.append(el("h3", "stdout"));
    results.append(el("pre", r.stdout, "code test-stdout"));
  }
  if (r.duration_ms !== undefined) results.append(el("p", `${r.duration_ms.toFixed(1)} ms in the sandbox`, "muted test-time"));
}

// The Test bench's pickers: the dataset versions and the runs with rollouts the user may see, from the JSON API
// (the editor reads no run or dataset itself). Names are other users' text: options get them as text only.
async function loadPickers() {
  const option = (value, label) => { const o = document.createElement("option"); o.value = value; o.textContent = label; return o; };
  const versions = document.getElementById("test-dataset");
  const runs = document.getElementById("test-run");
  const [datasets, runList] = await Promise.all([
    fetch("/api/datasets?versions=true").then((r) => (r.ok ? r.json() : [])),
    fetch("/api/runs?limit=1000").then((r) => (r.ok ? r.json() : [])),
  ]);
  for (const d of datasets) for (const v of d.versions || []) versions.append(option(v.id, `${d.name} v${v.number}`));
  for (const r of runList) if (r.step > 0) runs.append(option(r.id, r.name));
  versions.removeAttribute("aria-busy");
  document.getElementById("test-button").disabled = false;
}
loadPickers();

async function poll(url) {
  for (let i = 0; i < 240; i++) {
    const response = await fetch(url);
    const data = await response.json();
    if (data.ready) return data;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return { error: "no sandbox worker answered within a minute" };
}

document.getElementById("test-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const body = new FormData(event.target);
  body.append("source", editor.getValue());
  body.append("entrypoint", document.getElementById("id_entrypoint").value);
  status.textContent = "running in the sandbox…";
  results.replaceChildren();
  const response = await fetch(`/rewards/${rewardId}/test/`, { method: "POST", body, headers: { "X-CSRFToken": csrf } });
  const started = await response.json();
  if (!response.ok) {
    status.textContent = "";
    const messages = Object.entries(started.errors || {}).map(([f, errs]) => `${f}: ${errs.map((e) => e.message).join(" ")}`);
    showResult({ error: messages.join("; ") || "could not start the test" });
    return;
  }
  const result = await poll(started.poll);
  status.textContent = "";
  showResult(result);
});
