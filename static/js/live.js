// Live pages: new steps arrive as server-sent events (the run's Redis pub/sub channel, relayed by /runs/<id>/events).
// `onRunEvents` calls `refresh` at once, once the stream is open and after each push, bursts coalesced, with the
// latest message's data (the open message's: `{versions: {run id: version}}`, so a page whose data is of that version
// need not fetch it again); it stops calling when `refresh` returns true (the run has finished).
// Several modules of one page share one stream per run (a browser opens only ~6 connections per host); the stream
// closes when every one of them is done.

const streams = new Map(); // run id -> { source, listeners }

export function onRunEvents(runId, refresh, { delay = 150 } = {}) {
  const key = String(runId);
  let stream = streams.get(key);
  if (!stream) {
    const source = new EventSource(`/runs/${key}/events`);
    stream = { source, listeners: new Set() };
    const notify = (event) => stream.listeners.forEach((listener) => listener(event));
    // the server's "open" message (runs.live.sse_response), sent once subscribed, with the runs' data versions; the
    // browser's own "open" event, on connecting, carries nothing and is left out
    source.addEventListener("open", (event) => event instanceof MessageEvent && notify(event));
    source.addEventListener("message", notify);
    streams.set(key, stream);
  }
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
      if (!stream.listeners.has(fire) || !(await refresh(last))) return;
      stream.listeners.delete(fire);
      if (!stream.listeners.size) {
        stream.source.close();
        streams.delete(key);
      }
    }, delay);
  };
  stream.listeners.add(fire);
  fire(); // at once, too: the page fills in even if the stream is slow to open
  return stream.source;
}
