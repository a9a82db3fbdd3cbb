// grpo-web reward-function editor: CodeMirror 6 wrappers.
//
// Built by `npm run build` into static/vendor/codemirror/editor.bundle.js as an
// IIFE that sets `window.GrpoEditor`.  See static/vendor/codemirror/README.md.

import { basicSetup, EditorView } from "codemirror";
import { EditorState } from "@codemirror/state";
import { keymap, lineNumbers, highlightSpecialChars, drawSelection } from "@codemirror/view";
import { indentWithTab } from "@codemirror/commands";
import { indentUnit, syntaxHighlighting, defaultHighlightStyle, HighlightStyle } from "@codemirror/language";
import { tags } from "@lezer/highlight";
import { python } from "@codemirror/lang-python";
import { MergeView, unifiedMergeView } from "@codemirror/merge";
import { linter, lintGutter, setDiagnostics } from "@codemirror/lint";

const WRAPPER_SELECTOR = '[data-testid="code-editor"]';

function pythonBase() {
  return [
    python(),
    EditorState.tabSize.of(4),
    indentUnit.of("    "),
  ];
}

// CodeMirror's default colours, but for the two below 4.5:1 contrast on white (WCAG AA; the browser tests run
// axe-core): escapes and regular expressions (#e40) and invalid code (#f00) in darker shades of the same hues. One
// style with every default tag in it: basicSetup's default style is only a fallback, which any other highlighter
// (a style of these two tags alone) switches off.
const contrastFixes = HighlightStyle.define([
  ...defaultHighlightStyle.specs,
  { tag: [tags.regexp, tags.escape, tags.special(tags.string)], color: "#b33000" },
  { tag: tags.invalid, color: "#c00" },
]);

const named = (label) => EditorView.contentAttributes.of({ "aria-label": label });

function readOnlyExt() {
  // still focusable (tabindex): a keyboard can reach, scroll and select read-only code
  return [EditorState.readOnly.of(true), EditorView.editable.of(false),
          EditorView.contentAttributes.of({ tabindex: "0" })];
}

function labelFor(textarea) {
  if (textarea.id) {
    const l = document.querySelector(`label[for="${CSS.escape(textarea.id)}"]`);
    if (l) return l;
  }
  return textarea.closest("label");
}

/**
 * Replace a <textarea> with a CodeMirror 6 Python editor.
 * The textarea stays in the DOM (hidden) and its value is kept in sync on
 * every change, so a normal form POST still submits the code.
 *
 * With ``lint`` (text -> Promise of [{line, col, severity, message}], lines from 1, columns from 0), problems are
 * marked as you type (after a pause) and listed in the gutter; ``handle.mark(problems)`` adds problems found
 * elsewhere (a failed Test) until the code changes.
 *
 * @param {HTMLTextAreaElement} textarea
 * @param {{readOnly?: boolean, lint?: (text: string) => Promise<Array>}} [options]
 * @returns {{getValue(): string, setValue(text: string): void, view: EditorView,
 *            wrapper: HTMLElement, textarea: HTMLTextAreaElement, mark(problems: Array): void, destroy(): void}}
 */
