// A form that came back with errors: its summary (every problem, each linked to its field) is scrolled to and
// focused, so a refusal below the fold is never missed; a link opens the <details> its field is folded in and
// focuses the field. While a form is submitted, its button says what the server is doing (data-busy).

const summary = document.querySelector("[data-error-summary]");
if (summary) {
  summary.scrollIntoView({ block: "start" });
  summary.focus();
  summary.addEventListener("click", (event) => {
    const link = event.target.closest("a[href^='#']");
    const field = link && document.getElementById(decodeURIComponent(link.hash.slice(1)));
    if (!field) return;
    event.preventDefault();
    for (let d = field.closest("details"); d; d = d.parentElement.closest("details")) d.open = true;
    field.scrollIntoView({ block: "center" });
    field.focus();
  });
}

for (const form of document.querySelectorAll("form[data-busy]")) {
  form.addEventListener("submit", () => {
    const button = form.querySelector("button[type=submit]");
    if (!button) return;
    form.setAttribute("aria-busy", "true");
    button.disabled = true;
    button.textContent = form.dataset.busy;
  });
}
