import re
from fractions import Fraction
from functools import lru_cache

from latex2sympy2_extended import NormalizationConfig
from math_verify import LatexExtractionConfig, parse, verify


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


# ASCII digits and spaces only: str's \s and \d also match characters int() refuses ("\x1f9"), which would raise.
# An integer, or a fraction of two: 3/4 or \frac{3}{4} (\dfrac, \tfrac), a minus before it or its numerator.
SPACE, DIGITS = r"[ \t\n\r]*", r"-?[0-9]{1,30}"
RATIONAL = re.compile(
    rf"{SPACE}(?P<sign>-?)(?:(?P<n>{DIGITS}){SPACE}/{SPACE}(?P<d>[0-9]{{1,30}})"
    rf"|\\[dt]?frac\{{(?P<fn>{DIGITS})\}}\{{(?P<fd>[0-9]{{1,30}})\}}|(?P<i>[0-9]{{1,30}})){SPACE}"
)


def rational(text):
    """``text`` as an exact Fraction when it is an integer or a fraction of two with a denominator that is not 0;
    else None. math-verify reads these as sympy's Integer and Rational, which it compares exactly."""
    m = RATIONAL.fullmatch(text)
    if not m:
        return None
    if m["i"] is not None:
        value = Fraction(int(m["i"]))
    else:
        numerator, denominator = (m["n"], m["d"]) if m["n"] is not None else (m["fn"], m["fd"])
        if int(denominator) == 0 or (m["sign"] and numerator.startswith("-")):
            return None  # 1/0 (sympy's zoo) and --3/4: math-verify's to judge
        value = Fraction(int(numerator), int(denominator))
    return -value if m["sign"] else value


@lru_cache(maxsize=65536)
def judged(expected, boxed):
    """math-verify's verdict on one (gold, boxed) pair of strings, remembered likewise. Two integers, or fractions
    of integers (3/4, \\frac{6}{8}), are compared as exact fractions, which is math-verify's verdict too (it reads
    them as sympy's Integer and Rational), without its LaTeX parser (most of the cost: about 6 ms a string)."""
    gold, guess = rational(expected), rational(boxed)
    if gold is not None and guess is not None:
        return 1.0 if gold == guess else 0.0
    gold, guess = parsed(expected), parsed(boxed)
    return 1.0 if gold and guess and verify(gold, guess) else 0.0


@lru_cache(maxsize=4096)
def parsed_solution(text):
    """math-verify's reading of a worked solution (open-r1's `solution` column): its first answer, boxed or not."""
    return parse(text, extraction_mode="first_match")


# open-r1's reading of a completion against a `solution`: correct LaTeX, \boxed{} tried first, then other LaTeX
OPEN_R1_ANSWER = [
    LatexExtractionConfig(
        normalization_config=NormalizationConfig(
            nits=False, malformed_operators=False, basic_latex=True, equations=True, boxed="all", units=True
        ),
        boxed_match_priority=0,
        try_extract_without_anchor=False,
    )
]


def open_r1_verdict(gold, text):
    """open-r1's accuracy_reward on one completion: 1.0 or 0.0 as math-verify judges its answer; None (abstain)
    when verify raises."""
    answer = parse(text, extraction_config=OPEN_R1_ANSWER, extraction_mode="first_match")
    try:
        return float(verify(gold, answer))
    except Exception:
        return None


def accuracy(completions, answer=None, solution=None, **kwargs):
    """1.0 when the last \\boxed{} answer equals the row's gold answer as math-verify judges it (1/2, 0.5 and
    \\frac{1}{2} agree), else 0.0. The gold answer is the `answer` column, or else the `solution` column: then it is
    open-r1's accuracy reward (the completion's answer is its LaTeX, boxed or not, as open-r1 reads it; a solution
    math-verify cannot read abstains, None).
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
        if from_solution:
            rewards.append(open_r1_verdict(gold, text))
            continue
        boxed = last_boxed(text)
        if boxed is None or not boxed.strip():
            rewards.append(0.0)
            continue
        rewards.append(judged(str(expected), boxed))
    return rewards
