// The code_tests bench (runs/datasets/code_bench.py): the solution in CodeMirror, Run queues it on the sandbox queue,
// and each test's verdict, stdout and time come back from the worker. The code, its output and the tests are
// untrusted text: they reach the page through textContent only.

import { el } from "./dom.js";

const form = document.getElementById("bench-form");
if (form) {
  const editor = GrpoEditor.mountEditor(document.getElementById("bench-solution"));
  const status = document.getElementById("bench-status");
  const results = document.getElementById("bench-results");
  const csrf = form.querySelector("[name=csrfmiddlewaretoken]").value;

  const poll = async (url) => {
    for (let i = 0; i < 480; i++) {
      const response = await fetch(url);
      const data = await response.json();
      if (data.ready) return data;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    return { error: "no sandbox worker answered within two minutes" };
  };

  const show = (r) => {
    results.replaceChildren();
    if (r.error) results.append(el("div", { class: "error", id: "bench-run-error", text: r.error }));
    if (!r.tests || !r.tests.length) return;
    const total = r.reward === null || r.reward === undefined ? "None (the reward abstains)" : r.reward.toFixed(3);
    const passed = r.tests.filter((t) => t.verdict === "passed").length;
    results.append(el("p", { id: "bench-total" }, el("strong", { text: "code_tests reward: " }),
      el("span", { class: "num", id: "bench-reward", text: total }), ` (${passed} of ${r.tests.length} tests passed)`));
    const table = el("table", { class: "bench-table" });
    const head = el("tr");
    for (const h of ["#", "test", "verdict", "stdout", "time"]) head.append(el("th", { text: h }));
    table.append(el("thead", {}, head));
    const body = el("tbody");
    r.tests.forEach((t, i) => {
      const verdict = el("td", { class: `verdict verdict-${t.verdict.replace(" ", "-")}`, text: t.verdict });
      if (t.error) verdict.append(el("div", { class: "help bench-test-error", text: t.error }));
      body.append(el("tr", { class: "bench-test" },
        el("td", { class: "num", text: String(i + 1) }),
        el("td", {}, el("code", { text: t.test })),
        verdict,
        el("td", {}, el("pre", { class: "bench-stdout", text: t.stdout })),
        el("td", { class: "num bench-time", text: t.time_s === null ? "–" : `${(t.time_s * 1000).toFixed(1)} ms` })));
    });
    table.append(body);
    results.append(table);
  };

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = new FormData();
    body.append("dataset_version", form.dataset.version);
    body.append("row", form.dataset.row);
    body.append("solution", editor.getValue());
    status.textContent = "running in the sandbox…";
    results.replaceChildren();
    const response = await fetch("/datasets/code-tests/run/", { method: "POST", body, headers: { "X-CSRFToken": csrf } });
    const started = response.headers.get("content-type")?.includes("json") ? await response.json() : {};
    if (!response.ok) {
      status.textContent = "";
      const messages = Object.entries(started.errors || {}).map(([f, errs]) => `${f}: ${errs.map((e) => e.message).join(" ")}`);
      show({ error: messages.join("; ") || `could not start the run (${response.status})` });
      return;
    }
    const result = await poll(started.poll);
    status.textContent = "";
    show(result);
  });
}