export function mountEditor(textarea, { readOnly = false, lint = null } = {}) {
  if (typeof textarea === "string") textarea = document.querySelector(textarea);
  if (!textarea) throw new Error("GrpoEditor.mountEditor: textarea not found");
  if (textarea.grpoEditor) return textarea.grpoEditor;

  const readOnlyAttr = readOnly || textarea.readOnly || textarea.disabled;
  const wrapper = document.createElement("div");
  wrapper.className = "cm-grpo-editor-wrap";
  wrapper.setAttribute("data-testid", "code-editor");
  if (readOnlyAttr) wrapper.classList.add("cm-grpo-readonly");

  const label = labelFor(textarea);
  const ariaLabel =
    textarea.getAttribute("aria-label") ||
    (label ? label.textContent.trim().split("\n")[0].trim() : "") ||
    "Code editor";

  const syncToTextarea = EditorView.updateListener.of((update) => {
    if (!update.docChanged) return;
    textarea.value = update.state.doc.toString();
    textarea.dispatchEvent(new Event("input", { bubbles: true }));
  });

  const extensions = [
    basicSetup, // line numbers, history, bracket matching, search, fold, autocomplete...
    syntaxHighlighting(contrastFixes),
    keymap.of([indentWithTab]),
    pythonBase(),
    EditorView.editorAttributes.of({ class: "cm-grpo-editor" }),
    // tabindex: a scroller's content must be focusable, for keyboards (axe-core's scrollable-region-focusable)
    EditorView.contentAttributes.of({ "aria-label": ariaLabel, tabindex: "0" }),
    syncToTextarea,
  ];
  if (readOnlyAttr) extensions.push(readOnlyExt());
  let marked = [];  // problems from elsewhere (a failed Test), shown until the code changes
  let linted = { doc: null, found: [] };  // what the last lint found, and in which text
  if (lint && !readOnlyAttr) {
    extensions.push(lintGutter(), linter(async (view) => {
      const doc = view.state.doc;
      let found = [];
      try {
        found = await lint(doc.toString());
      } catch (e) {
        found = [];  // a failed lint request is no reason to mark the code
      }
      linted = { doc, found };
      return [...found, ...marked].map((p) => toDiagnostic(doc, p));
    }, { delay: 500 }));
    extensions.push(EditorView.updateListener.of((update) => { if (update.docChanged) marked = []; }));
  }

  const view = new EditorView({
    state: EditorState.create({ doc: textarea.value, extensions }),
    parent: wrapper,
  });

  // The hidden textarea must not block submission: a `required` control that
  // is display:none makes the browser refuse to submit ("not focusable").
  // The server validates the field anyway.
  textarea.removeAttribute("required");
  textarea.style.display = "none";
  textarea.setAttribute("aria-hidden", "true");
  // Insert outside an enclosing <label> so clicks inside the editor are not
  // redirected to the hidden textarea.
  const anchor = textarea.parentElement && textarea.parentElement.tagName === "LABEL" ? textarea.parentElement : textarea;
  anchor.insertAdjacentElement("afterend", wrapper);

  const onLabelClick = (e) => { e.preventDefault(); view.focus(); };
  if (label) label.addEventListener("click", onLabelClick);

  const setValue = (text) => {
    view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: String(text ?? "") } });
  };
  const getValue = () => view.state.doc.toString();

  const form = textarea.form;
  const onReset = () => setTimeout(() => setValue(textarea.defaultValue), 0);
  const onSubmit = () => { textarea.value = getValue(); };
  if (form) {
    form.addEventListener("reset", onReset);
    form.addEventListener("submit", onSubmit);
  }

  const handle = {
    view,
    wrapper,
    textarea,
    getValue,
    setValue,
    focus: () => view.focus(),
    mark(problems) {
      // shown at once, with what the last lint found in this text: CodeMirror's forceLinting does nothing once the
      // as-you-type lint has run, and a Test's result comes seconds after it
      marked = problems || [];
      if (!lint || readOnlyAttr) return;
      const doc = view.state.doc;
      const found = linted.doc === doc ? linted.found : [];
      view.dispatch(setDiagnostics(view.state, [...found, ...marked].map((p) => toDiagnostic(doc, p))));
    },
    destroy() {
      if (form) {
        form.removeEventListener("reset", onReset);
        form.removeEventListener("submit", onSubmit);
      }
      if (label) label.removeEventListener("click", onLabelClick);
      view.destroy();
      wrapper.remove();
      textarea.style.display = "";
      textarea.removeAttribute("aria-hidden");
      delete textarea.grpoEditor;
    },
  };
  wrapper.cmView = view;
  wrapper.grpoEditor = handle;
  textarea.grpoEditor = handle;
  return handle;
}

/** A {line, col, severity, message} problem (line from 1, column from 0) as a CodeMirror diagnostic: from the column
 * to the end of the word there (or the line), clamped to the document. */
