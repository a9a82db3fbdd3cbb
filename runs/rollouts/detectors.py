"""Reward-hacking detectors: signs that the training reward rises while the task is not being learned. Each reads
TRL's logged metrics or the stored rollouts, compares them with a threshold the run may change
(``Run.detector_thresholds`` over ``DEFAULTS``), and, when it fires, links to example rollouts in the rollout browser
through the browser's own URL filters, so the evidence is one click away.

They join the run's health signals (``runs.rollouts.inspection.run_health``): same shape, key ``detector/<name>``.
"""

from __future__ import annotations

import math
import re
import statistics
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass
from urllib.parse import urlencode

from django import forms
from django.db.models import Avg, Count, Max, Q
from django.db.models.functions import Left, Right
from django.urls import reverse

from runs.models import Rollout, Run
from runs.rollouts.selectors import rollout_steps

EXAMPLES = 20  # rollouts an alert links to when no filter describes them
REPETITION_MIN_CHARS = 64  # below this zlib's own header dominates the ratio
TEXT_ROWS = 2000  # recent rollouts the text detectors (diversity, answers) read at most, newest first
COMPARED_CHARS = 200  # a completion's opening the diversity detector compares, and its end the answer is read from
GROUPS_COMPARED = 64  # newest groups the diversity detector compares (each against the next, 8 members at most)
MIN_PROMPTS = 4  # distinct recent prompts the answer detector needs before it judges
FLAT_GAIN = 0.05  # a function "stays flat" while its gain is under this share of the carrier's contribution


@dataclass(frozen=True)
class Threshold:
    default: float
    label: str
    help: str
    min_value: float = 0.0
    max_value: float | None = None


THRESHOLDS = {
    "dominance_share": Threshold(
        0.9,
        "one function's share of the reward",
        "Fires when one reward function gives "
        "more than this share of the total reward in recent steps, having given less early "
        "on.",
        0.5,
        1.0,
    ),
    "ceiling_share": Threshold(
        0.8,
        "share of completions at the ceiling",
        "Fires when more than this share of recent completions score the run's highest reward.",
        0.0,
        1.0,
    ),
    "variance_drop": Threshold(
        0.2,
        "reward std, as a share of its start",
        "Fires when TRL's within-group reward std falls below this share of its early level.",
        0.0,
        1.0,
    ),
    "length_z": Threshold(
        3.0,
        "completion length |z|",
        "Fires when the recent mean completion length is this many standard deviations from the first steps' lengths.",
        0.5,
    ),
    "cusum_h": Threshold(
        5.0,
        "reward CUSUM alarm level",
        "CUSUM of the step-to-step reward change against the "
        "recent slope, in robust standard deviations (slack 1): fires when it passes this level (a "
        "sudden slope change).",
        1.0,
    ),
    "repetition_ratio": Threshold(
        3.0,
        "compression ratio of a degenerate completion",
        "A completion of 64 characters or more that zlib shrinks by this factor or more repeats itself.",
        1.0,
    ),
    "repetition_share": Threshold(
        0.2,
        "share of degenerate completions",
        "Fires when more than this share of recent completions are degenerate by the compression ratio.",
        0.0,
        1.0,
    ),
    "gold_unparsed_share": Threshold(
        0.0,
        "share of gold answers the accuracy reward cannot parse",
        "Fires when more than this share of the gold answers seen fail math-verify's parse.",
        0.0,
        1.0,
    ),
    "carry_share": Threshold(
        0.9,
        "one function's share while the others stay flat",
        "Fires when one reward function gives more than this share of the total reward over the last "
        "'steps a function must carry the reward' steps while no other function improves, whether or not it "
        "gave as much from the start.",
        0.5,
        1.0,
    ),
    "carry_steps": Threshold(
        10,
        "steps a function must carry the reward",
        "How many of the last logged steps one function must carry the reward with the others flat: a format "
        "reward learned first carries it alone for a few steps before the accuracy reward starts to rise.",
        2,
        1000,
    ),
    "group_similarity": Threshold(
        0.4,
        "similarity of a group's completions",
        "A group whose completions are, on average, this similar to the next one in the group (the weighted "
        "Jaccard of their first 200 characters' trigrams: 1 the same text, about 0.2 to 0.35 two answers in "
        "different words) has no diversity left.",
        0.0,
        1.0,
    ),
    "similar_groups_share": Threshold(
        0.5,
        "share of groups of near-identical completions",
        "Fires when more than this share of recent groups are near-identical by the similarity above.",
        0.0,
        1.0,
    ),
    "length_collapse_share": Threshold(
        0.8,
        "share of completions of one length",
        "Fires when more than this share of recent completions have one and the same length, and that length is "
        "max_completion_length (cut off, never finishing) or under a quarter of the first steps' mean (a stub).",
        0.0,
        1.0,
    ),
    "same_answer_share": Threshold(
        0.5,
        "share of prompts given the same wrong answer",
        "Fires when, over the recent steps' prompts (4 or more), one answer (the last \\boxed{}, else the last "
        "number, else the text) is the most common answer to more than this share of them, where it is not "
        "their gold answer.",
        0.0,
        1.0,
    ),
    "window": Threshold(3, "recent steps", "How many of the last steps count as recent.", 1, 1000),
}
DEFAULTS = {name: t.default for name, t in THRESHOLDS.items()}


