"""What the sandbox-queue tasks do (test a reward function on dataset rows, or on its label suite), and the checks
queue's (check a run's rewards before it starts).

Both start the user's code in the sandbox (rewards.sandbox), never in the web process or this worker's interpreter.
"""

from __future__ import annotations

from dataclasses import asdict

from billiard.process import current_process
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone
from grpo_web_protocol.config import TrainConfig

from rewards.label_suite import describe
from rewards.models import RewardFunction
from rewards.sandbox import Sandbox, SandboxError
from rewards.selectors import reward_specs
from rewards.services import normalize
from rewards.trl_inputs import trl_completions
from runs.datasets.mapping import Mapping, preview_rows
from runs.lifecycle.services import run_checked
from runs.lifecycle.training_config import run_train_config
from runs.models import Dataset, DatasetVersion, Rollout, Run
from runs.rollouts.label_suites import case_groups, outcome, suite_cases
from runs.rollouts.selectors import reward_inputs
from runs.text import as_text
from workers.training.train import grpo_config


def sandbox_slot() -> int:
    """This pool process's sandbox slot (its own uid and scratch) for the sandbox queue's work: 1 + the Celery pool
    index."""
    return 1 + (getattr(current_process(), "index", 0) or 0)


CHECK_SLOT_FIRST = 50  # the checks queue's worker: a process of its own beside the sandbox queue's, on other slots


def check_slot() -> int:
    """The contract check's sandbox slot: 50 + the Celery pool index, so the checks worker and the sandbox worker of
    one machine (both pool index 0) never share a uid or a scratch folder."""
    return CHECK_SLOT_FIRST + (getattr(current_process(), "index", 0) or 0)


def _rows(dataset_version_id: int, n: int, owner=None) -> list[dict] | None:
    """The version's first rows as the trainer receives them: {"row", "prompt", "rewards": {column: value}}; None
    when ``owner`` (when given) may not see the version, or there is none."""
    versions = (
        DatasetVersion.objects.all()
        if owner is None
        else DatasetVersion.objects.filter(dataset__in=Dataset.objects.visible_to(owner))
    )
    version = versions.filter(pk=dataset_version_id).first()
    return None if version is None else preview_rows(version.path, Mapping.of(version), n)


def _columns(rows: list[dict], repeat: int = 1) -> dict[str, list]:
    """Reward columns as TRL passes them: one list per column, one value per completion."""
    names = list(rows[0]["rewards"]) if rows else []
    return {name: [row["rewards"][name] for row in rows for _ in range(repeat)] for name in names}


def reward_test_rows(
    *,
    owner_id: int,
    function_id: int,
    source: str,
    entrypoint: str,
    dataset_version_id: int,
    rows: int,
    completions: list[str],
    run_id: int | None = None,
) -> dict:
    """Score the editor's code on ``rows`` dataset rows; completions typed in, or a run's latest rollouts."""
    result = {"owner_id": owner_id, "function_id": function_id, "rows": [], "error": None, "stdout": "", "weak": []}
    owner = get_user_model().objects.filter(pk=owner_id).first()
    data = _rows(dataset_version_id, rows, owner=owner) if owner is not None else None
    if data is None:  # the same answer for a version that is not there and one that is not theirs
        result["error"] = "no such dataset version"
        return result
    if run_id:
        visible = Run.objects.visible_to(owner)
        last = Rollout.objects.filter(run_id=run_id, run__in=visible).order_by("-step").values("step").first()
        rollouts = (
            list(Rollout.objects.filter(run_id=run_id, step=last["step"]).order_by("index")[:rows]) if last else []
        )
        if not rollouts:
            result["error"] = "that run has no stored rollouts yet"
            return result
        texts = [r.completion for r in rollouts]
        prompts, completions = reward_inputs(
            rollouts[0].run,
            [{"prompt": r.prompt, "completion": r.completion, "messages": r.messages} for r in rollouts],
        )
        columns = {name: [(r.columns or {}).get(name) for r in rollouts] for name in _columns(data)}
        shown = list(range(1, len(rollouts) + 1))
    else:
        if not data:
            result["error"] = "the dataset has no rows"
            return result
        texts = [completions[i % len(completions)] for i in range(len(data))]
        prompts = [row["prompt"] for row in data]
        completions = trl_completions(prompts, texts)
        columns = _columns(data)
        shown = [row["row"] for row in data]
    try:
        with Sandbox(source, entrypoint, slot=sandbox_slot(), allow_weak=settings.GRPO_SANDBOX_ALLOW_WEAK) as sb:
            result["weak"] = list(sb.isolation.get("weak", []))  # shown above the result: what isolation lacked
            call = sb.call(completions, prompts=prompts, **columns)
    except SandboxError as exc:
        result.update(error=str(exc), stdout=exc.stdout, line=exc.line, kind=exc.kind)
        return result
    result["rows"] = [
        {"row": n, "prompt": as_text(p), "completion": c, "score": s}
        for n, p, c, s in zip(shown, prompts, texts, call.rewards)
    ]
    result.update(stdout=call.stdout, duration_ms=call.duration_s * 1000)
    return result