function toDiagnostic(doc, p) {
  const line = doc.line(Math.min(Math.max(1, p.line || 1), doc.lines));
  const from = Math.min(line.from + Math.max(0, p.col || 0), line.to);
  const word = /^[\w.]+/.exec(doc.sliceString(from, line.to));
  const to = word ? from + word[0].length : line.to;
  return { from, to: Math.max(to, from), severity: p.severity === "warning" ? "warning" : "error", message: p.message };
}

/**
 * Read-only diff of two versions of a Python file.
 *
 * @param {HTMLElement|string} container
 * @param {string} oldText  left / original
 * @param {string} newText  right / changed
 * @param {{mode?: "split"|"unified", collapseUnchanged?: boolean}} [options]
 * @returns {{view: MergeView|EditorView, destroy(): void}}
 */
export function mountDiff(container, oldText, newText, { mode = "split", collapseUnchanged = false } = {}) {
  if (typeof container === "string") container = document.querySelector(container);
  if (!container) throw new Error("GrpoEditor.mountDiff: container not found");
  container.classList.add("cm-grpo-diff");
  container.setAttribute("data-testid", "code-diff");

  const ext = [
    lineNumbers(),
    highlightSpecialChars(),
    drawSelection(),
    syntaxHighlighting(contrastFixes),
    syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
    pythonBase(),
    readOnlyExt(),
    EditorView.editorAttributes.of({ class: "cm-grpo-diff-editor" }),
  ];
  const collapse = collapseUnchanged ? { margin: 3, minSize: 4 } : undefined;

  let view;
  if (mode === "unified") {
    view = new EditorView({
      parent: container,
      state: EditorState.create({
        doc: String(newText ?? ""),
        extensions: [ext, named("the changes"), unifiedMergeView({ original: String(oldText ?? ""), mergeControls: false, collapseUnchanged: collapse })],
      }),
    });
  } else {
    view = new MergeView({
      a: { doc: String(oldText ?? ""), extensions: [ext, named("the old version")] },
      b: { doc: String(newText ?? ""), extensions: [ext, named("the new version")] },
      parent: container,
      highlightChanges: true,
      gutter: true,
      collapseUnchanged: collapse,
    });
  }
  container.cmMergeView = view;
  return { view, destroy: () => view.destroy() };
}

function resolveView(selectorOrEl) {
  let el = selectorOrEl == null ? document.querySelector(WRAPPER_SELECTOR)
    : typeof selectorOrEl === "string" ? document.querySelector(selectorOrEl) : selectorOrEl;
  if (!el) throw new Error("GrpoEditor: element not found: " + selectorOrEl);
  if (el instanceof EditorView) return el;
  if (el.cmView) return el.cmView;
  if (el.grpoEditor) return el.grpoEditor.view;
  const w = el.closest && el.closest(WRAPPER_SELECTOR);
  if (w && w.cmView) return w.cmView;
  const inner = el.querySelector && el.querySelector(WRAPPER_SELECTOR);
  if (inner && inner.cmView) return inner.cmView;
  const found = EditorView.findFromDOM(el);
  if (found) return found;
  throw new Error("GrpoEditor: no editor at " + selectorOrEl);
}

/** Test helper: replace an editor's whole content. Accepts the wrapper, the
 * original textarea, a selector for either, or null for the first editor. */
export function setValue(selectorOrEl, text) {
  const view = resolveView(selectorOrEl);
  view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: String(text ?? "") } });
  return view.state.doc.toString();
}

/** Test helper: read an editor's content (same arguments as setValue). */
export function getValue(selectorOrEl) {
  return resolveView(selectorOrEl).state.doc.toString();
}

/** Mount an editor on every `textarea[data-code-editor]` not yet mounted. */
export function mountAll(root = document) {
  return Array.from(root.querySelectorAll("textarea[data-code-editor]"))
    .map((ta) => mountEditor(ta, { readOnly: ta.dataset.codeEditor === "readonly" }));
}

const api = { mountEditor, mountDiff, setValue, getValue, mountAll, EditorView, version: __GRPO_EDITOR_VERSIONS__ };
if (typeof window !== "undefined") window.GrpoEditor = api;
export default api;
