// A background dataset import: poll its state every second; go to the new version when it is done, or show the
// errors that refused it. Text only, never HTML.

const root = document.getElementById("dataset-import");

async function poll() {
  let job;
  try {
    const response = await fetch(root.dataset.url, { headers: { Accept: "application/json" } });
    if (!response.ok) throw new Error(String(response.status));
    job = await response.json();
  } catch (e) {
    setTimeout(poll, 2000);
    return;
  }
  const status = document.getElementById("import-status");
  status.textContent = job.status;
  status.className = `badge ${job.status}`;
  document.getElementById("import-progress").textContent = job.progress;
  const errors = document.getElementById("import-errors");
  errors.replaceChildren(...job.errors.map((text) => Object.assign(document.createElement("li"), { textContent: text })));
  if (job.version_url) {
    window.location.assign(job.version_url);
    return;
  }
  if (!job.finished) setTimeout(poll, 1000);
}
poll();