SAMPLE_COMPLETIONS = ["<think>Let me work it out. Wait, let me check.</think> The answer is \\boxed{1}", "", "12"]


def trl_config_problems(train_config: dict) -> list[str]:
    """The checks TRL's GRPOConfig makes when it is built (the cross-field ones included), made here, on a worker
    that has TRL, before the run is queued; TRL's own messages name the fields."""
    config = TrainConfig.from_dict({**train_config, "output_dir": "/nonexistent/grpo-web-config-check"})
    if config.kind != "grpo":
        return []  # SFTConfig's own checks run when the SFT run starts
    try:
        grpo_config(config)
    except (ValueError, TypeError, KeyError) as exc:
        return [f"GRPOConfig refuses this configuration (TRL's check): {exc}" + _what_unsloth_does(str(exc), config)]
    return []


def _what_unsloth_does(message: str, config: TrainConfig) -> str:
    """Unsloth's GRPOConfig trains a batch TRL refuses by changing it: where steps_per_generation and
    generation_batch_size are unset and the batch (per device x accumulation x processes) is not a multiple of
    num_generations, it sets per_device_train_batch_size to num_generations and prints that it did. A config from an
    Unsloth notebook is told what Unsloth trained."""
    if "must be divisible by num_generations" not in message:
        return ""
    G = config.grpo.num_generations
    return (
        f". Unsloth's GRPOConfig changes per_device_train_batch_size to num_generations ({G}) here on its own (it "
        f"prints 'We will change the batch size'); TRL changes nothing: set per_device_train_batch_size: {G} to "
        f"train what Unsloth trains with this config"
    )


def reward_contract_problems(
    *, rewards: list[dict], dataset_version_id: int, rows: int = 3, train_config: dict | None = None
) -> list[str]:
    """Call each reward the way TRL will, on a few rows and sample completions (shaped as TRL shapes them for the
    dataset: rewards.trl_inputs); the problems, each naming its reward.
    With ``train_config`` (the run's TrainConfig as a dict), also TRL's own checks of the configuration.

    ``rewards`` are specs with ``name``, ``source`` and ``entrypoint``. The sandbox host already refuses a result
    that is not one finite number or None per completion.
    """
    if train_config is not None and (problems := trl_config_problems(train_config)):
        return problems

    data = _rows(dataset_version_id, rows)
    if not data:
        return ["dataset: the version has no rows"]
    k = len(SAMPLE_COMPLETIONS)
    prompts = [row["prompt"] for row in data for _ in range(k)]
    completions = trl_completions(prompts, [c for _ in data for c in SAMPLE_COMPLETIONS])
    columns = _columns(data, repeat=k)
    problems = []
    for spec in rewards:
        try:
            with Sandbox(
                spec["source"], spec["entrypoint"], slot=check_slot(), allow_weak=settings.GRPO_SANDBOX_ALLOW_WEAK
            ) as sb:
                sb.call(completions, prompts=prompts, completion_ids=[[0]] * len(completions), **columns)
        except SandboxError as exc:
            problems.append(f"reward '{spec['name']}': {exc}")
    return problems


