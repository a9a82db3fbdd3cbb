"""The built-ins that carry open-r1's and Oumi's registry names (their published recipes name them) give what the
source's own function gives, on a battery of completions. The source functions are verbatim copies in
tests/rewards/sources/ (repository and commit on their first line): CI has no network to load them from."""

import pytest

from rewards.builtins import BUILTINS
from tests.rewards.sources import open_r1_rewards, oumi_rewards

TEXTS = [
    "<think>\nSome reasoning\n</think>\n<answer>\nThe answer\n</answer>",
    "<think>\nLet me see.\nStep 1: add.\nStep 2: check.\n</think>\n<answer>\n$\\frac{63}{400}$\n</answer>",
    "The answer is \\boxed{\\frac{63}{400}}",
    "So it is $0.1575$.",
    "First, 6. Next, 7. Finally, \\boxed{6}",
    "1. one\n2. two\n- three\n* four \\boxed{6} and \\boxed{7}",
    "Some reasoning\n</think>\n<answer>\nThe answer",
    "",
    "\\boxed{3}",
    "\\boxed{-3} letters",
    "I count \\boxed{+2}, no, \\boxed{3}",
    "word " * 19 + "word",
    "no latex at all, 42",
]
SOLUTIONS = ["$\\frac{63}{400}$", "\\frac{63}{400}", "6", "The answer is $\\boxed{3}$.", "no answer here at all", ""]


def chat(texts):
    return [[{"role": "assistant", "content": t}] for t in texts]


@pytest.mark.parametrize(
    "ours, theirs",
    [
        ("format", open_r1_rewards.format_reward),
        ("tag_count", open_r1_rewards.tag_count_reward),
        ("reasoning_steps", open_r1_rewards.reasoning_steps_reward),
    ],
)
def test_open_r1s_format_rewards_agree_with_open_r1(ours, theirs):
    assert BUILTINS[ours](chat(TEXTS)) == theirs(chat(TEXTS))


def test_accuracy_on_open_r1s_solution_column_agrees_with_open_r1():
    completions = [t for t in TEXTS for _ in SOLUTIONS]
    solutions = [s for _ in TEXTS for s in SOLUTIONS]
    theirs = open_r1_rewards.accuracy_reward(chat(completions), solutions)
    assert BUILTINS["accuracy"](chat(completions), solution=solutions) == theirs
    assert theirs.count(1.0) >= 4 and None in theirs  # the battery reaches right, wrong and abstained answers


@pytest.mark.parametrize("target", [0, 2, 3, 6])
def test_oumis_count_letters_agrees_with_oumi(target):
    theirs = oumi_rewards._count_letters(chat(TEXTS), [target] * len(TEXTS))
    assert BUILTINS["count_letters"](chat(TEXTS), letter_count=[target] * len(TEXTS)) == theirs
    assert BUILTINS["count_letters"](TEXTS, letter_count=[target] * len(TEXTS)) == theirs  # standard datasets too


def test_oumis_soft_20tokens_completions_agrees_with_oumi():
    assert BUILTINS["soft_20tokens_completions"](TEXTS) == oumi_rewards._soft_20tokens_completions(TEXTS)
    assert max(oumi_rewards._soft_20tokens_completions(TEXTS)) == 1.0  # the 20-word text: the battery reaches the top
