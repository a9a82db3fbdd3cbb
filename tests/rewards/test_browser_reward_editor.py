"""In chromium: write a reward in the editor, save it, test it on dataset rows, see the scores and an error's line."""

import pytest

from rewards.models import RewardFunction
from tests.conftest import log_in
from tests.manual_pictures import save as save_picture

pytestmark = [pytest.mark.django_db(transaction=True)]

GOOD = """def has_answer(completions, answer, **kwargs):
    print("scoring", len(completions))
    return [1.0 if a in c else 0.0 for c, a in zip(completions, answer)]
"""
BAD = """def has_answer(completions, answer, **kwargs):
    scores = []
    for c in completions:
        scores.append(1 / 0)
    return scores
"""


def _set_code(page, code):
    page.evaluate("(text) => GrpoEditor.setValue(null, text)", code)


def test_write_save_and_test_a_reward_in_the_browser(web_server, celery_worker, owner, dataset_version, page):
    log_in(page, web_server)

    page.goto(f"{web_server}/rewards/new/")
    page.fill("#id_name", "has-answer")
    page.click("button:text('Create')")
    page.wait_for_selector("[data-testid=code-editor] .cm-content")
    assert page.locator(".cm-gutters .cm-lineNumbers").count() == 1  # a real CodeMirror, line numbers on

    _set_code(page, GOOD)
    page.fill("#id_entrypoint", "has_answer")
    page.click("button:text('Save as a new version')")
    page.wait_for_selector("text=Saved version 2.")
    rf = RewardFunction.objects.get(owner=owner, name="has-answer")
    assert rf.latest_version.source == GOOD

    # the dataset's first rows are "What is a + b?" with their answers; this completion holds one of them
    first_answer = _first_answer(dataset_version)
    page.fill("#test-completions", f"<think>sum</think> \\boxed{{{first_answer}}}\n---\nno idea")
    page.fill("[name=rows]", "4")
    page.click("#test-button")
    page.wait_for_selector(".test-table", timeout=60_000)
    scores = page.locator(".test-table .score").all_inner_texts()
    assert scores == ["1.000", "0.000", "0.000", "0.000"]
    assert "scoring 4" in page.inner_text(".test-stdout")
    save_picture(page, "reward-editor")

    # unsaved: the Test button runs what the editor holds. The as-you-type lint answers first, as on a loaded machine
    # where the Test's result comes seconds later: the Test's error must still be marked
    with page.expect_response(lambda response: response.url.endswith("/lint/")):
        _set_code(page, BAD)
    page.click("#test-button")
    page.wait_for_selector(".test-error", timeout=60_000)
    error = page.inner_text(".test-error")
    assert "ZeroDivisionError" in error and "line 4" in error
    assert rf.versions.count() == 2
    # the failing line is marked in the editor's gutter, with the error
    page.wait_for_selector(".cm-gutter-lint .cm-lint-marker-error", timeout=10_000)
    marked = page.evaluate("""() => {
      const view = GrpoEditor.EditorView.findFromDOM(document.querySelector('[data-testid=code-editor] .cm-editor'));
      const marker = document.querySelector('.cm-gutter-lint .cm-lint-marker-error').closest('.cm-gutterElement');
      return view.state.doc.lineAt(view.lineBlockAtHeight(marker.offsetTop).from).number;
    }""")
    assert marked == 4


def test_the_editor_lints_as_you_type(web_server, owner, page):
    log_in(page, web_server)
    rf = RewardFunction.objects.filter(owner=owner).first()
    page.goto(f"{web_server}/rewards/{rf.pk}/")
    page.wait_for_selector("[data-testid=code-editor] .cm-content")
    _set_code(
        page,
        "import os\n\ndef %s(completions, **kwargs):\n    return [scor(c) for c in completions]\n"
        % rf.latest_version.entrypoint,
    )
    page.wait_for_selector(".cm-gutter-lint .cm-lint-marker-error", timeout=10_000)  # without Save or Test
    assert page.locator(".cm-gutter-lint .cm-lint-marker-warning").count() == 1  # the unused import
    page.hover(".cm-lintRange-error")
    page.wait_for_selector(".cm-tooltip-lint")
    assert "undefined name 'scor'" in page.inner_text(".cm-tooltip-lint")
    _set_code(page, rf.latest_version.source)
    page.wait_for_selector(".cm-gutter-lint .cm-lint-marker-error", state="detached", timeout=10_000)


def test_the_editor_highlights_python(web_server, owner, page):
    log_in(page, web_server)
    rf = RewardFunction.objects.filter(owner=owner).first()
    page.goto(f"{web_server}/rewards/{rf.pk}/")
    page.wait_for_selector("[data-testid=code-editor] .cm-content")
    _set_code(page, 'def f(completions, **kwargs):\n    # a comment\n    return [len("x") for c in completions]\n')
    colours = page.evaluate("""() => {
      const colour = (text) => {
        const span = [...document.querySelectorAll('.cm-content span')].find((s) => s.textContent === text);
        return span ? getComputedStyle(span).color : null;
      };
      return {plain: getComputedStyle(document.querySelector('.cm-line')).color,
              keyword: colour('def'), comment: colour('# a comment'), string: colour('"x"')};
    }""")
    # keywords, comments and strings each in a colour of their own, none in the plain text's
    assert None not in colours.values(), colours
    assert len({colours["plain"], colours["keyword"], colours["comment"], colours["string"]}) == 4, colours


def _first_answer(version):
    from runs.datasets.mapping import Mapping, preview_rows

    return preview_rows(version.path, Mapping.of(version), 1)[0]["rewards"]["answer"]
