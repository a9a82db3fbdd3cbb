// Builds src/editor.js into ../static/vendor/codemirror/editor.bundle.js (one
// minified IIFE that sets window.GrpoEditor), src/highlight.js into
// ../static/vendor/highlight/highlight.bundle.js (window.GrpoHighlight, for transcripts), and copies KaTeX's
// dist (script, stylesheet, woff2 fonts) into ../static/vendor/katex, and axe-core (for the browser tests only) into
// ../static/vendor/axe.  Run: npm ci && npm run build
import { build } from "esbuild";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
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

// Transcript code highlighting: the Lezer parts only (no editor).
const highlightPkgs = ["@lezer/highlight", "@lezer/python", "@lezer/lr", "@lezer/common"];
const highlightOut = join(here, "..", "static", "vendor", "highlight", "highlight.bundle.js");
await build({
  entryPoints: [join(here, "src", "highlight.js")],
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2020"],
  legalComments: "none",
  banner: {
    js: "/*! grpo-web transcript highlighting (frontend/src/highlight.js), built with esbuild.\n" +
      " * Includes Lezer, MIT License, (c) Marijn Haverbeke and others: " +
      highlightPkgs.map((p) => `${p}@${versions[p]}`).join(", ") + "\n" +
      " * Rebuild: cd frontend && npm ci && npm run build\n */",
  },
  outfile: highlightOut,
  logLevel: "info",
});
console.log(`${highlightOut}: ${(statSync(highlightOut).size / 1024).toFixed(1)} KiB`);

// KaTeX, as its dist ships it: rendering LaTeX in transcripts. Only the woff2 fonts: every browser we serve reads
// them, and KaTeX's stylesheet lists them first.
const katexDist = join(here, "node_modules", "katex", "dist");
const katexOut = join(here, "..", "static", "vendor", "katex");
const katexVersion = JSON.parse(readFileSync(join(here, "node_modules", "katex", "package.json"), "utf8")).version;
rmSync(katexOut, { recursive: true, force: true });
mkdirSync(join(katexOut, "fonts"), { recursive: true });
copyFileSync(join(katexDist, "katex.min.js"), join(katexOut, "katex.min.js"));
// the stylesheet without the .woff and .ttf fallbacks it names after each woff2 (not copied: collectstatic's
// manifest storage refuses a stylesheet that names a missing file)
writeFileSync(join(katexOut, "katex.min.css"), readFileSync(join(katexDist, "katex.min.css"), "utf8")
  .replace(/,url\(fonts\/[\w-]+\.(?:woff|ttf)\) format\("(?:woff|truetype)"\)/g, ""));
for (const name of readdirSync(join(katexDist, "fonts")).filter((n) => n.endsWith(".woff2"))) {
  copyFileSync(join(katexDist, "fonts", name), join(katexOut, "fonts", name));
}
copyFileSync(join(here, "node_modules", "katex", "LICENSE"), join(katexOut, "LICENSE"));
writeFileSync(join(katexOut, "README.md"),
  `KaTeX ${katexVersion} (MIT License), copied from node_modules/katex/dist by frontend/build.mjs.\n` +
  "Do not edit: rebuild with `cd frontend && npm ci && npm run build`.\n");
console.log(`${katexOut}: KaTeX ${katexVersion}`);

// axe-core, for the browser tests' accessibility check only (tests/browser_checks.py injects it with Playwright's
// add_script_tag): no template includes it, so no page loads it.
const axeDir = join(here, "node_modules", "axe-core");
const axeOut = join(here, "..", "static", "vendor", "axe");
const axeVersion = JSON.parse(readFileSync(join(axeDir, "package.json"), "utf8")).version;
rmSync(axeOut, { recursive: true, force: true });
mkdirSync(axeOut, { recursive: true });
for (const name of ["axe.min.js", "LICENSE"]) copyFileSync(join(axeDir, name), join(axeOut, name));
writeFileSync(join(axeOut, "README.md"),
  `axe-core ${axeVersion} (Mozilla Public License 2.0), copied from node_modules/axe-core by frontend/build.mjs.\n` +
  "Used by the browser tests only (injected by tests/browser_checks.py); no page includes it.\n" +
  "Do not edit: rebuild with `cd frontend && npm ci && npm run build`.\n");
console.log(`${axeOut}: axe-core ${axeVersion}`);

// Plotly's "basic" bundle (scatter, bar, pie: the only trace types the pages draw), as plotly.js ships it: a
// quarter of the full bundle's 4.8 MB. Keep its version the plotly Python package's (pyproject).
const plotlyDir = join(here, "node_modules", "plotly.js-basic-dist-min");
const plotlyOut = join(here, "..", "static", "vendor", "plotly-basic");
const plotlyVersion = JSON.parse(readFileSync(join(plotlyDir, "package.json"), "utf8")).version;
rmSync(plotlyOut, { recursive: true, force: true });
mkdirSync(plotlyOut, { recursive: true });
for (const name of ["plotly-basic.min.js", "LICENSE"]) copyFileSync(join(plotlyDir, name), join(plotlyOut, name));
writeFileSync(join(plotlyOut, "README.md"),
  `plotly.js ${plotlyVersion}, basic bundle (MIT License), copied from node_modules/plotly.js-basic-dist-min by ` +
  "frontend/build.mjs.\nDo not edit: rebuild with `cd frontend && npm ci && npm run build`.\n");
console.log(`${plotlyOut}: plotly.js basic ${plotlyVersion}`);
