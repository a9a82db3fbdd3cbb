// A completion as a transcript: <think> sections collapsible, LaTeX rendered with KaTeX, fenced code highlighted,
// self-reflection phrases marked. Everything is built from the text: tags and markup found in it only decide how
// text nodes are grouped (textContent, KaTeX's own renderer, Lezer's tokens); no model text is ever parsed as HTML,
// so a completion holding <script> or </textarea> shows as those characters and runs nothing.

import { el } from "./dom.js";

// <think>, </think>, a fenced code block (closed or running to the end), $$display$$, \[display\], \(inline\),
// and $inline$ (no space inside the dollars, no digit right after: "$5 and $10" stays text).
const TOKEN = new RegExp(
  [
    "<think>",
    "</think>",
    "```([\\w+#.-]*)[^\\n]*\\n([\\s\\S]*?)(?:\\n?```|$)",
    "\\$\\$([\\s\\S]+?)\\$\\$",
    "\\\\\\[([\\s\\S]+?)\\\\\\]",
    "\\\\\\(([\\s\\S]+?)\\\\\\)",
    "\\$(?![\\s$])((?:[^$\\n\\\\]|\\\\.)+?)(?<!\\s)\\$(?!\\d)",
  ].join("|"),
  "g",
);

// Text with the marked spans ([start, end, kind?] in UTF-16 units of the whole completion, in order; kind
// "reflection" unless given) inside [offset, offset+len) wrapped in <mark class=kind>.
function appendMarked(parent, text, offset, spans) {
  let pos = 0;
  for (const [start, end, kind = "reflection"] of spans || []) {
    const a = Math.max(start - offset, pos);
    const b = Math.min(end - offset, text.length);
    if (b <= a) continue;
    if (a > pos) parent.append(document.createTextNode(text.slice(pos, a)));
    parent.append(el("mark", { class: kind, text: text.slice(a, b) }));
    pos = b;
  }
  if (pos < text.length) parent.append(document.createTextNode(text.slice(pos)));
}

function math(tex, display) {
  const node = el(display ? "div" : "span", { class: display ? "math display" : "math" });
  if (window.katex) {
    // trust: false keeps \href, \url, \includegraphics and \html* out; KaTeX escapes text it writes
    window.katex.render(tex, node, { displayMode: display, throwOnError: false, trust: false, strict: "ignore",
                                     maxSize: 20, maxExpand: 500, output: "htmlAndMathml" });
  } else {
    node.textContent = display ? `$$${tex}$$` : `$${tex}$`;
  }
  node.dataset.tex = tex;
  return node;
}

function codeBlock(code, language) {
  const inner = el("code", language ? { "data-lang": language } : {});
  if (!(window.GrpoHighlight && window.GrpoHighlight.highlight(code, language, inner))) inner.textContent = code;
  return el("pre", { class: "code-block" }, inner);
}

function thinkSection(open, label = "thinking") {
  const body = el("div", { class: "think-body" });
  const summary = el("summary", { text: label });
  const details = el("details", { class: "think" }, summary, body);
  details.open = open;
  return { details, body, summary };
}

// Render `text` into a new element. `spans`: reflection phrase spans from the server; `hits`: where the text the page
// was searched for is (marked as hits: where a hit and a reflection phrase overlap, the hit shows). `partial`: the
// text is the end of a longer completion, so a thinking section it starts inside is its end, not all of it.
export function transcript(text, spans = [], { thinkOpen = true, partial = false, hits = [] } = {}) {
  if (hits && hits.length) {
    spans = [...hits.map(([a, b]) => [a, b, "hit"]), ...(spans || [])].sort((x, y) => x[0] - y[0]);
  }
  const root = el("div", { class: "transcript" });
  let parent = root;
  let think = null;
  let last = 0;
  let label = "thinking";
  // A completion that closes a <think> it never opened (the chat template opened it) starts inside one.
  const opens = text.indexOf("<think>");
  const closes = text.indexOf("</think>");
  if (closes >= 0 && (opens < 0 || closes < opens)) {
    label = partial ? "the end of the thinking" : "thinking";
    think = thinkSection(thinkOpen, label);
    root.append(think.details);
    parent = think.body;
  }
  const flushText = (upto) => {
    if (upto > last) appendMarked(parent, text.slice(last, upto), last, spans);
  };
  for (const m of text.matchAll(TOKEN)) {
    flushText(m.index);
    const token = m[0];
    if (token === "<think>") {
      if (!think) {
        think = thinkSection(thinkOpen);
        root.append(think.details);
        parent = think.body;
      } else {
        appendMarked(parent, token, m.index, spans);
      }
    } else if (token === "</think>") {
      if (think && parent === think.body) {
        const words = think.body.textContent.trim().split(/\s+/).filter(Boolean).length;
        const marks = think.body.querySelectorAll("mark.reflection").length;
        think.summary.textContent = `${label} · ${words} words` + (marks ? ` · ${marks} reflection phrase${marks === 1 ? "" : "s"}` : "");
        parent = root;
        label = "thinking";
      } else {
        appendMarked(parent, token, m.index, spans);
      }
    } else if (token.startsWith("```")) {
      parent.append(codeBlock(m[2], m[1]));
    } else if (m[3] !== undefined) {
      parent.append(math(m[3], true));
    } else if (m[4] !== undefined) {
      parent.append(math(m[4], true));
    } else if (m[5] !== undefined) {
      parent.append(math(m[5], false));
    } else {
      parent.append(math(m[6], false));
    }
    last = m.index + token.length;
  }
  flushText(text.length);
  if (think && parent === think.body) {
    think.summary.textContent = "thinking · unfinished (no </think>)";
  }
  return root;
}

