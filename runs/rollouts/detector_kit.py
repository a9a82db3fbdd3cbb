"""What every reward-hacking detector (runs.rollouts.detectors) shares: the thresholds a run may change, their form,
the signal a detector returns and the rollout-browser link it carries."""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from urllib.parse import urlencode

from django import forms
from django.urls import reverse

from runs.models import Run

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


def browse_url(run: Run, **params) -> str:
    params = {k: v for k, v in params.items() if v is not None}
    return reverse("run_rollouts", args=[run.pk]) + ("?" + urlencode(params) if params else "")


def make_signal(name: str, fired: bool, title: str, detail: str, step, url: str | None = None) -> dict:
    return {
        "key": f"detector/{name}",
        "level": "warn" if fired else "ok",
        "title": title,
        "detail": detail,
        "step": step,
        "url": url if fired else None,
    }


def series_points(series: dict, key: str, steps: list[int]) -> list[tuple[int, float]]:
    return [(s, v) for s, v in zip(steps, series.get(key, [])) if isinstance(v, (int, float)) and math.isfinite(v)]


def first_steps(points: list, window: int) -> list:
    return points[: max(1, min(window, len(points) // 3))]


def compression_ratio(text: str) -> float:
    raw = text.encode()
    return len(raw) / len(zlib.compress(raw, 6)) if raw else 1.0
