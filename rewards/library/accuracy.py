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


def accuracy(completions, answer=None, solution=None, **kwargs):
    """1.0 when the last \\boxed{} answer equals the row's gold answer as math-verify judges it (1/2, 0.5 and
    \\frac{1}{2} agree), else 0.0. The gold answer is the `answer` column, or else the `solution` column (open-r1's
    datasets: a worked solution whose answer math-verify finds, boxed or not). None (abstain) for a row without one,
    or whose gold answer cannot be parsed: a reward that cannot judge should not score."""
    golds = answer if answer is not None else solution if solution is not None else [None] * len(completions)
    from_solution = answer is None
    rewards = []
    for completion, expected in zip(completions, golds):
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        if expected is None or not str(expected).strip():
            rewards.append(None)
            continue
        gold = parse(str(expected)) if from_solution else parse(f"${expected}$")
        if not gold:
            rewards.append(None)
            continue
        boxed = last_boxed(text)
        if boxed is None or not boxed.strip():
            rewards.append(0.0)
            continue
        guess = parse(f"${boxed}$")
        rewards.append(1.0 if guess and verify(gold, guess) else 0.0)
    return rewards
