"""The manual (docs/), served by the app at /docs/: the copy of the installed version, rendered from its markdown with
no network. The pages and their order are mkdocs.yml's nav, the same the manual's strict build checks
(tests/architecture/test_the_manual.py); a link to another page (``runs.md#anchor``) becomes its URL here. The pages
are the project's own text, not user input."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import markdown
import yaml
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import FileResponse, Http404
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

DOCS = Path(settings.BASE_DIR) / "docs"
CONFIG = Path(settings.BASE_DIR) / "mkdocs.yml"
PAGE = re.compile(r"[a-z0-9][a-z0-9-]*")
LINK = re.compile(r'(href|src)="(?![a-z]+:|/|#)([^"#]*)(#[^"]*)?"')


@functools.cache
def nav() -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """(section, ((title, page), ...)) in mkdocs.yml's order; the index is its own section ("")."""
    out = []
    for entry in yaml.safe_load(CONFIG.read_text())["nav"]:
        ((title, target),) = entry.items()
        if isinstance(target, str):
            out.append(("", ((title, target.removesuffix(".md")),)))
        else:
            pages = tuple((t, p.removesuffix(".md")) for item in target for t, p in item.items())
            out.append((title, pages))
    return tuple(out)


def _url(page: str) -> str:
    return reverse("manual") if page == "index" else reverse("manual_page", args=[page])


def _link(match: re.Match) -> str:
    attribute, target, anchor = match.group(1), match.group(2), match.group(3) or ""
    if target.endswith(".md") and PAGE.fullmatch(target[:-3]):
        return f'{attribute}="{_url(target[:-3])}{anchor}"'
    if not target:
        return match.group(0)
    return f'{attribute}="{reverse("manual_file", args=[target])}{anchor}"'  # a picture beside the pages


@functools.lru_cache(maxsize=64)
def rendered(page: str, mtime_ns: int) -> tuple[str, str]:
    """(title, HTML) of docs/<page>.md (``mtime_ns``: a changed file renders again)."""
    text = (DOCS / f"{page}.md").read_text(encoding="utf-8")
    html = markdown.markdown(text, extensions=["tables", "fenced_code", "toc"], output_format="html")
    title = text.split("\n", 1)[0].lstrip("# ").strip() or page
    return title, LINK.sub(_link, html)


@require_GET
@login_not_required
def manual_page(request, page: str = "index"):
    pages = {p for _, entries in nav() for _, p in entries}
    if page not in pages or not PAGE.fullmatch(page):
        raise Http404("no such page in the manual")
    path = DOCS / f"{page}.md"
    title, html = rendered(page, path.stat().st_mtime_ns)
    sections = [(section, [(t, _url(p), p == page) for t, p in entries]) for section, entries in nav()]
    return render(request, "manual.html", {"title": title, "html": html, "sections": sections})


@require_GET
@login_not_required
def manual_file(request, name: str):
    """A picture the pages show (docs/*.png)."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*\.png", name) or not (DOCS / name).is_file():
        raise Http404("no such file in the manual")
    return FileResponse(open(DOCS / name, "rb"), content_type="image/png")
