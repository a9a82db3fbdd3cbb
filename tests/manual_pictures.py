"""The manual's pictures (issue 45): each is written by the browser test that visits its page, never by hand, so a
page that changes changes its picture the next time the tests run (commit what they wrote).

``save(page, name)`` writes ``docs/<name>.png``; tests/architecture/test_the_manual.py checks that every picture the
manual and the README show is one of PICTURES, that the test named beside it calls ``save`` with that name, and that
docs/ holds no other picture.
"""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"

# name -> the browser test file that visits the page and saves it
PICTURES = {
    "run-overview": "tests/lifecycle/test_browser_walking_skeleton.py",
    "run-rollouts": "tests/lifecycle/test_browser_walking_skeleton.py",
    "reward-editor": "tests/rewards/test_browser_reward_editor.py",
    "review": "tests/review/test_review_in_the_browser.py",
    "compare": "tests/compare/test_browser_compare.py",
}


def save(page, name: str) -> Path:
    """What ``page`` shows now (its viewport) as the manual's picture ``name``."""
    if name not in PICTURES:
        raise KeyError(f"{name}: not a picture of the manual (tests/manual_pictures.py PICTURES)")
    path = DOCS / f"{name}.png"
    page.evaluate("document.activeElement?.blur()")  # no focus ring or caret in the picture
    page.screenshot(path=str(path), animations="disabled", caret="hide")
    return path
