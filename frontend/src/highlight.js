// grpo-web transcript code highlighting: Lezer's Python parser and class highlighter, without an editor.
//
// Built by `npm run build` into static/vendor/highlight/highlight.bundle.js as an IIFE that sets
// `window.GrpoHighlight`. Code arrives as text and leaves as text nodes (in <span class="tok-..."> for tokens):
// nothing is ever parsed as HTML.

import { classHighlighter, highlightCode } from "@lezer/highlight";
import { parser as pythonParser } from "@lezer/python";

const parsers = { python: pythonParser, py: pythonParser, python3: pythonParser };

function highlight(code, language, target) {
  const parser = parsers[(language || "").toLowerCase()];
  if (!parser) return false;
  highlightCode(
    code,
    parser.parse(code),
    classHighlighter,
    (text, classes) => {
      const node = document.createTextNode(text);
      if (classes) {
        const span = document.createElement("span");
        span.className = classes;
        span.append(node);
        target.append(span);
      } else {
        target.append(node);
      }
    },
    () => target.append(document.createTextNode("\n")),
  );
  return true;
}

window.GrpoHighlight = { highlight, languages: Object.keys(parsers) };
