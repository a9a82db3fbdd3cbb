// The reward editor's "Labels as tests" panel: which runs' labeled rollouts are this function's tests and what each
// label expects of it (saved to /rewards/<id>/label-suite/), and a Test of the editor's code against them in the
// sandbox, each failed case marked and linked to its rollout. Run names, labels and model text: text only.

import { el, fmt } from "./dom.js";

const panel = document.getElementById("suite-panel");
if (panel) {
  const rewardId = document.getElementById("reward").dataset.reward;
  const csrf = document.querySelector("#reward-form [name=csrfmiddlewaretoken]").value;
  const kinds = JSON.parse(document.getElementById("expectation-kinds").textContent);
  const suite = JSON.parse(document.getElementById("suite-data").textContent) || {};
  const body = document.querySelector("#suite-expectations tbody");
  const status = document.getElementById("suite-status");
  const results = document.getElementById("suite-results");

  const addRow = (e = { label: "", expect: "at_most", value: 0 }) => {
    const select = el("select", { class: "suite-expect", "aria-label": "what the function should do" },
      ...Object.entries(kinds).map(([k, text]) => el("option", { value: k, text: text.replace(" {value:g}", " …") })));
    select.value = e.expect;
    const value = el("input", { type: "number", step: "any", class: "suite-value", "aria-label": "value", value: e.value ?? "" });
    const remove = el("button", { type: "button", class: "link-button", text: "remove" });
    const row = el("tr", {}, el("td", {}, el("input", { type: "text", class: "suite-label", list: "suite-label-names",
      maxlength: "64", "aria-label": "label", value: e.label })), el("td", {}, select), el("td", {}, value), el("td", {}, remove));
    remove.addEventListener("click", () => row.remove());
    body.append(row);
  };
  (suite.expectations || []).forEach(addRow);
  if (!body.children.length) addRow({ label: "reward hack", expect: "below_mean" });
  document.getElementById("suite-add").addEventListener("click", () => addRow());

  fetch("/api/runs?limit=1000").then((r) => (r.ok ? r.json() : [])).then((runs) => {
    const picker = document.getElementById("suite-runs");
    for (const r of runs) {
      const option = el("option", { value: r.id, text: `${r.name} (#${r.id})` });
      option.selected = (suite.runs || []).includes(r.id);
      picker.append(option);
    }
    picker.removeAttribute("aria-busy");
  });

  document.getElementById("suite-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const chosen = {
      runs: [...document.getElementById("suite-runs").selectedOptions].map((o) => Number(o.value)),
      expectations: [...body.children].map((row) => {
        const expect = row.querySelector(".suite-expect").value;
        const e = { label: row.querySelector(".suite-label").value, expect };
        if (expect === "at_most" || expect === "at_least") e.value = Number(row.querySelector(".suite-value").value);
        return e;
      }),
    };
    const response = await fetch(`/rewards/${rewardId}/label-suite/`, { method: "POST", body: JSON.stringify(chosen),
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf } });
    const data = await response.json();
    if (!response.ok) {
      status.textContent = data.error;
      return;
    }
    status.textContent = "Saved.";
    document.getElementById("suite-described").replaceChildren(...data.described.map((d) => el("li", { text: d })));
    document.getElementById("suite-test").disabled = false;
  });

  async function poll(url) {
    for (let i = 0; i < 480; i++) {
      const data = await (await fetch(url)).json();
      if (data.ready) return data;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    return { error: "no sandbox worker answered within two minutes" };
  }

  document.getElementById("suite-test").addEventListener("click", async () => {
    const form = new FormData();
    form.append("source", window.grpoRewardEditor.getValue());
    form.append("entrypoint", document.getElementById("id_entrypoint").value);
    status.textContent = "scoring the labeled rollouts' groups in the sandbox…";
    results.replaceChildren();
    const response = await fetch(`/rewards/${rewardId}/label-suite/test/`, { method: "POST", body: form, headers: { "X-CSRFToken": csrf } });
    const started = await response.json();
    const r = response.ok ? await poll(started.poll) : { error: Object.values(started.errors || {}).flat().map((e) => e.message).join("; ") };
    status.textContent = "";
    if (r.error) {
      results.replaceChildren(el("div", { class: "error suite-error", text: r.error }));
      return;
    }
    const rows = r.cases.map((c) => el("tr", { class: c.passed ? "suite-pass" : "suite-fail" },
      el("td", {}, el("span", { class: "badge", text: c.passed ? "agrees" : "fails" })),
      el("td", {}, el("a", { href: c.link, text: `run ${c.run} · step ${c.step} · group ${c.group}` })),
      el("td", { text: c.label }), el("td", { text: c.expect }),
      el("td", { class: "num", text: c.score === null ? "None" : fmt(c.score) }),
      el("td", { class: "num", text: fmt(c.group_mean) })));
    results.replaceChildren(
      el("p", { id: "suite-agreement", text: `agrees with ${r.agrees} of ${r.total} labels${r.version ? ` (version ${r.version})` : ""}` }),
      ...r.notes.map((n) => el("p", { class: "muted small", text: n })),
      el("table", { class: "table", id: "suite-cases" }, el("thead", {}, el("tr", {},
        ...["", "rollout", "label", "expects that it", "score", "group mean"].map((h) => el("th", { text: h })))), el("tbody", {}, ...rows)));
  });
}
