"""Reward-hacking detectors: signs that the training reward rises while the task is not being learned. Each reads
TRL's logged metrics or the stored rollouts, compares them with a threshold the run may change
(``Run.detector_thresholds`` over ``DEFAULTS``), and, when it fires, links to example rollouts in the rollout browser
through the browser's own URL filters, so the evidence is one click away.

The detectors of text are in ``detectors_text``, what they all share in ``detector_kit`` (ThresholdsForm and
answer_key importable from here, as before). They join the run's health signals
(``runs.rollouts.inspection.run_health``): same shape, key ``detector/<name>``.
"""

from __future__ import annotations

import math
import statistics

from django.db.models import Avg, Count, Max, Q

from runs.models import Rollout, Run
from runs.rollouts.detector_kit import (
    EXAMPLES,
    FLAT_GAIN,
    ThresholdsForm,  # noqa: F401 - importable from here, as before
    browse_url,
    first_steps,
    make_signal,
    series_points,
    thresholds,
)
from runs.rollouts.detectors_text import (
    answer_key,  # noqa: F401 - importable from here, as before
    group_diversity,
    prompt_blind_answers,
    recent_texts,
    repetition,
)
from runs.rollouts.selectors import rollout_steps

# --- the detectors -----------------------------------------------------------------------------------------------


def _contributions(run: Run, series: dict, steps: list[int]) -> tuple[dict, list[tuple[int, dict[str, float]]]]:
    """The run's reward weights, and per logged step each function's weighted contribution |weight × mean| (steps
    whose total is 0 left out)."""
    weights = {r["name"]: float(r.get("weight", 1.0)) for r in run.rewards}
    per_step: dict[int, dict[str, float]] = {}
    for name, w in weights.items():
        for s, v in series_points(series, f"rewards/{name}/mean", steps):
            per_step.setdefault(s, {})[name] = abs(w * v)
    return weights, [(s, parts) for s, parts in sorted(per_step.items()) if sum(parts.values()) > 0]


def dominance(run: Run, series: dict, steps: list[int], t: dict) -> list[dict]:
    """One reward function above ``dominance_share`` of the total in recent steps, where early on it was not: it has
    taken over (a format reward the policy satisfies while the accuracy reward stays at zero). A function that gave
    everything from the start is not a change of behaviour and stays quiet."""
    weights, rows = _contributions(run, series, steps)
    if len(weights) < 2:
        return []
    window = int(t["window"])
    if len(rows) < 2 * window:
        return []

    def shares(part):
        total = sum(sum(p.values()) for _, p in part)
        return {n: sum(p.get(n, 0.0) for _, p in part) / total for n in weights}

    early, recent = shares(first_steps(rows, window)), shares(rows[-window:])
    top = max(recent, key=recent.get)
    fired = recent[top] > t["dominance_share"] and early[top] <= t["dominance_share"]
    first = rows[-window][0]
    detail = f"{top} gives {recent[top]:.0%} of the reward over the last {window} steps ({early[top]:.0%} early on)"
    if fired:
        detail += (
            ": the policy may be satisfying that one function instead of the task; read what the top-scoring "
            "recent completions do"
        )
    return [
        make_signal(
            "dominance",
            fired,
            f"{top} dominates the reward" if fired else "Reward balance",
            detail,
            rows[-1][0],
            browse_url(run, step_min=first, sort="reward_desc"),
        )
    ]


def ceiling(run: Run, t: dict, recent_steps: list[int]) -> list[dict]:
    """More than ``ceiling_share`` of recent completions at the run's highest reward: the reward has saturated, so
    it no longer tells good completions from lucky or gamed ones."""
    if not recent_steps:
        return []
    top = Rollout.objects.filter(run=run).aggregate(m=Max("reward"))["m"]
    if top is None or top <= 0:
        return []
    floor = top - 1e-6 * max(1.0, abs(top))
    agg = Rollout.objects.filter(run=run, step__in=recent_steps, reward__isnull=False).aggregate(
        n=Count("id"), at=Count("id", filter=Q(reward__gte=floor))
    )
    if not agg["n"]:
        return []
    share = agg["at"] / agg["n"]
    fired = share > t["ceiling_share"]
    detail = f"{share:.0%} of the last {len(recent_steps)} steps' completions score the run's highest reward {top:.4g}"
    if fired:
        detail += ": the reward has saturated; check that they earn it (a loophole scores as well as a solution)"
    return [
        make_signal(
            "ceiling",
            fired,
            "Reward at its ceiling" if fired else "Reward ceiling",
            detail,
            recent_steps[-1],
            browse_url(run, step_min=recent_steps[0], reward_min=f"{floor:.9g}"),
        )
    ]


