// An evaluation's completions as transcripts (<think> collapsible, LaTeX, code), like the rollout browser's. Each is
// read back from the escaped text the server rendered (textContent) and rebuilt from text nodes: never parsed as HTML.

import { transcript } from "./transcript.js";

for (const pre of document.querySelectorAll("pre.eval-completion")) pre.replaceWith(transcript(pre.textContent));
