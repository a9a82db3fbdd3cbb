// Tabs after WAI-ARIA's pattern (role=tablist/tab/tabpanel): a click or Enter shows a tab; the arrow keys, Home and
// End move between them and show the one reached. The tab shown is in the address (#metrics), so a reload or a link
// keeps it; #group-G (a group of the step in view) opens the Rollouts tab. A tab shown is told so ("tabshown", on its
// panel): the charts waiting for it are drawn then (dom.js's drawWhenShown), those drawn before are resized
// (Plotly.Plots.resize). Pages go on fetching for hidden tabs; only the drawing waits.

const ALIASES = { group: "rollouts" }; // #group-3 -> Rollouts

export function setupTabs(tablist) {
  const tabs = [...tablist.querySelectorAll('[role="tab"]')];
  const names = tabs.map((t) => t.dataset.tab);
  const panel = (tab) => document.getElementById(tab.getAttribute("aria-controls"));

  function fromHash() {
    const hash = decodeURIComponent(location.hash.slice(1));
    const name = names.includes(hash) ? hash : ALIASES[hash.split("-")[0]];
    return tabs[names.indexOf(name)] ?? null;
  }

  function show(tab, { focus = false, record = true } = {}) {
    for (const t of tabs) {
      const selected = t === tab;
      t.setAttribute("aria-selected", String(selected));
      t.tabIndex = selected ? 0 : -1;
      panel(t).hidden = !selected;
    }
    if (focus) tab.focus();
    if (record && fromHash() !== tab) {
      // replaceState: no scroll to an element, no entry per click in the history
      const url = new URL(location.href);
      url.hash = tab.dataset.tab;
      history.replaceState(null, "", url);
    }
    if (window.Plotly) panel(tab).querySelectorAll(".js-plotly-plot").forEach((div) => Plotly.Plots.resize(div));
    panel(tab).dispatchEvent(new CustomEvent("tabshown", { bubbles: true })); // its charts are drawn now (dom.js)
  }

  tablist.addEventListener("click", (event) => {
    const tab = event.target.closest('[role="tab"]');
    if (tab) show(tab);
  });
  tablist.addEventListener("keydown", (event) => {
    const i = tabs.indexOf(document.activeElement);
    if (i < 0) return;
    const next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[event.key];
    if (next === undefined) return;
    event.preventDefault();
    show(tabs[(next + tabs.length) % tabs.length], { focus: true });
  });
  window.addEventListener("hashchange", () => {
    const tab = fromHash();
    if (tab) show(tab, { record: false });
  });
  const initial = fromHash();
  if (initial) show(initial, { record: false });
}

for (const tablist of document.querySelectorAll('[role="tablist"][data-tabs]')) setupTabs(tablist);
