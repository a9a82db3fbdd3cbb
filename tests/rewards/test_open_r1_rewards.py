"""open-r1's reward registry under its own names (format, tag_count, reasoning_steps, cosine, repetition_penalty,
length; accuracy reads open-r1's `solution` column): each gives open-r1's own results on the cases of open-r1's test
suite (tests/test_rewards.py in huggingface/open-r1), with completions as open-r1 passes them (chat messages)."""

import pytest

from rewards.builtins import BUILTINS
from rewards.library import function


def chat(*texts):
    return [[{"role": "assistant", "content": t}] for t in texts]


def test_accuracy_reads_open_r1s_solution_column():
    scores = BUILTINS["accuracy"](
        chat(r"\boxed{\frac{63}{400}}", r"\boxed{\frac{64}{400}}", r"\boxed{3}"),
        solution=[r"\frac{63}{400}", r"\frac{63}{400}", "6"],
    )
    assert scores == [1.0, 0.0, 0.0]
    # the answer column still wins where a dataset has both
    assert BUILTINS["accuracy"](chat(r"\boxed{4}"), answer=["4"], solution=["5"]) == [1.0]
    assert BUILTINS["accuracy"](chat(r"\boxed{4}"), solution=["no answer here at all"]) == [None]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<think>\nSome reasoning\n</think>\n<answer>\nThe answer\n</answer>", 1.0),
        (
            "<think>\nI will count each distinct object in the image:\n1. Purple scooter\n2. Red bicycle\n\nThere are 2.\n"
            "</think>\n<answer>\n9\n</answer>",
            1.0,
        ),
        ("<think>Only thinking</think>", 0.0),
        ("<answer>Only answer</answer>", 0.0),
        ("No tags at all", 0.0),
        ("<think>Missing closing</think><answer>Missing closing", 0.0),
        ("<think>Wrong order</answer><answer>Wrong order</think>", 0.0),
    ],
)
def test_format(text, expected):
    assert BUILTINS["format"](chat(text)) == [expected]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<think>\nSome reasoning\n</think>\n<answer>\nThe answer\n</answer>", 1.0),
        ("Some reasoning\n</think>\n<answer>\nThe answer\n</answer>", 0.75),
        ("<think>\nSome reasoning\n<answer>\nThe answer\n</answer>", 0.75),
        ("<think>\nSome reasoning\n</think>\nThe answer\n</answer>", 0.75),
        ("<think>\nSome reasoning\n</think>\n<answer>\nThe answer", 0.75),
        ("Some reasoning\nThe answer", 0.0),
    ],
)
def test_tag_count(text, expected):
    assert BUILTINS["tag_count"](chat(text)) == [expected]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Step 1: First step\nStep 2: Second step\nStep 3: Third step", 1.0),
        ("First, we do this.\nSecond, we do that.\nFinally, we conclude.", 1.0),
        ("Step 1: Only step", 1 / 3),
        ("First, we do this.\nFinally, we conclude.", 2 / 3),
        ("Just plain text without any clear steps", 0.0),
    ],
)
def test_reasoning_steps(text, expected):
    assert BUILTINS["reasoning_steps"](chat(text)) == [pytest.approx(expected)]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("this is a test sentence", 0.0),
        ("this this this this this", -(1 - 1 / 3)),  # one distinct trigram of three
        ("", 0.0),
        ("word", 0.0),
        ("two words", 0.0),
        ("three word completion", 0.0),
        ("this is a test this is a test", -(1 - 4 / 6)),  # four distinct trigrams of six
    ],
)
def test_repetition_penalty(text, expected):
    assert BUILTINS["repetition_penalty"](chat(text)) == [pytest.approx(expected)]


def test_cosine_scales_correctness_by_length(monkeypatch):
    module = function("cosine").__globals__
    # open-r1's test parameters
    for name, value in {
        "MIN_VALUE_WRONG": -1.0,
        "MAX_VALUE_WRONG": -0.5,
        "MIN_VALUE_CORRECT": 0.5,
        "MAX_VALUE_CORRECT": 1.0,
        "MAX_LEN": 100,
    }.items():
        monkeypatch.setitem(module, name, value)
    cases = [
        (r"\boxed{\frac{63}{400}}", 20, 0.943),
        (r"\boxed{\frac{63}{400}}", 80, 0.547),
        (r"\boxed{\frac{64}{400}}", 20, -0.942),
        (r"\boxed{\frac{64}{400}}", 80, -0.547),
    ]
    for content, length, expected in cases:
        padded = content + " " * (length - len(content))
        assert BUILTINS["cosine"](chat(padded), solution=[r"\frac{63}{400}"]) == [pytest.approx(expected, abs=5e-3)]


def test_length_is_kimi_1_5s_reward_within_the_batch():
    right, right_long = r"\boxed{\frac{63}{400}}", r"\boxed{\frac{63}{400}}  " + "x" * 10
    wrong, wrong_long = r"\boxed{\frac{64}{400}}", r"\boxed{\frac{64}{400}}  " + "x" * 10
    gold = [r"\frac{63}{400}"] * 4
    assert BUILTINS["length"](chat(right, wrong), solution=gold[:2]) == [0.0, 0.0]  # same length
    a, b, c, d = BUILTINS["length"](chat(right, right_long, wrong, wrong_long), solution=gold)
    assert a == pytest.approx(0.5) and a > b and c > b >= d and c <= 0 and d <= 0
    # an unparseable gold answer counts as correct, as in open-r1
    e, f = BUILTINS["length"](
        chat(r"\boxed{answer}", r"\boxed{answer} " + "x" * 10), solution=["unparseable_latex"] * 2
    )
    assert e == pytest.approx(0.5) and e > f
