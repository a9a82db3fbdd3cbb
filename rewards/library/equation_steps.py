import re

# "12 + 7 = 19", "3*4=12", "20 - 5 = 15", "8 / 2 = 4": a binary operation and its claimed result, on one line
EQUATION = re.compile(r"(-?\d+(?:\.\d+)?)\s*([-+*/×x÷])\s*(-?\d+(?:\.\d+)?)\s*=\s*(-?\d+(?:\.\d+)?)")
SPLIT = "\n"  # a reasoning step is a line


def check_line(line):
    """1.0 when every equation on the line is right, 0.0 when one is wrong, None when it holds no equation."""
    found = EQUATION.findall(line)
    if not found:
        return None
    for a, op, b, claimed in found:
        a, b, claimed = float(a), float(b), float(claimed)
        if op in "+":
            value = a + b
        elif op == "-":
            value = a - b
        elif op in "*×x":
            value = a * b
        else:
            if b == 0:
                return 0.0
            value = a / b
        if abs(value - claimed) > 1e-6 * max(1.0, abs(value)):
            return 0.0
    return 1.0


def equation_steps(completions, log_extra=None, **kwargs):
    """A process reward: each line (a reasoning step) holding an equation such as `12 + 7 = 19` is checked; the
    reward is the share of checked lines that are right (0.0 when no line holds one). Each step's score (None for a
    line with no equation) is logged through TRL's `log_extra` as `step_scores`, with the delimiter the steps were
    split by, so the transcript can shade each step."""
    rewards, logged = [], []
    for completion in completions:
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        scores = [check_line(line) for line in text.split(SPLIT)]
        checked = [s for s in scores if s is not None]
        rewards.append(sum(checked) / len(checked) if checked else 0.0)
        logged.append({"split": SPLIT, "scores": scores})
    if log_extra is not None:
        log_extra("step_scores", logged)
    return rewards
