// The token-level view of one group: each completion as its tokens, coloured by a value TRL computed at the update
// (log-probability at the update or at generation, the reference's, entropy, importance ratio, clipped), every value
// on hover, and each completion's most clipped and least probable tokens listed. Data: tokens.json of the step
// (runs.rollouts.tokens). Token text is model output: it goes in through textContent and title only.

import { el, fmt, getJSON } from "./dom.js";

// A background colour for one token's value, or "" for none. Probabilities run red (0) to green (1); entropy from
// white to blue, relative to the highest in view; the ratio red below 1, green above, full at ±0.4 (twice TRL's
// default epsilon); clipped tokens orange.
function shade(field, value, scale) {
  if (value === null || value === undefined) return "";
  if (field === "clipped") return value ? "hsla(30, 95%, 55%, 0.75)" : "";
  if (field === "entropy") return `hsla(215, 85%, 55%, ${(Math.min(1, value / scale) * 0.7).toFixed(3)})`;
  if (field === "ratio") {
    const strength = Math.min(1, Math.abs(value - 1) / 0.4);
    if (strength < 0.005) return "";  // on policy: nothing to show
    return `hsla(${value >= 1 ? 120 : 0}, 75%, 50%, ${(strength * 0.7).toFixed(3)})`;
  }
  const p = Math.exp(value);  // a log-probability
  return `hsla(${Math.round(p * 120)}, 75%, 50%, 0.45)`;
}

function valueOf(c, field, i) {
  if (field === "clipped") return c.clipped ? c.clipped[i] : null;
  const values = c.values[field];
  return values ? values[i] : null;
}

// Every value of token i, one per line: the hover text.
function hoverText(c, i) {
  const v = (name) => (c.values[name] ? c.values[name][i] : null);
  const lines = [`token ${i}: ${JSON.stringify(c.tokens[i])}`];
  const lp = v("logprob");
  if (lp !== null) lines.push(`log-probability at the update ${fmt(lp, 4)} (p ${fmt(Math.exp(lp), 4)})`);
  if (v("old_logprob") !== null) lines.push(`log-probability at generation ${fmt(v("old_logprob"), 4)}`);
  if (v("sampling_logprob") !== null) lines.push(`log-probability of the sampler ${fmt(v("sampling_logprob"), 4)}`);
  if (v("ref_logprob") !== null) lines.push(`reference log-probability ${fmt(v("ref_logprob"), 4)}`);
  if (v("entropy") !== null) lines.push(`entropy ${fmt(v("entropy"), 4)}`);
  if (v("ratio") !== null) lines.push(`importance ratio ${fmt(v("ratio"), 4)}`);
  if (c.clipped) {
    const side = c.clipped_low && c.clipped_low[i] ? " (low)" : c.clipped_high && c.clipped_high[i] ? " (high)" : "";
    lines.push(`clipped: ${c.clipped[i] ? "yes" + side : "no"}`);
  }
  if (c.mask && !c.mask[i]) lines.push("not in the loss (masked)");
  return lines.join("\n");
}

function tokenStrip(c, field, scale) {
  const strip = el("div", { class: "token-strip", "data-index": c.index });
  c.tokens.forEach((text, i) => {
    const value = valueOf(c, field, i);
    const span = el("span", { class: "tv-token", title: hoverText(c, i), "data-position": i,
                              "data-value": value === null || value === undefined ? "" : String(value) });
    span.textContent = text;  // model text: as text
    const colour = shade(field, value, scale);
    if (colour) span.style.backgroundColor = colour;
    strip.append(span);
  });
  return strip;
}

function tokenList(title, items, describe, cls) {
  const list = el("ul", { class: `token-list ${cls}` });
  for (const item of items) {
    const li = el("li", {});
    li.append(el("code", { text: JSON.stringify(item.text) }), ` ${describe(item)}`);
    list.append(li);
  }
  return el("div", { class: "token-list-box" }, el("span", { class: "muted small", text: title }),
            items.length ? list : el("span", { class: "muted small", text: " none" }));
}

function completionBlock(c, field, scale) {
  return el("div", { class: "token-completion", id: `tokens-${c.index}` },
    el("div", { class: "muted small", text: `#${c.index} (completion ${c.completion} of the group)` +
                                           (c.update_step !== c.step ? ` · trained again at step ${c.update_step}` : "") }),
    tokenStrip(c, field, scale),
    el("div", { class: "token-lists" },
      tokenList("most clipped:", c.most_clipped, (t) => `ratio ${fmt(t.ratio, 3)} (${t.side})`, "most-clipped"),
      tokenList("least probable:", c.least_probable, (t) => `p ${fmt(t.prob, 4)} (log ${fmt(t.logprob, 3)})`,
                "least-probable")));
}

// The panel of one group at optimizer step `step`: a <details> that loads its tokens when first opened.
export function tokenPanel(base, step, group) {
  const body = el("div", { class: "token-body" });
  const details = el("details", { class: "token-view", id: `token-view-${group}` },
    el("summary", { text: "tokens: log-probabilities, entropy, ratio and clipping as TRL computed them" }), body);
  let loaded = false;
  details.addEventListener("toggle", async () => {
    if (!details.open || loaded) return;
    loaded = true;
    body.replaceChildren(el("p", { class: "muted", text: "loading…" }));
    try {
      const data = await getJSON(`${base}/steps/${step}/tokens.json?group=${group}`);
      render(body, data, group);
    } catch (e) {
      loaded = false;
      body.replaceChildren(el("p", { class: "error", text: `tokens: ${e.message}` }));
    }
  });
  return details;
}

function render(body, data, group) {
  const select = el("select", { id: `token-colour-${group}`, class: "token-colour", "aria-label": "colour tokens by" });
  for (const f of data.fields) select.append(el("option", { value: f.name, text: f.label }));
  const entropies = data.completions.flatMap((c) => c.values.entropy || []).filter((v) => v !== null);
  const scale = Math.max(1e-6, ...entropies);
  const list = el("div", { class: "token-completions" });
  const draw = () => list.replaceChildren(...data.completions.map((c) => completionBlock(c, select.value, scale)));
  select.addEventListener("change", draw);
  body.replaceChildren(
    el("label", { class: "small" }, "colour tokens by ", select),
    el("p", { class: "muted small", text: "Hover a token for all its values. Probabilities: red unlikely, green " +
      "likely; entropy: deeper blue is higher; ratio: green above 1, red below; clipped: orange." }),
    list);
  draw();
}
