// Small DOM helpers for the pages' modules. Model output goes in through textContent only: never parsed as HTML.

export const fmt = (v, digits = 3) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));

// Plotly reads a few tags in the text it draws (<b>, <i>, <br>, <a href>, ...: titles, trace names, hover labels), so a
// string from a run (a metric name, a run or GPU name, a phrase) goes in escaped and is shown as typed.
export const plotlyText = (s) => String(s).replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else if (k === "style") node.style.cssText = v;
    else node.setAttribute(k, v);
  }
  for (const child of children) node.append(child);
  return node;
}

// A stable address of a rollout or a group (runs.rollouts.views.rollout_link, group_link): a plain link (open it,
// or copy it from the browser's menu), which one click copies where the page may write the clipboard.
export function permalink(href, label, title = "copy this link") {
  const link = el("a", { href, class: "permalink small", text: label, title });
  link.addEventListener("click", async (event) => {
    if (!navigator.clipboard) return; // an insecure origin: the link opens instead
    event.preventDefault();
    try {
      await navigator.clipboard.writeText(new URL(href, location.href).href);
      link.textContent = "link copied";
    } catch (e) {
      location.href = href;
    }
    setTimeout(() => { link.textContent = label; }, 2000);
  });
  return link;
}

// An x axis of optimizer steps: whole numbers only (Plotly would put ticks at 1.5 on a short run).
export function stepAxis(steps, title = "step") {
  const span = steps && steps.length ? Math.max(...steps) - Math.min(...steps) : 0;
  return { title: { text: title }, tickformat: "d", ...(span <= 10 ? { dtick: 1 } : {}) };
}

export async function getJSON(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  if (!response.ok) {
    let detail = "";
    try {
      detail = (await response.json()).error || "";
    } catch (e) {
      // not JSON: the status says enough
    }
    const error = new Error(detail || `${url}: ${response.status}`);
    error.status = response.status;
    throw error;
  }
  return response.json();
}

// Charts are drawn when they are seen: a chart in a hidden tab, a closed section or filtered out costs no Plotly call
// (a run page's first paint waits for none of them). `drawWhenShown(node, draw)` calls `draw` now if `node` is on
// screen, else keeps it, the latest for that node, until a tab is shown (tabs.js's "tabshown" event), a section
// opens, or a module says it changed what is shown (`drawShown()`).
const waiting = new Map(); // node -> its latest draw

export const isShown = (node) => node.isConnected && !node.closest("[hidden], details:not([open])");

export function drawWhenShown(node, draw) {
  waiting.set(node, draw);
  if (isShown(node)) drawShown();
}

export function drawShown() {
  for (const [node, draw] of waiting) {
    if (!isShown(node)) continue;
    waiting.delete(node);
    draw();
  }
}

document.addEventListener("tabshown", drawShown);
document.addEventListener("toggle", drawShown, true); // a <details> opened (toggle does not bubble)