def variance_collapse(run: Run, series: dict, steps: list[int], t: dict) -> list[dict]:
    """TRL's within-group reward std (``reward_std``) falling below ``variance_drop`` of its early level: groups stop
    differing, so advantages vanish."""
    window = int(t["window"])
    std = series_points(series, "reward_std", steps)
    if len(std) < 2 * window:
        return []
    start, now = statistics.fmean(v for _, v in first_steps(std, window)), statistics.fmean(v for _, v in std[-window:])
    if start <= 0:
        return []
    fired = now < t["variance_drop"] * start
    detail = f"within-group reward std {start:.3g} early on, {now:.3g} over the last {window} steps"
    if fired:
        detail += ": the completions of a group now score alike, so there is little left to learn from"
    return [
        make_signal(
            "variance_collapse",
            fired,
            "Reward variance collapsed" if fired else "Reward variance",
            detail,
            std[-1][0],
            browse_url(run, step_min=std[-window][0], zero_std="yes"),
        )
    ]


def length_drift(run: Run, t: dict, early_steps: list[int], recent_steps: list[int]) -> list[dict]:
    """The recent mean completion length more than ``length_z`` standard deviations (of the first steps'
    completions) from the first steps' mean: the policy has found that length pays (padding, or answers cut short)."""
    if not recent_steps or set(early_steps) & set(recent_steps):
        return []
    if not run.lengths_known:
        return [lengths_unknown(run, "length_drift", "Completion length", recent_steps)]
    lengths = list(Rollout.objects.filter(run=run, step__in=early_steps).values_list("length", flat=True))
    base_mean = statistics.fmean(lengths)
    base_std = max(statistics.pstdev(lengths), 1.0)  # lengths all equal early on: a token is the unit
    now = Rollout.objects.filter(run=run, step__in=recent_steps).aggregate(m=Avg("length"))["m"]
    z = (now - base_mean) / base_std
    fired = abs(z) > t["length_z"]
    detail = (
        f"mean completion length {base_mean:.1f} tokens over the first steps, {now:.1f} over the last "
        f"{len(recent_steps)} (z = {z:+.1f})"
    )
    if fired:
        detail += ": " + (
            "completions grow: padding or loops may be paying"
            if z > 0
            else "completions shrink: the policy may be skipping the reasoning"
        )
    bound = (
        {"len_min": math.ceil(base_mean + t["length_z"] * base_std)}
        if z > 0
        else {"len_max": max(0, math.floor(base_mean - t["length_z"] * base_std))}
    )
    return [
        make_signal(
            "length_drift",
            fired,
            "Completion length drifting" if fired else "Completion length",
            detail,
            recent_steps[-1],
            browse_url(run, step_min=recent_steps[0], **bound),
        )
    ]


def cusum_change(points: list[tuple[int, float]], h: float, k: float = 1.0, span: int = 6) -> tuple[int, int] | None:
    """Two-sided CUSUM on the step-to-step change of ``points``. Each change is compared with the median of the
    ``span`` changes before it (the local slope, so a learning curve that bends slowly is not a change) and scaled
    by a robust std of all changes (1.4826 × their median absolute deviation); slack ``k``. Fires when either sum
    passes ``h``. Returns (the step the drift began, the step it fired) or None."""
    if len(points) < 8:
        return None
    d = [(points[i][0], points[i][1] - points[i - 1][1]) for i in range(1, len(points))]
    values = [v for _, v in d]
    centre = statistics.median(values)
    scale = 1.4826 * statistics.median(abs(v - centre) for v in values)
    if scale == 0.0:  # most changes equal (a two-valued series): the median says nothing about the spread
        scale = statistics.pstdev(values)
    scale = max(scale, 1e-3 * max(1.0, max(abs(v) for _, v in points)))
    high = low = 0.0
    high_from = low_from = d[0][0]
    for i, (step, v) in enumerate(d):
        z = (v - statistics.median(values[max(0, i - span) : i] or values[:1])) / scale
        high, low = max(0.0, high + z - k), max(0.0, low - z - k)
        if high == 0.0:
            high_from = step
        if low == 0.0:
            low_from = step
        if high > h:
            return high_from, step
        if low > h:
            return low_from, step
    return None


