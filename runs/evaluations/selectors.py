"""Reads behind the evaluation pages: a run's evaluations with their change against the base model, one evaluation's
completions by prompt with the browser's filters, their JSON lines export, and the compare page's table."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

from django import forms
from django.db.models import Q
from django.urls import reverse
from grpo_web_protocol.scoring import majority

from runs.evaluations.services import eval_max_new_tokens
from runs.forms import YES_NO
from runs.models import Evaluation, Run

DELTA_METRICS = ("mean@k", "pass@k", "maj@k", "greedy", "reward_mean@k")
COMPARED_METRICS = ("mean@k", "pass@k", "maj@k", "greedy")
PROMPTS_PAGE = 20
CHUNK_ROWS = 2000
EXPORT_FIELDS = (
    "prompt_index",
    "sample",
    "greedy",
    "prompt",
    "completion",
    "rewards",
    "reward",
    "correct",
    "answer",
    "length",
    "truncated",
    "columns",
)


# --- a run's evaluations -------------------------------------------------------------------------------------------


def _comparable(evaluation: Evaluation) -> tuple:
    """Two evaluations compare when they scored the same prompts by the same rule."""
    e = evaluation
    return e.dataset_version_id, e.split, e.prompts, e.k, e.solved_by, e.threshold


def _delta(evaluation: Evaluation, base: Evaluation | None) -> dict | None:
    if base is None:
        return None
    now, then = evaluation.metrics, base.metrics
    return {
        "base": base.pk,
        "base_label": base.label,
        "metrics": {m: now[m] - then[m] for m in DELTA_METRICS if now.get(m) is not None and then.get(m) is not None},
    }


def _row(run: Run, e: Evaluation, base: Evaluation | None) -> dict:
    return {
        "id": e.pk,
        "label": e.label,
        "kind": e.kind,
        "step": e.step,
        "model": e.model,  # the model folder or hub id the evaluation loaded (the base model for a periodic one)
        "evaluated": e.evaluated,  # what the pages name: "this run, step N" for a periodic one after step 0
        "dataset_version": str(e.dataset_version) if e.dataset_version_id else "",
        "dataset_url": e.dataset_version.get_absolute_url() if e.dataset_version_id else "",
        # an imported evaluation (verl's validation dump): the file it was read from; the dump does not say how verl
        # sampled (its val_kwargs), so temperature and max_new_tokens are null
        "imported_from": e.imported_from,
        "split": e.split,
        "status": e.status,
        "k": e.k,
        "temperature": None if e.imported_from else e.settings.get("eval_temperature", 1.0),
        "max_new_tokens": None if e.imported_from else eval_max_new_tokens(run, e.settings),
        "solved_by": e.solved_by,
        "threshold": e.threshold,
        "prompts": e.prompts,
        "metrics": e.metrics,
        "seconds": e.seconds,
        "error": e.error,
        "created_at": e.created_at,
        "finished_at": e.finished_at,
        "url": reverse("evaluation_detail", args=[run.pk, e.pk]),
        "jsonl_url": reverse("evaluation_jsonl", args=[run.pk, e.pk]),
        "delta": _delta(e, base),
    }


def run_evaluations(run: Run) -> dict:
    """Every evaluation of ``run``, oldest first, each completed one with its change against the base model's latest
    completed evaluation (step 0: standalone, or periodic before training) on the same prompts by the same rule;
    ``active`` while one is queued or running."""
    evaluations = list(run.evaluations.select_related("dataset_version__dataset").order_by("created_at", "pk"))
    done = Evaluation.Status.COMPLETED
    bases = [e for e in reversed(evaluations) if e.step == 0 and e.status == done]
    rows = []
    for e in evaluations:
        base = None
        if e.status == done and e.step != 0:
            base = next((b for b in bases if _comparable(b) == _comparable(e)), None)
        rows.append(_row(run, e, base))
    return {"evaluations": rows, "active": any(not e.is_finished for e in evaluations)}


def compared_evaluations(runs: list[Run]) -> list[dict]:
    """The runs' completed evaluations, run by run in the comparison's order: checkpoints, runs, and the base model
    before training against the model after it, side by side."""
    order = {run.pk: i for i, run in enumerate(runs)}
    evaluations = Evaluation.objects.filter(run__in=runs, status=Evaluation.Status.COMPLETED).select_related(
        "run", "dataset_version__dataset"
    )
    return [
        {"evaluation": e, "values": [e.metrics.get(m) for m in COMPARED_METRICS]}
        for e in sorted(evaluations, key=lambda e: (order[e.run_id], e.created_at, e.pk))
    ]


# --- one evaluation's completions ----------------------------------------------------------------------------------

SHOW = [
    ("", "every prompt"),
    ("greedy_wrong", "the greedy completion is wrong"),
    ("unsolved", "no sample solved it (pass@k fails)"),
    ("maj_wrong", "the majority answer is wrong (maj@k)"),
]


class EvalFilterForm(forms.Form):
    show = forms.ChoiceField(choices=SHOW, required=False, label="prompts")
    correct = forms.ChoiceField(choices=YES_NO, required=False, label="correct completions")
    reward_min = forms.FloatField(required=False, label="reward ≥")
    q = forms.CharField(
        max_length=200, required=False, label="search", help_text="Text in the prompt or a completion, any case."
    )
    page = forms.IntegerField(min_value=1, required=False, widget=forms.HiddenInput)


@dataclass
class Outcome:
    """How one prompt fared, counted as workers.training.evaluate.metrics counts it."""

    greedy: bool  # the greedy completion is correct
    solved: bool  # some sample is (pass@k)
    vote: int | None  # the sample maj@k voted for; None when no sample has an answer
    vote_answer: str
    vote_correct: bool


# the "prompts" filter: which prompts a figure counts as failed
WRONG = {
    "greedy_wrong": lambda o: not o.greedy,
    "unsolved": lambda o: not o.solved,
    "maj_wrong": lambda o: not o.vote_correct,
}


def prompt_outcomes(evaluation: Evaluation) -> dict[int, Outcome]:
    """Each prompt's outcome, from one light read of its completions' correctness and answers."""
    samples: dict[int, list[tuple[int, bool, str | None]]] = {}
    greedy: dict[int, bool] = {}
    for index, sample, is_greedy, correct, answer in evaluation.samples.order_by("prompt_index", "sample").values_list(
        "prompt_index", "sample", "greedy", "correct", "answer"
    ):
        if is_greedy:
            greedy[index] = correct
        else:  # an answer is stored as "" when the completion had none
            samples.setdefault(index, []).append((sample, correct, answer or None))
    outcomes = {}
    for index in sorted(samples.keys() | greedy.keys()):
        ks = samples.get(index, [])
        vote = majority([answer for _, _, answer in ks])
        voted = ks[vote] if vote is not None else None
        outcomes[index] = Outcome(
            greedy=greedy.get(index, False),
            solved=any(c for _, c, _ in ks),
            vote=voted[0] if voted else None,
            vote_answer=voted[2] if voted else "",
            vote_correct=bool(voted and voted[1]),
        )
    return outcomes


def _sample_filter(data: dict) -> Q:
    """The completions shown: correct or not, total reward at least ``reward_min`` (an incorrect completion with a
    high reward is what reward hacking looks like)."""
    q = Q()
    if data.get("correct"):
        q &= Q(correct=data["correct"] == "yes")
    if data.get("reward_min") is not None:
        q &= Q(reward__gte=data["reward_min"])
    return q


def _prompt_indexes(evaluation: Evaluation, data: dict, outcomes: dict[int, Outcome]) -> list[int]:
    """The prompts that pass the filters, in order."""
    wrong = WRONG.get(data.get("show"))
    keep = [i for i, o in outcomes.items() if wrong is None or wrong(o)]
    text = data.get("q")
    for condition in (_sample_filter(data), Q(prompt__icontains=text) | Q(completion__icontains=text) if text else Q()):
        if condition:
            found = set(evaluation.samples.filter(condition).values_list("prompt_index", flat=True).distinct())
            keep = [i for i in keep if i in found]
    return keep


@dataclass
class PromptsPage:
    prompts: list[dict]
    total: int  # prompts that pass the filters
    number: int
    pages: int


def evaluation_page(evaluation: Evaluation, data: dict, *, per_page: int = PROMPTS_PAGE) -> PromptsPage:
    """A page of the filtered prompts, each with its shown completions (the k samples, then the greedy one), their
    per-function rewards by name, and which sample maj@k voted for."""
    outcomes = prompt_outcomes(evaluation)
    indexes = _prompt_indexes(evaluation, data, outcomes)
    pages = max(1, -(-len(indexes) // per_page))
    number = min(data.get("page") or 1, pages)
    wanted = indexes[(number - 1) * per_page : number * per_page]
    names = evaluation.run.reward_names
    prompts: dict[int, dict] = {}
    for s in evaluation.samples.filter(_sample_filter(data), prompt_index__in=wanted).order_by(
        "prompt_index", "sample"
    ):
        o = outcomes[s.prompt_index]
        entry = prompts.setdefault(
            s.prompt_index, {"index": s.prompt_index, "prompt": s.prompt, "outcome": o, "samples": []}
        )
        entry["samples"].append(
            {"sample": s, "rewards": list(zip(names, s.rewards)), "voted": not s.greedy and s.sample == o.vote}
        )
    return PromptsPage(prompts=[prompts[i] for i in wanted], total=len(indexes), number=number, pages=pages)


def sample_rows(evaluation: Evaluation, data: dict) -> Iterator[dict]:
    """The filtered completions in prompt order, per-function rewards by name (read in chunks)."""
    keep = set(_prompt_indexes(evaluation, data, prompt_outcomes(evaluation)))
    names = evaluation.run.reward_names
    qs = evaluation.samples.filter(_sample_filter(data)).order_by("prompt_index", "sample").values(*EXPORT_FIELDS)
    for row in qs.iterator(chunk_size=CHUNK_ROWS):
        if row["prompt_index"] in keep:
            row["rewards"] = dict(zip(names, row["rewards"]))
            yield {"evaluation": evaluation.pk, "label": evaluation.label, **row}


def sample_jsonl(evaluation: Evaluation, data: dict) -> Iterator[bytes]:
    lines = (json.dumps(row, ensure_ascii=False) + "\n" for row in sample_rows(evaluation, data))
    while chunk := "".join(islice(lines, CHUNK_ROWS)):
        yield chunk.encode()
