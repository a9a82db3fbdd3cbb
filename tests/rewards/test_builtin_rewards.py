"""Table tests for the built-in reward library, called in-process exactly as TRL calls them."""

import pytest

from rewards.library import NAMES, function, source
from rewards.library.accuracy import last_boxed

accuracy, think_format, length_penalty = function("accuracy"), function("think_format"), function("length_penalty")
letter_count, language_consistency, digit_ratio = (
    function("letter_count"),
    function("language_consistency"),
    function("digit_ratio"),
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<think>3 + 4 = 7</think> The answer is \\boxed{7}", 1.0),
        ("  <think>\nwait\n</think>\\boxed{x^{2}}", 1.0),
        ("\\boxed{7}", 0.0),
        ("<think>no answer</think>", 0.0),
        ("answer <think>late</think> \\boxed{7}", 0.0),
    ],
)
def test_think_format(text, expected):
    assert think_format([text]) == [expected]


@pytest.mark.parametrize(
    "text, answer, expected",
    [
        ("<think>x</think> \\boxed{7}", "7", 1.0),
        ("\\boxed{\\frac{1}{2}}", "0.5", 1.0),
        ("\\boxed{0.5}", "1/2", 1.0),
        ("\\boxed{7.0}", "7", 1.0),
        ("\\boxed{8}", "7", 0.0),
        ("no box", "7", 0.0),
        ("\\boxed{}", "7", 0.0),
        ("\\boxed{7}", "", None),
    ],
)
def test_accuracy_against_the_answer_column(text, answer, expected):
    assert accuracy([text], answer=[answer]) == [expected]


def test_accuracy_reads_conversational_completions():
    completion = [{"role": "assistant", "content": "<think>.</think>\\boxed{12}"}]
    assert accuracy([completion], answer=["12"]) == [1.0]


@pytest.mark.parametrize("length, expected", [(0, 0.0), (400, 0.0), (600, -0.5), (800, -1.0), (5000, -1.0)])
def test_length_penalty(length, expected):
    assert length_penalty(["x" * length]) == [pytest.approx(expected)]


@pytest.mark.parametrize(
    "text, word, letter, expected",
    [
        ("There are 3 r's. \\boxed{3}", "strawberry", "r", 1.0),
        ("I count 2", "strawberry", "r", 0.0),
        ("s-t-r-a-w: 1, then e-r-r-y: 3 in total", "strawberry", "r", 1.0),
        ("\\boxed{2} (wait, I said 3)", "banana", "n", 1.0),
        ("no number", "banana", "a", 0.0),
    ],
)
def test_letter_count(text, word, letter, expected):
    assert letter_count([text], word=[word], letter=[letter]) == [expected]


@pytest.mark.parametrize(
    "text, language, expected",
    [
        ("Let me think", "latin", 1.0),
        ("Давайте подумаем", "cyrillic", 1.0),
        ("Let подумаем", "latin", pytest.approx(3 / 11)),
        ("12345", "latin", 0.0),
    ],
)
def test_language_consistency(text, language, expected):
    assert language_consistency([text], language=[language]) == [expected]


@pytest.mark.parametrize("text, expected", [("1234", 1.0), ("12ab", 0.5), ("abcd", 0.0), ("", 0.0), ("1 2 a b", 0.5)])
def test_digit_ratio(text, expected):
    assert digit_ratio([text]) == [expected]


def test_last_boxed_balances_braces():
    assert last_boxed("first \\boxed{1} then \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert last_boxed("\\boxed{unclosed") is None


@pytest.mark.parametrize("name", NAMES)
def test_each_template_is_self_contained_source_defining_its_function(name):
    namespace: dict = {}
    exec(compile(source(name), f"<{name}>", "exec"), namespace)
    assert callable(namespace[name])


@pytest.mark.parametrize(
    "expected, boxed",
    [
        ("12", "12"),
        ("12", "012"),
        ("-3", "-3"),
        ("7", "8"),
        (" 5", "5"),
        ("0", "-0"),
        ("123456789012", "123456789012"),
        ("-4", "4"),
    ],
)
def test_accuracys_integer_shortcut_gives_math_verifys_verdict(expected, boxed):
    from math_verify import parse, verify

    gold, guess = parse(f"${expected}$"), parse(f"${boxed}$")
    assert accuracy([f"\\boxed{{{boxed}}}"], answer=[expected]) == [
        1.0 if gold and guess and verify(gold, guess) else 0.0
    ]


FRACTIONS = ["3/4", "\\frac{3}{4}", "\\dfrac{6}{8}", " 3 / 4 ", "-3/4", "-\\frac{3}{4}", "\\frac{-3}{4}", "012/3", "4",
             "4/1", "0/5", "0", "1/0", "--3/4", "3/-4", "\\frac{4}{3}", "123456789012345678901/3", "0.75"]  # fmt: skip


@pytest.mark.parametrize("expected", FRACTIONS)
def test_accuracys_fraction_shortcut_gives_math_verifys_verdict(expected):
    """Integers and fractions of two (a/b, \\frac{a}{b}) are compared exactly, without math-verify's parser; every
    pair of these gets math-verify's own verdict, the ones the shortcut leaves to it (1/0, --3/4, 3/-4, 0.75) too."""
    from math_verify import parse, verify

    from rewards.library.accuracy import judged, rational

    assert rational("\\frac{6}{8}") == rational("3/4") == rational(" 3 / 4 ") is not None  # the shortcut is taken
    gold = parse(f"${expected}$")
    for boxed in FRACTIONS:
        guess = parse(f"${boxed}$")
        verdict = 1.0 if gold and guess and verify(gold, guess) else 0.0
        assert judged(expected, boxed) == verdict, (expected, boxed)
        assert accuracy([f"\\boxed{{{boxed}}}"], answer=[expected]) == [verdict]


@pytest.mark.parametrize("boxed", ["\x1f9", "9\x1c", "\u0669", "\u00a09"])
def test_accuracy_judges_digits_and_spaces_int_would_refuse_without_raising(boxed):
    # the model's text, not ours: a unit separator or an Arabic-Indic digit is a score, never a crash
    assert accuracy([f"\\boxed{{{boxed}}}"], answer=["9"])[0] in (0.0, 1.0)