def reward_slope(run: Run, series: dict, steps: list[int], t: dict) -> list[dict]:
    """A sudden change in how fast the mean reward moves (CUSUM over TRL's logged ``reward``): the policy found
    something in one step, a solution or a loophole."""
    reward = series_points(series, "reward", steps)
    if len(reward) < 8:
        return []
    change = cusum_change(reward, t["cusum_h"])
    if change is None:
        return [
            make_signal(
                "reward_slope",
                False,
                "Reward slope",
                f"no sudden change over {len(reward)} steps (CUSUM under {t['cusum_h']:g})",
                reward[-1][0],
            )
        ]
    began, fired_at = change
    before = dict(reward)
    detail = (
        f"the reward's step-to-step change shifted at step {began} (CUSUM passed {t['cusum_h']:g} at step "
        f"{fired_at}; reward {before.get(began, float('nan')):.3g} → {before[fired_at]:.3g}): read what the "
        f"policy started doing there"
    )
    return [
        make_signal(
            "reward_slope",
            True,
            "Sudden reward change",
            detail,
            fired_at,
            browse_url(run, step_min=began, step_max=fired_at, sort="reward_desc"),
        )
    ]


def accuracy_names(run: Run) -> list[str]:
    return [r["name"] for r in run.rewards if r.get("builtin") == "accuracy" or r["name"] == "accuracy"]


GOLD_MAX_CHARS = 200  # a longer "answer" is not checked: parsing it could take long, and no timeout guards it here


def gold_parses(answer) -> bool:
    """Whether math-verify, as the accuracy reward calls it, reads the gold answer as mathematics. What it cannot
    read it keeps as a plain string (its fallback), which only an identical string matches. No timeout: math-verify's
    own is a SIGALRM, which a web server's worker thread cannot set; answers are short (``GOLD_MAX_CHARS``)."""
    from math_verify import parse

    text = str(answer)
    if len(text) > GOLD_MAX_CHARS:
        return True
    parsed = parse(f"${text}$", parsing_timeout=None)
    return any(not isinstance(p, str) for p in parsed)


def unparsed_gold(run: Run, t: dict, steps: list[int]) -> list[dict]:
    """Gold answers the accuracy reward cannot parse: every completion of such a prompt scores 0.0 whatever it says
    (or, in a careless reward, 1.0), so the reward says nothing true about them. Read from the rows of ``steps``
    (the first and the recent ones), so a run of millions of rows costs a few steps' reads."""
    if not accuracy_names(run) or not steps:
        return []
    answers = [
        a
        for a in Rollout.objects.filter(run=run, step__in=steps)
        .order_by()
        .values_list("columns__answer", flat=True)
        .distinct()[:5000]
        if a is not None and str(a).strip()
    ]
    if not answers:
        return []
    bad = [a for a in answers if not gold_parses(a)]
    share = len(bad) / len(answers)
    fired = share > t["gold_unparsed_share"]
    detail = f"{len(bad)} of {len(answers)} gold answers are not mathematics math-verify can read"
    if bad:
        detail += " (" + ", ".join(repr(str(a))[:40] for a in bad[:3]) + (", ..." if len(bad) > 3 else "") + ")"
    if fired:
        detail += (
            ": the accuracy reward cannot judge their prompts' completions (0.0 for a right answer written "
            "another way, 1.0 for one that copies the string); fix the dataset's answer column"
        )
    ids = []
    if fired:
        match = Q()
        for a in bad[:EXAMPLES]:
            match |= Q(columns__answer=a)
        ids = list(
            Rollout.objects.filter(run=run, step__in=steps)
            .filter(match)
            .order_by("step", "index")
            .values_list("id", flat=True)[:EXAMPLES]
        )
    return [
        make_signal(
            "gold_unparsed",
            fired,
            "Gold answers the accuracy reward cannot parse" if fired else "Gold answers",
            detail,
            None,
            browse_url(run, ids=",".join(map(str, ids)), sort="step_asc"),
        )
    ]


