"""The manual (issue 45): the README is a front page of at most 12 KB that links into it; the manual in docs/ builds
with mkdocs in strict mode (a broken link, a missing anchor or a page left out of the nav fails); its index reaches
every page; and the app serves the copy of its own version at /docs/, with no login and no network."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.urls import reverse

from tests.manual_pictures import PICTURES

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def nav_pages() -> set[str]:
    pages = set()
    for entry in yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]:
        ((_, target),) = entry.items()
        pages |= {target} if isinstance(target, str) else {p for item in target for p in item.values()}
    return pages


def test_the_readme_is_a_front_page_whose_links_all_land():
    text = (ROOT / "README.md").read_text()
    assert len(text.encode()) <= 12 * 1024
    links = re.findall(r"\]\((docs/[^)#]*)(#[^)]*)?\)", text)
    assert {"docs/index.md", "docs/getting-started.md"} <= {path for path, _ in links}
    for path, _ in links:
        assert (ROOT / path).exists(), path
    assert "bash scripts/dev.sh demo" in text and "bash scripts/dev.sh test" in text  # the two commands


def test_the_manual_builds_strict(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "runs" / "index.html").exists()


def test_every_page_is_in_the_nav_and_reached_from_the_index():
    pages = {p.name for p in DOCS.glob("*.md")}
    assert pages == nav_pages()
    linked = set(re.findall(r"\]\(([a-z0-9-]+\.md)(?:#[^)]*)?\)", (DOCS / "index.md").read_text()))
    assert linked == pages - {"index.md"}


@pytest.mark.django_db
def test_the_app_serves_every_page_with_no_login(client):
    index = client.get(reverse("manual"))
    assert index.status_code == 200 and b'id="manual-page"' in index.content
    for page in sorted(nav_pages() - {"index.md"}):
        response = client.get(reverse("manual_page", args=[page.removesuffix(".md")]))
        assert response.status_code == 200, page
        for href in re.findall(r'href="(/docs/[^"#]*)', response.content.decode()):
            assert client.get(href).status_code == 200, (page, href)  # every link between pages lands
    picture = client.get("/docs/run-overview.png")
    assert picture.status_code == 200 and picture["Content-Type"] == "image/png"


def shown_pictures() -> dict[str, set[str]]:
    """picture file name -> the pages (README.md, docs/*.md) that show it."""
    shown: dict[str, set[str]] = {}
    for page in [ROOT / "README.md", *DOCS.glob("*.md")]:
        base = "docs/" if page.name == "README.md" else ""
        for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)", page.read_text()):
            assert target.startswith(base) and "/" not in target.removeprefix(base), (page.name, target)
            shown.setdefault(target.removeprefix(base), set()).add(page.name)
    return shown


def test_every_picture_of_the_manual_is_written_by_the_browser_test_that_visits_its_page():
    """No picture is made by hand: each one the manual or the README shows is saved by a browser test
    (tests/manual_pictures.py), every picture a test saves is shown, and docs/ holds no other picture."""
    shown = shown_pictures()
    assert set(shown) == {f"{name}.png" for name in PICTURES}
    assert {p.name for p in DOCS.glob("*.png")} == set(shown)  # nothing left over from an earlier picture
    assert "run-overview.png" in {name for name, pages in shown.items() if "README.md" in pages}
    for name, test_file in PICTURES.items():
        source = (ROOT / test_file).read_text()
        assert re.search(rf"save_picture\(page, \"{re.escape(name)}\"\)", source), (name, test_file)
        assert (DOCS / f"{name}.png").read_bytes().startswith(b"\x89PNG"), name


def test_a_picture_is_saved_from_the_page_as_the_browser_shows_it(browser, tmp_path, monkeypatch):
    """``save`` writes what chromium shows: a page that changes, changes its picture."""
    from tests import manual_pictures

    monkeypatch.setattr(manual_pictures, "DOCS", tmp_path)
    page = browser.new_page(viewport={"width": 320, "height": 200})
    try:
        page.set_content("<body style='margin:0;background:#fff'><h1>one</h1></body>")
        first = manual_pictures.save(page, "review").read_bytes()
        page.set_content("<body style='margin:0;background:#fff'><h1>two</h1></body>")
        second = manual_pictures.save(page, "review").read_bytes()
    finally:
        page.close()
    assert first.startswith(b"\x89PNG") and second.startswith(b"\x89PNG") and first != second
    with pytest.raises(KeyError, match="not a picture of the manual"):
        manual_pictures.save(page, "made-up")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path", ["/docs/nope/", "/docs/..%2Fsettings/", "/docs/..%2F..%2Fetc%2Fpasswd", "/docs/index.md", "/docs/x.png"]
)
def test_what_is_not_a_page_of_the_manual_is_not_found(client, path):
    assert client.get(path).status_code == 404