def thresholds(run: Run) -> dict:
    return {**DEFAULTS, **{k: v for k, v in (run.detector_thresholds or {}).items() if k in DEFAULTS}}


class ThresholdsForm(forms.Form):
    """The run's detector thresholds; a field left at its default is not stored."""

    def __init__(self, *args, run: Run, **kwargs):
        super().__init__(*args, **kwargs)
        current = thresholds(run)
        for name, t in THRESHOLDS.items():
            field = forms.IntegerField if name in ("window", "carry_steps") else forms.FloatField
            self.fields[name] = field(
                label=t.label,
                help_text=t.help,
                min_value=t.min_value,
                max_value=t.max_value,
                initial=current[name],
                required=False,
            )

    def changed_thresholds(self) -> dict:
        return {k: v for k, v in self.cleaned_data.items() if v is not None and v != DEFAULTS[k]}


# --- helpers -----------------------------------------------------------------------------------------------------


def _browse(run: Run, **params) -> str:
    params = {k: v for k, v in params.items() if v is not None}
    return reverse("run_rollouts", args=[run.pk]) + ("?" + urlencode(params) if params else "")


def _signal(name: str, fired: bool, title: str, detail: str, step, url: str | None = None) -> dict:
    return {
        "key": f"detector/{name}",
        "level": "warn" if fired else "ok",
        "title": title,
        "detail": detail,
        "step": step,
        "url": url if fired else None,
    }


def _points(series: dict, key: str, steps: list[int]) -> list[tuple[int, float]]:
    return [(s, v) for s, v in zip(steps, series.get(key, [])) if isinstance(v, (int, float)) and math.isfinite(v)]


