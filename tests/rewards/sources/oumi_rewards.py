# oumi-ai/oumi @ d8ed07778d7931565798ad45a859cafb54d4fc58, src/oumi/datasets/grpo/rewards/count_letters_rewards.py and
# completion_length_rewards.py: these functions verbatim (Apache-2.0, Oumi), less Oumi's @register decorators.
import math
import re
from typing import Any



def _extract_prediction(response: str) -> int | None:
    r"""Returns the numeric answer extracted from `\boxed{...}`, or None otherwise."""
    regex_result = re.findall(r"\\boxed\{([-+]?\d+)\}", response)
    if not regex_result or len(regex_result) != 1:
        return None
    number_str = regex_result[0]
    # Except clause shouldn't trigger because the regex should only find ints.
    try:
        return int(number_str)
    except ValueError:
        return None


def compute_letter_count_reward(completion: str, target_count: int) -> float:
    """Computes the rewards for counting the letters in a string.

    Args:
        completion: The completion string from the LLM.
        target_count: The target count of letters.

    Returns:
        The reward value.
    """
    count = _extract_prediction(completion)

    # Lowest reward goes to unparseable responses
    if count is None:
        return -3.0

    delta = abs(count - target_count)

    # Reward scales from [0, -2) as delta increases
    # Ensures that "worse" answers (where the counts are off by a higher amount) are
    # penalized while never reaching -3.0 which is reserved for unparseable answers.
    return (1 / (delta + 0.5)) - 2


def _count_letters(
    completions: list[list[dict[str, Any]]],
    letter_count: list[int],
    **kwargs: dict[str, Any],
) -> list[float]:
    """Custom reward function for counting letters in a string.

    For more details on custom reward functions used in trl's GRPOTrainer, see:
    https://huggingface.co/docs/trl/main/en/grpo_trainer#using-a-custom-reward-function.

    Args:
        completions: The list of completions from the LLM.
        letter_count: The list of target count of letters.
        kwargs: Unused.

    Returns:
        The reward values for each completion, calculated as the negative of the
        absolute difference between the count and the target count. The count is assumed
        to be the last group of consecutive digits in the completion string.
    """
    completions_strs = [c[0]["content"] for c in completions]
    return [
        compute_letter_count_reward(c, t)
        for c, t in zip(completions_strs, letter_count)
    ]



def _whitespace_tokenize(s: str) -> list[str]:
    return re.split(r"\s+", s)


def compute_soft_target_token_length_reward(num_tokens: int, *, target_tokens: int):
    """Returns maximum reward for inputs that are `target_tokens` long.

    The reward is in the [0,1] range and reduces smoothly from the maximum value of 1.0
    if the actual number of tokens deviates from `target_tokens`.

    The reward is proportional to: `x*exp(-x)` where `x := num_tokens/target_tokens`.
    """
    x = num_tokens / target_tokens
    return x * math.exp(-x) * math.e


def _compute_completion_soft_target_token_length_reward(
    completions: list[str], *, target_tokens: int
):
    return [
        compute_soft_target_token_length_reward(
            len(_whitespace_tokenize(content)), target_tokens=target_tokens
        )
        for content in completions
    ]


def compute_sharp_target_token_length_reward(num_tokens: int, *, target_tokens: int):
    """Returns maximum reward for inputs that are `target_tokens` long.

    The reward reduces sharply if the actual number of tokens deviates
    from `target_tokens`.

    The reward is computed as: `-|num_tokens - target_tokens|`, which penalizes
    token counts not equal to `target_tokens`.
    """
    return -abs(num_tokens - target_tokens)


def _compute_completion_sharp_target_token_length_reward(
    completions: list[str], *, target_tokens: int
):
    return [
        compute_sharp_target_token_length_reward(
            len(_whitespace_tokenize(content)), target_tokens=target_tokens
        )
        for content in completions
    ]


# Simple toy length-based reward functions for experimentation and demonstration
# purposes. In practice, most users are expected to define and  use custom reward
# functions, not these.
# For more details on custom reward functions used in trl's GRPOTrainer, see:
# https://huggingface.co/docs/trl/main/en/grpo_trainer#using-a-custom-reward-function.


def _soft_5tokens_completions(completions: list[str], **kwargs):
    return _compute_completion_soft_target_token_length_reward(
        completions, target_tokens=5
    )


def _soft_10tokens_completions(completions: list[str], **kwargs):
    return _compute_completion_soft_target_token_length_reward(
        completions, target_tokens=10
    )


def _soft_20tokens_completions(completions: list[str], **kwargs):
    return _compute_completion_soft_target_token_length_reward(
        completions, target_tokens=20
    )


def _sharp_5tokens_completions(completions: list[str], **kwargs):
    return _compute_completion_sharp_target_token_length_reward(
        completions, target_tokens=5
    )


def _sharp_10tokens_completions(completions: list[str], **kwargs):
    return _compute_completion_sharp_target_token_length_reward(
        completions, target_tokens=10
    )


def _sharp_20tokens_completions(completions: list[str], **kwargs):
    return _compute_completion_sharp_target_token_length_reward(
        completions, target_tokens=20
    )
