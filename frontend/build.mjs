// Builds src/editor.js into ../static/vendor/codemirror/editor.bundle.js (one
// minified IIFE that sets window.GrpoEditor).  Run: npm ci && npm run build
import { build } from "esbuild";
import { readFileSync, statSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const here = dirname(fileURLToPath(import.meta.url));
const pkgs = [
  "codemirror", "@codemirror/view", "@codemirror/state", "@codemirror/language",
  "@codemirror/commands", "@codemirror/lang-python", "@codemirror/merge",
  "@codemirror/autocomplete", "@codemirror/search", "@codemirror/lint",
  "@lezer/python", "@lezer/lr", "@lezer/common", "@lezer/highlight",
];
const versions = Object.fromEntries(pkgs.map((p) => [
  p, JSON.parse(readFileSync(join(here, "node_modules", p, "package.json"), "utf8")).version,
]));
const out = join(here, "..", "static", "vendor", "codemirror", "editor.bundle.js");
const banner =
  "/*! grpo-web editor bundle (frontend/src/editor.js), built with esbuild.\n" +
  " * Includes CodeMirror 6 and Lezer, MIT License, (c) Marijn Haverbeke and others:\n" +
  " * " + Object.entries(versions).map(([p, v]) => `${p}@${v}`).join(", ") + "\n" +
  " * Also style-mod, w3c-keyname, crelt, @marijn/find-cluster-break (MIT).\n" +
  " * Rebuild: cd frontend && npm ci && npm run build\n */";

await build({
  entryPoints: [join(here, "src", "editor.js")],
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2020"],
  legalComments: "none",
  banner: { js: banner },
  define: { __GRPO_EDITOR_VERSIONS__: JSON.stringify(versions) },
  outfile: out,
  logLevel: "info",
});
console.log(`${out}: ${(statSync(out).size / 1024).toFixed(1)} KiB`);