// A long completion as a page first shows it: the server sends its opening and its end
// (runs.rollouts.selectors.completion_preview), shown with the middle counted, the end's thinking folded, and a
// button that loads the whole completion (`load`: a promise of its element) and puts it in place. Nothing else loads.
export function longCompletion(preview, spans, load) {
  const root = el("div", { class: "long-completion" });
  const size = preview.chars >= 10000 ? `${(preview.chars / 1000).toFixed(1)}k` : String(preview.chars);
  const marks = (spans || []).length;
  const head = el("div", { class: "transcript preview-head" });
  appendMarked(head, preview.head, 0, spans);
  const middle = Math.max(0, preview.tail_at - preview.head.length);
  const tailSpans = (spans || [])
    .map(([a, b]) => [a - preview.tail_at, b - preview.tail_at])
    .filter(([, b]) => b > 0);
  const open = el("button", { type: "button", class: "secondary small open-full",
    text: `open in full (${size} characters` + (marks ? ` · ${marks} reflection phrase${marks === 1 ? "" : "s"})` : ")") });
  open.addEventListener("click", async () => {
    open.disabled = true;
    open.textContent = "loading…";
    try {
      root.replaceWith(await load());
    } catch (e) {
      open.disabled = false;
      open.textContent = "it could not be loaded: try again";
    }
  });
  root.append(
    el("p", { class: "muted small long-note", text: `${size} characters: its opening and its end` }),
    head,
    el("p", { class: "elided muted small", text: `… ${middle.toLocaleString("en")} characters not shown …` }),
    transcript(preview.tail, tailSpans, { thinkOpen: false, partial: true }),
    open,
  );
  return root;
}

// A completion's reasoning steps shaded by the per-step (process) score a reward function logged: `stepScores` is
// {split, scores, pattern?}; the text is split as the function split it (a delimiter, or a regular expression when
// `pattern`), each step a block of text whose shade goes from red (0) to green (1), its score on hover. Steps
// without a score stay plain.
export function processSteps(text, stepScores) {
  const { split, scores, pattern } = stepScores;
  let parts;
  try {
    parts = pattern ? text.split(new RegExp(split)) : text.split(split);
  } catch (e) {
    parts = [text];
  }
  const root = el("div", { class: "process-steps" });
  parts.forEach((part, i) => {
    const score = i < scores.length ? scores[i] : null;
    const step = el("div", { class: "process-step", text: part || "\u00a0" });
    if (score !== null && score !== undefined) {
      const clamped = Math.max(0, Math.min(1, score));
      step.style.backgroundColor = `hsla(${Math.round(clamped * 120)}, 70%, 50%, 0.25)`;
      step.dataset.score = String(score);
      step.title = `step ${i + 1}: score ${score}`;
    }
    root.append(step);
  });
  return root;
}

// Whether a completion's messages hold tool calls or tool results (a run with tools).
export function hasTools(messages) {
  return Array.isArray(messages) && messages.some((m) => m && (m.tool_calls || m.role === "tool"));
}

// A multi-turn completion as TRL produced it (tools): each turn in order, an assistant turn's text as a transcript,
// each tool call with its name and arguments, each tool result (an error too) as the tool returned it. All text.
export function turns(messages) {
  const list = el("ol", { class: "turns" });
  for (const m of messages) {
    const role = String(m.role || "");
    const item = el("li", { class: `turn turn-${role === "tool" ? "tool" : "assistant"}` },
      el("span", { class: "badge turn-role", text: role === "tool" ? `tool result · ${m.name || ""}` : role }));
    if (role === "tool") {
      const content = typeof m.content === "string" ? m.content : JSON.stringify(m.content);
      const failed = content.startsWith("{'error'") || content.startsWith('{"error"');
      item.append(el("pre", { class: `tool-result${failed ? " tool-error" : ""}`, text: content }));
    } else if (m.content) {
      item.append(transcript(String(m.content)));
    }
    for (const call of m.tool_calls || []) {
      const f = call.function || call;
      const args = typeof f.arguments === "string" ? f.arguments : JSON.stringify(f.arguments);
      item.append(el("div", { class: "tool-call" }, el("span", { class: "badge", text: "tool call" }),
        el("code", { class: "tool-name", text: String(f.name || "") }),
        el("code", { class: "tool-args", text: args })));
    }
    list.append(item);
  }
  return list;
}