def reward_carried(run: Run, series: dict, steps: list[int], t: dict) -> list[dict]:
    """One reward function giving more than ``carry_share`` of the total over the last ``carry_steps`` logged steps
    while every other function stays flat (gains less than ``FLAT_GAIN`` of the carrier's contribution from the
    first ``window`` of those steps to the last): the policy satisfies that one function and learns nothing the
    others measure (the demo's digits for every prompt: digit_ratio near 1.0, the format or accuracy reward at 0).
    Unlike ``dominance`` it needs no change: a function that carried the reward from the start fires too. A format
    reward learned first is quiet as soon as the accuracy reward starts to rise."""
    weights, rows = _contributions(run, series, steps)
    window = int(t["window"])
    span = max(int(t["carry_steps"]), 2 * window)  # an early and a recent window that do not overlap
    if len(weights) < 2 or len(rows) < span:
        return []
    rows = rows[-span:]
    totals = {n: sum(p.get(n, 0.0) for _, p in rows) for n in weights}
    top = max(totals, key=totals.get)
    share = totals[top] / sum(totals.values())

    def mean(part, name):
        return statistics.fmean(p.get(name, 0.0) for _, p in part)

    scale = mean(rows[-window:], top)
    gains = {n: mean(rows[-window:], n) - mean(rows[:window], n) for n in weights if n != top}
    flat = all(g <= FLAT_GAIN * scale for g in gains.values())
    fired = share > t["carry_share"] and flat
    others = ", ".join(f"{n} {mean(rows[-window:], n):.3g}" for n in gains)
    detail = f"{top} gives {share:.0%} of the reward over the last {len(rows)} steps; the others now give {others}" + (
        " and have not risen" if flat else ", rising"
    )
    if fired:
        detail += (
            f": the policy satisfies {top} alone and learns nothing the other functions measure; read what the "
            f"top-scoring completions do to earn it"
        )
    return [
        make_signal(
            "reward_carried",
            fired,
            f"{top} carries the reward alone" if fired else "Reward across functions",
            detail,
            rows[-1][0],
            browse_url(run, step_min=rows[0][0], sort="reward_desc"),
        )
    ]


def lengths_unknown(run: Run, name: str, title: str, recent_steps: list[int]) -> dict:
    """A length detector's signal where the lengths are not known (stored as 0): it says so, and measures nothing."""
    detail = f"not measured: completion lengths are unknown ({run.unknown_reason})"
    return {**make_signal(name, False, title, detail, recent_steps[-1]), "level": "info"}


def length_collapse(run: Run, t: dict, early_steps: list[int], recent_steps: list[int]) -> list[dict]:
    """More than ``length_collapse_share`` of recent completions of one length, where that length is the limit (the
    rows are truncated: the policy never finishes, as the demo's digits fill max_completion_length) or under a
    quarter of the first steps' mean (the answer shrank to a stub). One group-by over the recent steps."""
    if not recent_steps:
        return []
    if not run.lengths_known:
        return [lengths_unknown(run, "length_collapse", "Completion length spread", recent_steps)]
    recent = Rollout.objects.filter(run=run, step__in=recent_steps)
    n = recent.count()
    top = (
        recent.order_by()
        .values("length")
        .annotate(n=Count("id"), cut=Count("id", filter=Q(truncated=True)))
        .order_by("-n", "length")
        .first()
    )
    if not n or top is None:
        return []
    share, length = top["n"] / n, top["length"]
    at_limit = top["cut"] * 2 > top["n"]
    base = Rollout.objects.filter(run=run, step__in=early_steps).aggregate(m=Avg("length"))["m"]
    stub = base is not None and length < base / 4
    fired = share > t["length_collapse_share"] and (at_limit or stub)
    detail = f"{share:.0%} of the last {len(recent_steps)} steps' completions are {length} tokens long"
    if at_limit:
        detail += " (cut at max_completion_length)"
    elif base is not None:
        detail += f" (the first steps' mean {base:.1f})"
    if fired:
        detail += (
            ": every completion runs to the limit, so no answer is ever finished; a reward that scores what fills "
            "the text (digits, length) is paying"
            if at_limit
            else ": completions collapsed to a stub; the policy may be skipping the reasoning"
        )
    return [
        make_signal(
            "length_collapse",
            fired,
            "Completion length collapsed" if fired else "Completion length spread",
            detail,
            recent_steps[-1],
            browse_url(run, step_min=recent_steps[0], len_min=length, len_max=length),
        )
    ]


def run_detectors(run: Run, series: dict, steps: list[int]) -> list[dict]:
    """Every detector's signal for ``run`` (``series``/``steps``: its metric series, ``selectors.metric_series``)."""
    t = thresholds(run)
    window = int(t["window"])
    stored = rollout_steps(run)
    early, recent = first_steps(stored, window), stored[-window:]
    texts = recent_texts(run, recent)
    return (
        dominance(run, series, steps, t)
        + ceiling(run, t, recent)
        + variance_collapse(run, series, steps, t)
        + length_drift(run, t, early, recent)
        + reward_slope(run, series, steps, t)
        + repetition(run, t, recent)
        + unparsed_gold(run, t, sorted(set(early) | set(recent)))
        + reward_carried(run, series, steps, t)
        + length_collapse(run, t, early, recent)
        + group_diversity(run, t, texts)
        + prompt_blind_answers(run, t, texts)
    )