def _early(points: list, window: int) -> list:
    return points[: max(1, min(window, len(points) // 3))]


def compression_ratio(text: str) -> float:
    raw = text.encode()
    return len(raw) / len(zlib.compress(raw, 6)) if raw else 1.0


# --- the detectors -----------------------------------------------------------------------------------------------


def _contributions(run: Run, series: dict, steps: list[int]) -> tuple[dict, list[tuple[int, dict[str, float]]]]:
    """The run's reward weights, and per logged step each function's weighted contribution |weight × mean| (steps
    whose total is 0 left out)."""
    weights = {r["name"]: float(r.get("weight", 1.0)) for r in run.rewards}
    per_step: dict[int, dict[str, float]] = {}
    for name, w in weights.items():
        for s, v in _points(series, f"rewards/{name}/mean", steps):
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

    early, recent = shares(_early(rows, window)), shares(rows[-window:])
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
        _signal(
            "dominance",
            fired,
            f"{top} dominates the reward" if fired else "Reward balance",
            detail,
            rows[-1][0],
            _browse(run, step_min=first, sort="reward_desc"),
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
        _signal(
            "ceiling",
            fired,
            "Reward at its ceiling" if fired else "Reward ceiling",
            detail,
            recent_steps[-1],
            _browse(run, step_min=recent_steps[0], reward_min=f"{floor:.9g}"),
        )
    ]


def variance_collapse(run: Run, series: dict, steps: list[int], t: dict) -> list[dict]:
    """TRL's within-group reward std (``reward_std``) falling below ``variance_drop`` of its early level: groups stop
    differing, so advantages vanish."""
    window = int(t["window"])
    std = _points(series, "reward_std", steps)
    if len(std) < 2 * window:
        return []
    start, now = statistics.fmean(v for _, v in _early(std, window)), statistics.fmean(v for _, v in std[-window:])
    if start <= 0:
        return []
    fired = now < t["variance_drop"] * start
    detail = f"within-group reward std {start:.3g} early on, {now:.3g} over the last {window} steps"
    if fired:
        detail += ": the completions of a group now score alike, so there is little left to learn from"
    return [
        _signal(
            "variance_collapse",
            fired,
            "Reward variance collapsed" if fired else "Reward variance",
            detail,
            std[-1][0],
            _browse(run, step_min=std[-window][0], zero_std="yes"),
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
        _signal(
            "length_drift",
            fired,
            "Completion length drifting" if fired else "Completion length",
            detail,
            recent_steps[-1],
            _browse(run, step_min=recent_steps[0], **bound),
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
    reward = _points(series, "reward", steps)
    if len(reward) < 8:
        return []
    change = cusum_change(reward, t["cusum_h"])
    if change is None:
        return [
            _signal(
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
        _signal(
            "reward_slope",
            True,
            "Sudden reward change",
            detail,
            fired_at,
            _browse(run, step_min=began, step_max=fired_at, sort="reward_desc"),
        )
    ]


def repetition(run: Run, t: dict, recent_steps: list[int]) -> list[dict]:
    """Degenerate text: completions zlib shrinks by ``repetition_ratio`` or more (a phrase or character repeated,
    loops), more than ``repetition_share`` of the recent ones."""
    if not recent_steps:
        return []
    rows = Rollout.objects.filter(run=run, step__in=recent_steps).values_list("id", "completion")
    long, flagged = 0, []
    for rid, text in rows.iterator(chunk_size=2000):
        if len(text) < REPETITION_MIN_CHARS:
            continue
        long += 1
        ratio = compression_ratio(text)
        if ratio >= t["repetition_ratio"]:
            flagged.append((ratio, rid))
    if not long:
        return []
    share = len(flagged) / long
    fired = share > t["repetition_share"]
    detail = (
        f"{share:.0%} of the last {len(recent_steps)} steps' completions of {REPETITION_MIN_CHARS}+ "
        f"characters compress {t['repetition_ratio']:g}× or more"
    )
    if fired:
        detail += ": they repeat themselves (loops, padding, gibberish); a reward that counts something may be paying"
    examples = ",".join(str(rid) for _, rid in sorted(flagged, reverse=True)[:EXAMPLES])
    return [
        _signal(
            "repetition",
            fired,
            "Repetitive completions" if fired else "Repetition",
            detail,
            recent_steps[-1],
            _browse(run, ids=examples, sort="step_asc"),
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
        _signal(
            "gold_unparsed",
            fired,
            "Gold answers the accuracy reward cannot parse" if fired else "Gold answers",
            detail,
            None,
            _browse(run, ids=",".join(map(str, ids)), sort="step_asc"),
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
        _signal(
            "reward_carried",
            fired,
            f"{top} carries the reward alone" if fired else "Reward across functions",
            detail,
            rows[-1][0],
            _browse(run, step_min=rows[0][0], sort="reward_desc"),
        )
    ]


def lengths_unknown(run: Run, name: str, title: str, recent_steps: list[int]) -> dict:
    """A length detector's signal where the lengths are not known (stored as 0): it says so, and measures nothing."""
    detail = f"not measured: completion lengths are unknown ({run.unknown_reason})"
    return {**_signal(name, False, title, detail, recent_steps[-1]), "level": "info"}


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
        _signal(
            "length_collapse",
            fired,
            "Completion length collapsed" if fired else "Completion length spread",
            detail,
            recent_steps[-1],
            _browse(run, step_min=recent_steps[0], len_min=length, len_max=length),
        )
    ]


def recent_texts(run: Run, recent_steps: list[int]) -> list[tuple]:
    """(id, step, group, prompt_key, the completion's opening, its end, the gold answer) of the recent steps'
    rollouts, newest first, at most ``TEXT_ROWS``: what the text detectors read. The database cuts the completions
    (``COMPARED_CHARS`` each end), so a long one costs no more than a short one."""
    if not recent_steps:
        return []
    return list(
        Rollout.objects.filter(run=run, step__in=recent_steps)
        .order_by("-step", "index")
        .values_list(
            "id",
            "step",
            "group",
            "prompt_key",
            Left("completion", COMPARED_CHARS),
            Right("completion", COMPARED_CHARS),
            "columns__answer",
        )[:TEXT_ROWS]
    )


def normalized(text: str) -> str:
    return " ".join(text.lower().split())


def shingles(text: str) -> Counter:
    """The character trigrams of a normalized text, counted (a text under three characters is its own)."""
    text = normalized(text)
    return Counter(text[i : i + 3] for i in range(max(1, len(text) - 2)))


def similarity(a: Counter, b: Counter) -> float:
    """Weighted Jaccard of two completions' trigrams: 1 for the same text, about 0.2 to 0.35 for two answers to one
    question in different words, 0.5 and more for one string with a few characters changed (``4444474444`` and
    ``4444444444``)."""
    shared = sum(min(n, b[gram]) for gram, n in a.items() if gram in b)
    union = a.total() + b.total() - shared
    return shared / union if union else 1.0


def group_diversity(run: Run, t: dict, rows: list[tuple]) -> list[dict]:
    """More than ``similar_groups_share`` of recent groups whose completions are near-identical: on average
    ``group_similarity`` or more alike to the next completion of their group (G comparisons a group, not G²). Such a
    group scores alike, so it teaches nothing, and the policy has stopped exploring (the demo's ``4444…`` group
    after group)."""
    groups: dict[tuple, list] = defaultdict(list)
    for rid, step, group, _key, opening, _end, _gold in rows:
        if (step, group) in groups or len(groups) < GROUPS_COMPARED:
            groups[(step, group)].append((rid, opening))
    groups = {k: g for k, g in groups.items() if len(g) > 1}
    if not groups:
        return []
    similar = []
    for key, members in sorted(groups.items()):
        grams = [shingles(text) for _, text in members[:8]]
        ring = statistics.fmean(similarity(grams[i - 1], grams[i]) for i in range(len(grams)))
        if ring >= t["group_similarity"]:
            similar.append(key)
    share = len(similar) / len(groups)
    fired = share > t["similar_groups_share"]
    steps = sorted({s for s, _ in groups})
    detail = (
        f"{len(similar)} of the {len(groups)} groups of the last {len(steps)} steps hold near-identical "
        f"completions (similarity {t['group_similarity']:g} or more)"
    )
    if fired:
        detail += (
            ": the policy writes the same thing for every sample, so groups score alike and exploration has "
            "stopped; read what it repeats"
        )
    ids: list[int] = []
    for key in similar:
        if len(ids) + len(groups[key]) > 2 * EXAMPLES:
            break
        ids += [rid for rid, _ in groups[key]]
    return [
        _signal(
            "group_diversity",
            fired,
            "Groups of near-identical completions" if fired else "Diversity within groups",
            detail,
            steps[-1],
            _browse(run, ids=",".join(map(str, ids)), sort="step_asc"),
        )
    ]


_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_RUN = re.compile(r"(.)\1{2,}")


def answer_key(text) -> str:
    """What a completion answers, for comparing across prompts, read from its last ``COMPARED_CHARS`` characters:
    the last \\boxed{} content, else the last number, else the normalized text (100 characters); lower case, runs of
    one character shortened to one (4444 is 4), so near-identical digit strings count as one answer."""
    text = str(text)[-COMPARED_CHARS:]
    at = text.rfind("\\boxed{")
    boxed = _BOXED.match(text, at) if at >= 0 else None
    numbers = _NUMBER.findall(text) if boxed is None else []
    answer = boxed.group(1) if boxed else numbers[-1] if numbers else normalized(text)[:100]
    return _RUN.sub(r"\1", answer.strip().lower())


def prompt_blind_answers(run: Run, t: dict, rows: list[tuple]) -> list[dict]:
    """One answer that is the most common answer of more than ``same_answer_share`` of the recent prompts (at least
    ``MIN_PROMPTS``) while it is not their gold answer: the answer does not depend on the question (the demo's
    ``4444…`` for every sum). Prompts whose gold answer it is do not count, so a dataset where many answers are
    alike (counts, yes/no) stays quiet while the policy answers them right."""
    answers: dict[str, Counter] = defaultdict(Counter)
    gold: dict[str, str] = {}
    for _rid, _step, _group, key, _opening, end, expected in rows:
        answers[key][answer_key(end)] += 1
        if expected is not None and str(expected).strip():
            gold[key] = answer_key(expected)
    if len(answers) < MIN_PROMPTS:
        return []
    common = {key: c.most_common(1)[0][0] for key, c in answers.items()}
    top, _ = Counter(common.values()).most_common(1)[0]
    blind = [key for key, a in common.items() if a == top and gold.get(key) != top]
    share = len(blind) / len(answers)
    fired = share > t["same_answer_share"]
    shown = top if len(top) <= 40 else top[:40] + "…"
    detail = (
        f"{share:.0%} of the {len(answers)} prompts of the recent steps get the same most common answer "
        f"{shown!r}, which is not their gold answer"
    )
    if fired:
        detail += (
            ": the answer does not depend on the question; the policy found one output the reward pays for "
            "whatever it is asked"
        )
    per_prompt: dict[str, list[int]] = defaultdict(list)
    wanted = set(blind)
    for rid, _step, _group, key, _opening, end, _expected in reversed(rows):
        if key in wanted and len(per_prompt[key]) < 2 and answer_key(end) == top:
            per_prompt[key].append(rid)
    ids = [rid for key in blind for rid in per_prompt[key]][:EXAMPLES]
    return [
        _signal(
            "prompt_blind_answers",
            fired,
            "The same answer for every prompt" if fired else "Answers vary with the prompt",
            detail,
            max(step for _, step, *_ in rows),
            _browse(run, ids=",".join(map(str, sorted(ids))), sort="step_asc"),
        )
    ]


def run_detectors(run: Run, series: dict, steps: list[int]) -> list[dict]:
    """Every detector's signal for ``run`` (``series``/``steps``: its metric series, ``selectors.metric_series``)."""
    t = thresholds(run)
    window = int(t["window"])
    stored = rollout_steps(run)
    early, recent = _early(stored, window), stored[-window:]
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
