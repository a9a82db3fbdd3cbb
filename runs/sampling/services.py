"""Writes of the sampling capability: rejection-sampling jobs (R1's stage 3). Create and queue one; store what the
sampling program scored: every sample, the kept ones as a new SFT dataset version with its provenance."""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from django.db import transaction
from django.utils import timezone
from grpo_web_protocol.scoring import criterion

from grpo_web import queues
from runs.datasets.importing import DatasetError
from runs.datasets.services import dataset_import, datasets_dir, version_training_file
from runs.jobs import job_cancel, jobs_redispatch
from runs.models import DatasetVersion, RejectionJob, RejectionSample
from runs.paths import model_problems
from runs.text import as_text

SPLITS = ("train", "eval", "all")


class JobRefused(Exception):
    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass
class RejectionSettings:
    """How a job samples and what it keeps."""

    k: int = 8  # completions sampled per prompt
    threshold: float = 1.0  # a sample passes when the solved_by reward is at least this
    solved_by: str = ""  # a reward's name, or "reward" (the weighted total); blank: accuracy if chosen, else total
    max_per_prompt: int = 2  # m: kept samples per prompt at most (the best rewards first, duplicates dropped)
    temperature: float = 1.0
    max_new_tokens: int = 32
    max_prompts: int = 0  # the first N prompts of the split; 0: all
    mix_rows: int = 0  # rows of mix_version added to the output (its first rows with a completion)
    seed: int = 0

    def problems(self, reward_names: list[str]) -> list[str]:
        errors = [
            f"{name}: must be at least {low}"
            for name, low in (
                ("k", 1),
                ("max_per_prompt", 1),
                ("max_new_tokens", 1),
                ("max_prompts", 0),
                ("mix_rows", 0),
            )
            if getattr(self, name) < low
        ]
        if self.temperature < 0:
            errors.append("temperature: must be at least 0")
        try:
            criterion(self.solved_by, reward_names)
        except ValueError as exc:
            errors.append(str(exc).replace("eval_solved_by", "solved_by").replace("the run's", "the chosen"))
        return errors


def rejection_job_create(
    *,
    owner,
    name: str,
    model: str,
    dataset_version: DatasetVersion,
    rewards: list[dict],
    settings: RejectionSettings,
    split: str = "all",
    mix_version: DatasetVersion | None = None,
) -> RejectionJob:
    """Validate and queue a job once its row is committed; JobRefused names each problem."""
    errors = model_problems(model, user=owner) + settings.problems([r["name"] for r in rewards])
    if not rewards:
        errors.append("rewards: pick at least one reward function to score the samples")
    if split not in SPLITS:
        errors.append(f"split: give one of {', '.join(SPLITS)}")
    elif split == "eval" and not dataset_version.eval_rows:
        errors.append(f"split: {dataset_version} has no eval split")
    if settings.mix_rows and mix_version is None:
        errors.append("mix_version: pick the dataset whose rows are mixed in, or set mix_rows to 0")
    if mix_version is not None and "completion" not in mix_version.columns:
        errors.append(f"mix_version: {mix_version} has no 'completion' column to mix into an SFT dataset")
    if errors:
        raise JobRefused(errors)
    with transaction.atomic():
        job = RejectionJob.objects.create(
            owner=owner,
            name=name,
            model=model,
            dataset_version=dataset_version,
            split=split,
            rewards=rewards,
            settings=asdict(settings),
            mix_version=mix_version if settings.mix_rows else None,
        )
        transaction.on_commit(lambda: _enqueue(job))
    return job


def _enqueue(job: RejectionJob) -> None:
    queues.enqueue(queues.REJECTION_SAMPLE, args=[job.pk], queue=queues.training_queue(0))


def rejection_job_redispatch(*, grace_seconds: float = 30) -> list[RejectionJob]:
    """Queued jobs whose message the broker lost: sent again (the claim is idempotent)."""
    return jobs_redispatch(
        RejectionJob.objects.all(), task=queues.REJECTION_SAMPLE, enqueue=_enqueue, grace_seconds=grace_seconds
    )


def rejection_job_claim(job_id: int) -> RejectionJob | None:
    with transaction.atomic():
        job = RejectionJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.status != RejectionJob.Status.QUEUED:
            return None
        job.status = RejectionJob.Status.RUNNING
        job.save(update_fields=["status"])
        return job


def rejection_job_cancel(*, job: RejectionJob) -> RejectionJob:
    """Queued or running: cancelled now. A queued job's message is then refused by the claim; a running job's worker
    sees the status within a second and stops the sampling process (workers.jobs.run_eval_program)."""
    return job_cancel(job=job)


def prompts_file(job: RejectionJob) -> str:
    return version_training_file(version=job.dataset_version, out=job.job_dir / "prompts.jsonl", split=job.split)


_SPACE = re.compile(r"\s+")


def _same_text(completion: str) -> str:
    return _SPACE.sub(" ", completion).strip()


def select_samples(rows: list[dict], *, max_per_prompt: int) -> list[dict]:
    """Mark each sampled row (the sampling program's ``eval`` rows; greedy ones are left out) ``passed``,
    ``duplicate`` and ``kept``: per prompt, the passing samples best reward first, the same text (whitespace aside)
    once, at most ``max_per_prompt``."""
    rows = [dict(r) for r in rows if not r.get("greedy")]
    by_prompt: dict[int, list[dict]] = {}
    for row in rows:
        row["passed"], row["duplicate"], row["kept"] = bool(row["correct"]), False, False
        by_prompt.setdefault(row["prompt_index"], []).append(row)
    for group in by_prompt.values():
        seen: set[str] = set()
        for row in sorted((r for r in group if r["passed"]), key=lambda r: (-(r["reward"] or 0.0), r["sample"])):
            text = _same_text(row["completion"])
            if text in seen:
                row["duplicate"] = True
            elif len(seen) < max_per_prompt:
                seen.add(text)
                row["kept"] = True
    return rows


