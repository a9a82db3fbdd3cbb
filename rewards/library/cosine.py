import math

from math_verify import parse, verify

# open-r1's defaults (its cosine_* script arguments)
MIN_VALUE_WRONG = 0.0
MAX_VALUE_WRONG = -0.5
MIN_VALUE_CORRECT = 0.5
MAX_VALUE_CORRECT = 1.0
MAX_LEN = 1000  # characters


def cosine(completions, solution=None, answer=None, **kwargs):
    """Length-scaled correctness on a cosine schedule (Yeo et al. 2025; open-r1's cosine_scaled_reward): a short
    correct completion earns up to MAX_VALUE_CORRECT, a long one MIN_VALUE_CORRECT; a wrong one is penalised less the
    longer it is. The gold answer is the row's `solution` (open-r1's datasets) or `answer` column; a row whose gold
    answer cannot be parsed gets 1.0, as in open-r1."""
    golds = solution if solution is not None else answer if answer is not None else [None] * len(completions)
    rewards = []
    for completion, gold_text in zip(completions, golds):
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        gold = parse(str(gold_text)) if gold_text is not None else []
        if not gold:
            rewards.append(1.0)
            continue
        correct = bool(verify(gold, parse(text)))
        progress = math.cos(len(text) / MAX_LEN * math.pi)
        low, high = (MIN_VALUE_CORRECT, MAX_VALUE_CORRECT) if correct else (MAX_VALUE_WRONG, MIN_VALUE_WRONG)
        rewards.append(float(low + 0.5 * (high - low) * (1.0 + progress)))
    return rewards