def run_contract_check(run_id: int) -> None:
    """A "checking" run's check (the checks queue): its rewards of the user's code called on a few rows, TRL's
    GRPOConfig built from its config; then queued or refused (runs.lifecycle.services.run_checked). A run no longer
    checking (cancelled, deleted, a message sent twice) is left alone."""
    run = Run.objects.filter(pk=run_id, status=Run.Status.CHECKING).first()
    if run is None:
        return
    try:
        specs = [s for s in reward_specs(run.rewards) if s.get("source")]
        train = run_train_config(run, slot_base=0, write_files=False)
        problems = reward_contract_problems(
            rewards=specs, dataset_version_id=run.dataset_version_id, train_config=asdict(train)
        )
    except SoftTimeLimitExceeded:
        problems = ["rewards: the check did not finish in its time limit; a reward that hangs on import? try again"]
    run_checked(run=run, problems=problems)


def reward_label_suite(*, owner_id: int, function_id: int, source: str, entrypoint: str) -> dict:
    """The reward editor's "Test against labels": score the editor's code on every group a labeled rollout of the
    function's suite is in, in the sandbox, and say which labels it agrees with (runs.rollouts.label_suites). When
    the code is a saved version's, that version keeps the agreement."""
    result = {"owner_id": owner_id, "function_id": function_id, "error": None, "cases": [], "notes": [], "weak": []}
    owner = get_user_model().objects.filter(pk=owner_id).first()
    function = RewardFunction.objects.visible_to(owner).filter(pk=function_id).first() if owner else None
    if function is None:
        result["error"] = "no such reward function"
        return result
    suite = function.label_suite or {}
    if not suite:
        result["error"] = "this function has no label suite: choose runs and map their labels to expectations first"
        return result
    cases, result["notes"] = suite_cases(suite, owner)
    if not cases:
        result["error"] = "no rollout of the suite's runs carries one of its labels yet"
        return result
    scores: dict[int, float | None] = {}
    group_of: dict[int, tuple] = {}
    try:
        with Sandbox(source, entrypoint, slot=sandbox_slot(), allow_weak=settings.GRPO_SANDBOX_ALLOW_WEAK) as sb:
            result["weak"] = list(sb.isolation.get("weak", []))
            for run_id, rows in case_groups(cases).items():
                run = Run.objects.get(pk=run_id)
                prompts, completions = reward_inputs(run, rows)
                names = sorted({k for r in rows for k in (r["columns"] or {})} - {"prompts", "completions"})
                columns = {k: [(r["columns"] or {}).get(k) for r in rows] for k in names}
                call = sb.call(completions, prompts=prompts, **columns)
                for r, score in zip(rows, call.rewards):
                    scores[r["id"]] = score
                    group_of[r["id"]] = (run_id, r["step"], r["group"])
    except SandboxError as exc:
        result.update(error=str(exc), stdout=exc.stdout, line=exc.line, kind=exc.kind)
        return result
    result.update(outcome(cases, scores, group_of))
    result["suite"] = [describe(e) for e in suite["expectations"]]
    saved = function.versions.filter(source=normalize(source), entrypoint=entrypoint).order_by("-number").first()
    if saved is not None:
        saved.label_agreement = {
            "agrees": result["agrees"],
            "total": result["total"],
            "suite": suite,
            "checked_at": timezone.now().isoformat(),
        }
        saved.save(update_fields=["label_agreement"])
        result["version"] = saved.number
    return result
