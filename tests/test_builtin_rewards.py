import pytest

from rewards.builtins import accuracy, digit_ratio, extract_boxed, think_format


@pytest.mark.parametrize("text, expected", [
    ("<think>3 + 4 = 7</think> The answer is \\boxed{7}", 1.0),
    ("  <think>\nwait\n</think>\\boxed{x^{2}}", 1.0),
    ("\\boxed{7}", 0.0),
    ("<think>no answer</think>", 0.0),
    ("answer <think>late</think> \\boxed{7}", 0.0),
])
def test_think_format(text, expected):
    assert think_format([text]) == [expected]


@pytest.mark.parametrize("text, answer, expected", [
    ("<think>x</think> \\boxed{7}", "7", 1.0),
    ("\\boxed{1,000}", "1000", 1.0),
    ("\\boxed{7.0}", "7", 1.0),
    ("\\boxed{8}", "7", 0.0),
    ("no box", "7", 0.0),
    ("\\boxed{7}", "", None),
])
def test_accuracy_against_the_answer_column(text, answer, expected):
    assert accuracy([text], answer=[answer]) == [expected]


def test_accuracy_reads_conversational_completions():
    completion = [{"role": "assistant", "content": "<think>.</think>\\boxed{12}"}]
    assert accuracy([completion], answer=["12"]) == [1.0]


@pytest.mark.parametrize("text, expected", [("1234", 1.0), ("12ab", 0.5), ("abcd", 0.0), ("", 0.0), ("1 2 a b", 0.5)])
def test_digit_ratio(text, expected):
    assert digit_ratio([text]) == [expected]


def test_extract_boxed_balances_braces():
    assert extract_boxed("first \\boxed{1} then \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert extract_boxed("\\boxed{unclosed") is None
