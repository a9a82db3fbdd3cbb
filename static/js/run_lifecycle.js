// The run's life on its page: steps per second, ETA, the live tail of the training log, and which actions apply.
// Polls progress.json every 2 s until the run has finished (and once more after), and keeps the status badge true
// between pushes: a run whose worker is lost says so, and a step its supervisor has not confirmed for a few heartbeats
// is shown with its age. Text only, never HTML.

import { el } from "./dom.js";
import { showRunStatus } from "./run_status.js";

// a logged value, short: 4 significant digits, exponents for the very small and the very large (learning rates)
const compact = (v) => (v !== 0 && (Math.abs(v) < 1e-3 || Math.abs(v) >= 1e5) ? v.toExponential(2)
  : String(Number(v.toPrecision(4))));

const root = document.getElementById("run");
const url = `/runs/${root.dataset.run}/progress.json`;

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "";
  const s = Math.round(seconds);
  return s >= 3600 ? `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min` : s >= 60 ? `${Math.floor(s / 60)} min ${s % 60} s` : `${s} s`;
}

// The log tail: TRL's logged metric dicts as one table (a metric a row, a logged line a column headed by its step,
// the latest last), the rest as text.
function showLog(log) {
  if (!log) return;
  const table = document.getElementById("log-metrics");
  table.hidden = !log.metrics.length;
  document.getElementById("log-metrics-caption").textContent =
    `the last ${Math.min(log.logged, log.metrics.length ? log.metrics[0][1].length : 0)} of ${log.logged} metric lines TRL logged`;
  // each column's step, found among the run's ingested metrics ("–" where none holds that line's values)
  const steps = log.steps ?? [];
  (table.tHead ?? table.createTHead()).replaceChildren(el("tr", {}, el("th", { scope: "col", text: "step" }),
    ...steps.map((s) => el("th", { scope: "col", class: "num", text: s === null || s === undefined ? "–" : String(s) }))));
  table.tBodies[0].replaceChildren(...log.metrics.map(([name, values]) => el("tr", {},
    el("th", { text: name }), ...values.map((v) => el("td", { class: "num", text: v === null || v === undefined ? "–" : typeof v === "number" ? compact(v) : v })))));
  const tail = document.getElementById("log-tail");
  if (tail.textContent !== log.text) {
    const atBottom = tail.scrollTop + tail.clientHeight >= tail.scrollHeight - 4;
    tail.textContent = log.text;
    if (atBottom) tail.scrollTop = tail.scrollHeight;
  }
}

async function refresh() {
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  if (!response.ok) return true;
  const p = await response.json();
  const parts = [];
  const running = p.status === "running";
  const worker = `the worker${p.worker ? ` ${p.worker}` : ""}`;
  // the supervisor's process is gone (the server saw its lock let go) and nothing recorded how the run ended
  const lost = running && p.worker_lost;
  const silent = running && p.silent_seconds !== null;
  // the supervisor has not reported for a few heartbeats: the step shown is as of its last one
  const aged = running && p.step_age_seconds !== null;
  const stalled = lost || silent || aged || (running && p.stalled_seconds !== null);
  if (aged) parts.push(`step ${p.step} as of ${duration(p.step_age_seconds)} ago`);
  if (p.status === "checking") {
    // the Start answered at once; a worker of the checks queue calls each reward in the sandbox, then queues or refuses
    parts.push(p.checking_seconds >= p.check_timeout
      ? `no worker has checked the rewards for ${duration(p.checking_seconds)}: is a worker serving the 'checks' queue running?`
      : "checking the rewards in the sandbox and TRL's config before the run is queued");
  }
  if (lost) {
    parts.push(`${worker} is lost: its supervisor ended without recording how the run ended; a live worker checks the run's log and settles it`);
  } else if (silent) {
    parts.push(`${worker} is not responding: no heartbeat for ${duration(p.silent_seconds)}`);
    if (p.trainer_alive === true) parts.push("its trainer is still training (a paused or stuck supervisor); the run is not failed while it trains");
    else if (p.trainer_alive === false) parts.push("its trainer has stopped: a live worker will settle the run from its log");
  } else if (aged) parts.push(`no word from ${worker} since (busy, paused or stuck)`);
  else if (stalled) parts.push(`stalled: no new step for ${duration(p.stalled_seconds)} (the log's last lines are below)`);
  else if (p.steps_per_second) parts.push(`${p.steps_per_second.toFixed(2)} steps/s`);
  if (!stalled && p.eta_seconds !== null && running) parts.push(`about ${duration(p.eta_seconds)} left`);
  if (p.checkpoint_step) parts.push(`last checkpoint: step ${p.checkpoint_step}`);
  if (p.cancel_requested && running) parts.push("cancelling…");
  const speed = document.getElementById("run-speed");
  speed.textContent = parts.join(" · ");
  speed.classList.toggle("stalled", stalled);
  showRunStatus({ status: p.status, lost, stalled });
  showLog(p.log);
  const finished = ["completed", "failed", "cancelled"].includes(p.status);
  document.getElementById("cancel-form").hidden = finished;
  document.getElementById("retry-form").hidden = !finished;
  document.getElementById("resume-form").hidden = !(["failed", "cancelled"].includes(p.status) && p.resumable);
  if (p.worker) document.getElementById("run-worker").textContent = `on ${p.worker}${p.attempt > 1 ? ` · attempt ${p.attempt}` : ""}`;
  return finished;
}

// Cancel asks first; a confirmed cancel says so to the server (which otherwise shows its own confirmation page).
document.getElementById("cancel-form").addEventListener("submit", (event) => {
  if (!window.confirm("Cancel this run? Training stops within seconds; what it has logged is kept, and a run with a checkpoint can be resumed.")) {
    event.preventDefault();
    return;
  }
  document.getElementById("cancel-confirm").value = "yes";
});

async function loop() {
  let done = false;
  try {
    done = await refresh();
  } catch (e) {
    // a failed poll is retried on the next tick
  }
  if (!done) setTimeout(loop, 2000);
}
loop();
