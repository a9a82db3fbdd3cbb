// Live pages: new steps arrive as server-sent events (the run's Redis pub/sub channel, relayed by /runs/<id>/events).
// `onRunEvents` calls `refresh` once the stream is open (anything published before is then fetched) and after each
// push, bursts coalesced; the stream closes when `refresh` returns true (the run has finished).

export function onRunEvents(runId, refresh, { delay = 150 } = {}) {
  const source = new EventSource(`/runs/${runId}/events`);
  let pending = null;
  let last = null;
  const fire = (event) => {
    if (event && event.data) {
      try {
        last = JSON.parse(event.data);
      } catch {
        last = null;
      }
    }
    if (pending) return;
    pending = setTimeout(async () => {
      pending = null;
      const done = await refresh(last);
      if (done) source.close();
    }, delay);
  };
  source.addEventListener("open", fire);
  source.addEventListener("message", fire);
  fire(); // at once, too: the page fills in even if the stream is slow to open
  return source;
}