def rejection_job_store(*, job: RejectionJob, event: dict) -> RejectionJob:
    """The scored samples of ``event`` (an ``eval`` event of workers.training.evaluate) onto the job, and the kept ones (with
    the mixed-in rows) as a new dataset of the job's owner, with the job's provenance. DatasetError when nothing was
    kept and nothing mixed in."""
    settings = RejectionSettings(**job.settings)
    rows = select_samples(event["rows"], max_per_prompt=settings.max_per_prompt)
    kept = [r for r in rows if r["kept"]]
    mixed = mix_rows(job, settings.mix_rows) if job.mix_version_id and settings.mix_rows else []
    per_prompt: dict[int, list[int]] = {}
    for row in rows:
        per_prompt.setdefault(row["prompt_index"], [0, 0])[0] += 1
        per_prompt[row["prompt_index"]][1] += row["kept"]
    stats = {
        "prompts": event["prompts"],
        "samples": len(rows),
        "passed": sum(r["passed"] for r in rows),
        "kept": len(kept),
        "duplicates": sum(r["duplicate"] for r in rows),
        "mixed_in": len(mixed),
        "kept_share": len(kept) / len(rows) if rows else 0.0,
        "prompts_with_a_kept_sample": sum(1 for _, k in per_prompt.values() if k),
        "kept_share_per_prompt": {str(p): k / n for p, (n, k) in sorted(per_prompt.items())},
        "solved_by": event["solved_by"],
        "seconds": event.get("seconds"),
        "generator": event.get("generator", "transformers"),
    }
    with transaction.atomic():
        RejectionSample.objects.filter(job=job).delete()
        RejectionSample.objects.bulk_create(
            [
                RejectionSample(
                    job=job,
                    prompt_index=r["prompt_index"],
                    sample=r["sample"],
                    prompt=as_text(r["prompt"]),
                    completion=as_text(r["completion"]),
                    rewards=r["rewards"],
                    reward=r["reward"],
                    passed=r["passed"],
                    duplicate=r["duplicate"],
                    kept=r["kept"],
                    length=r.get("length") or 0,
                    truncated=bool(r.get("truncated")),
                    columns=r.get("columns") or {},
                )
                for r in rows
            ]
        )
        job.stats = stats
        job.save(update_fields=["stats"])
    out_rows = [{"prompt": r["prompt"], "completion": r["completion"], **(r.get("columns") or {})} for r in kept]
    out_rows += mixed
    if not out_rows:
        raise DatasetError(
            [f"no sample reached {stats['solved_by']} ≥ {settings.threshold:g}, and nothing was mixed in"]
        )
    common = set.intersection(*(set(r) for r in out_rows))  # mixed-in rows may lack the reward columns
    version = _save_dataset(job, [{k: v for k, v in r.items() if k in common} for r in out_rows])
    version.provenance = {
        "kind": "rejection_sampling",
        "job": job.pk,
        "model": job.model,
        "prompts_from": {
            "dataset_version": job.dataset_version_id,
            "name": str(job.dataset_version),
            "split": job.split,
        },
        "rewards": [{k: r.get(k) for k in ("name", "weight", "version")} for r in job.rewards],
        "solved_by": stats["solved_by"],
        "threshold": settings.threshold,
        "k": settings.k,
        "max_per_prompt": settings.max_per_prompt,
        "kept": len(kept),
        "kept_share": stats["kept_share"],
        "kept_share_per_prompt": stats["kept_share_per_prompt"],
        "mixed_in": {"dataset_version": job.mix_version_id, "name": str(job.mix_version), "rows": len(mixed)}
        if mixed
        else None,
    }
    version.save(update_fields=["provenance"])
    with transaction.atomic():
        if RejectionJob.objects.select_for_update().filter(pk=job.pk, status=RejectionJob.Status.CANCELLED).exists():
            return job  # cancelled while its dataset was saved: the dataset stays, the job stays cancelled
        job.output_version, job.status, job.finished_at = version, RejectionJob.Status.COMPLETED, timezone.now()
        job.save(update_fields=["output_version", "status", "finished_at"])
    return job


def mix_rows(job: RejectionJob, n: int) -> list[dict]:
    """The first ``n`` rows of the job's mix-in version, as prompt-completion rows."""
    path = version_training_file(
        version=job.mix_version, out=job.job_dir / "mix.jsonl", split="all", extra_columns=("completion",)
    )
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if row.get("completion"):
                rows.append({"prompt": row["prompt"], "completion": row["completion"]})
                if len(rows) >= n:
                    break
    return rows


def _save_dataset(job: RejectionJob, rows: list[dict]) -> DatasetVersion:
    with tempfile.TemporaryDirectory(dir=datasets_dir(), prefix=".rejection-") as workdir:
        path = Path(workdir) / "kept.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows), encoding="utf-8")
        return dataset_import(owner=job.owner, name=job.name, path=path, source_name=f"rejection-{job.pk}.jsonl")
