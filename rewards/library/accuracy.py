import re
from functools import lru_cache

from math_verify import parse, verify


def last_boxed(text):
    """Content of the last \\boxed{...}, braces balanced; None if there is none."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed{")
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            if depth == 0:
                return text[i:j]
            depth -= 1
    return None


@lru_cache(maxsize=65536)
def parsed(text):
    """math-verify's reading of ``$text$``; remembered, since a group shares its gold answer and its completions often
    box the same one, and parsing is most of the cost."""
    return parse(f"${text}$")


# ASCII digits and spaces only: str's \s and \d also match characters int() refuses ("\x1f9"), which would raise
INTEGER = re.compile(r"[ \t\n\r]*-?[0-9]{1,30}[ \t\n\r]*")


@lru_cache(maxsize=65536)
def judged(expected, boxed):
    """math-verify's verdict on one (gold, boxed) pair of strings, remembered likewise. Two plain integers are
    compared as integers, which is math-verify's verdict too, without its LaTeX parser (most of the cost)."""
    if INTEGER.fullmatch(expected) and INTEGER.fullmatch(boxed):
        return 1.0 if int(expected) == int(boxed) else 0.0
    gold, guess = parsed(expected), parsed(boxed)
    return 1.0 if gold and guess and verify(gold, guess) else 0.0


@lru_cache(maxsize=4096)
def parsed_solution(text):
    """math-verify's reading of a worked solution (open-r1's `solution` column): it finds the answer, boxed or not."""
    return parse(text)


def accuracy(completions, answer=None, solution=None, **kwargs):
    """1.0 when the last \\boxed{} answer equals the row's gold answer as math-verify judges it (1/2, 0.5 and
    \\frac{1}{2} agree), else 0.0. The gold answer is the `answer` column, or else the `solution` column (open-r1's
    datasets: a worked solution whose answer math-verify finds; one it cannot read abstains, None, as in open-r1).
    None (abstain) for a row without a gold answer."""
    golds = answer if answer is not None else solution if solution is not None else [None] * len(completions)
    from_solution = answer is None
    rewards = []
    for completion, expected in zip(completions, golds):
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        if expected is None or not str(expected).strip():
            rewards.append(None)
            continue
        gold = parsed_solution(str(expected)) if from_solution else None
        if from_solution and not gold:
            rewards.append(None)
            continue
        boxed = last_boxed(text)
        if boxed is None or not boxed.strip():
            rewards.append(0.0)
            continue
        if from_solution:
            guess = parsed(boxed)
            rewards.append(1.0 if guess and verify(gold, guess) else 0.0)
        else:
            rewards.append(judged(str(expected), boxed))
    return rewards
