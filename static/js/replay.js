// A reward replay: progress while the task runs, then each step's zero-variance shares and changed winners, and the
// completions whose advantage moved most (each linking to its group on the run page). Values go in as text only.

import { el, fmt, getJSON } from "./dom.js";

const root = document.getElementById("replay");

function cells(values) {
  return values.map((v) => (v instanceof Node ? el("td", {}, v) : el("td", { text: String(v) })));
}

async function refresh() {
  const r = await getJSON(root.dataset.url);
  const status = document.getElementById("replay-status");
  status.textContent = r.status;
  status.className = `badge ${r.status}`;
  document.getElementById("replay-progress").value = r.done;
  document.getElementById("replay-count").textContent = `${r.done} / ${r.total}`;
  const error = document.getElementById("replay-error");
  error.hidden = !r.error;
  error.textContent = r.error || "";
  const steps = (r.summary && r.summary.steps) || [];
  document.querySelector("#replay-steps tbody").replaceChildren(...steps.map((s) => el("tr", {},
    ...cells([s.step, `${Math.round(s.zero_std_before * 100)}%`, `${Math.round(s.zero_std_after * 100)}%`,
              `${s.best_changed} of ${s.groups}`, s.rank_changes]))));
  document.querySelector("#replay-rows tbody").replaceChildren(...r.rows.map((row) => el("tr", {},
    ...cells([row.step, el("a", { href: row.group_url, text: String(row.group) }), row.index, fmt(row.old_reward),
              fmt(row.new_reward), fmt(row.old_advantage), fmt(row.new_advantage),
              `${row.old_rank} → ${row.new_rank}`]))));
  document.getElementById("replay-labels-card").hidden = !(r.labels && r.labels.length);
  document.getElementById("replay-labels").replaceChildren(...(r.labels || []).map((a) => el("div", { class: "replay-label-suite" },
    el("p", { class: "replay-agreement", text: `${a.reward} v${a.version}: stored values agree with ${a.stored.agrees} of ${a.stored.total} labels; the replay agrees with ${a.replay.agrees} of ${a.replay.total}` }),
    el("table", { class: "table" }, el("thead", {}, el("tr", {}, ...["rollout", "label", "expects that it", "stored", "replayed", ""].map((h) => el("th", { text: h })))),
      el("tbody", {}, ...a.cases.map((c) => el("tr", { class: c.passed ? "suite-pass" : "suite-fail" },
        ...cells([el("a", { href: c.link, text: `step ${c.step} · group ${c.group}` }), c.label, c.expect,
                  `${fmt(c.stored_score)}${c.stored_passed ? "" : " ✗"}`, `${fmt(c.score)}${c.passed ? "" : " ✗"}`,
                  c.passed ? "agrees" : "fails"]))))))));
  if (r.status === "queued" || r.status === "running") setTimeout(refresh, 1000);
}

refresh();
