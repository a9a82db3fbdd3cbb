// The run page's status badge, kept by two scripts: run.js sets the status when the server pushes a change, and
// run_lifecycle.js, polling progress.json, says whether the run is stalled or its worker lost. One state, so neither
// undoes what the other said.

const badge = document.getElementById("run-status");
const state = { status: badge.classList[1] || badge.textContent.trim(), lost: false, stalled: false };

export function showRunStatus(change) {
  Object.assign(state, change);
  const running = state.status === "running";
  badge.textContent = running && state.lost ? "worker lost, checking"
    : state.status === "checking" ? "checking rewards" : state.status;
  badge.className = `badge ${state.status}`;
  badge.classList.toggle("stalled", running && (state.lost || state.stalled));
}
