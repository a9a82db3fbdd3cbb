"""Writes of the lifecycle capability: create a run (validated, its rewards checked in the sandbox), queue it, cancel,
resume, retry, and reap the runs whose worker went silent; the owner's tags, notes and pinned curve. Keyword-only functions named <entity>_<action>."""

from __future__ import annotations

import unicodedata
from dataclasses import asdict, replace
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models.functions import Coalesce
from django.utils import timezone
from grpo_web_protocol.config import (
    FROM_FILE,
    FROM_TRAINER,
    SFT_COLUMNS,
    EvalFields,
    config_sources,
    kind_fields,
)

from grpo_web import queues
from rewards.library import source as library_source
from rewards.selectors import environment_problems, environment_spec, reward_specs, tool_problems, tool_specs
from rewards.toolspec import ToolError, environment_signature
from runs.jobs import job_cancel, jobs_redispatch
from runs.lifecycle.spec import RunRefused, RunSpec
from runs.lifecycle.training_config import run_train_config
from runs.lifecycle.trl_yaml import EPOCHS, epoch_steps
from runs.live import publish
from runs.models import DatasetVersion, Run, Worker
from runs.paths import event_log_path, model_problems, supervisor_alive, trainer_alive
from runs.rollouts.ingest import ingest_log


def _env_signature(spec: dict):
    try:
        return environment_signature(
            library_source(spec["builtin"]) if spec.get("builtin") else spec["source"], spec["entrypoint"]
        )
    except ToolError:
        return None  # reported by environment_problems


def run_create(*, owner, spec: RunSpec, queue_anyway: bool = False, check_rewards: bool = True) -> Run:
    """Validate (spec_problems) and store the run. A run with rewards of the user's code is stored as "checking" and
    answered at once: a worker of the checks queue calls each reward on a few rows in the sandbox and builds TRL's
    GRPOConfig, then queues it or refuses it (run_checked). A run of built-ins only is queued now.

    ``check_rewards`` False skips the sandbox contract check (a recipe's next stage, started from inside a worker;
    a faulting reward is still disabled by the sandbox after its faults). A run that asks for GPUs or vLLM is refused
    while no online worker has them, unless ``queue_anyway`` (a worker that is not up yet will take it): at once, where
    the form offers to queue it anyway, saying that its rewards and TRL's checks of its config are still to come (the
    check says a worker gone since with its own refusals)."""
    spec = spec_normalized(spec)
    errors = spec_problems(spec, owner=owner, queue_anyway=True)
    # no worker to take it now: said beside the config's own refusals (TRL's, in the sandbox), never instead of them
    waiting = [] if queue_anyway else placement_problems(spec)
    if errors:
        raise RunRefused(errors + waiting)
    evaluation = EvalFields(**spec.evaluation)  # stored whole when it evaluates, else not at all
    run = spec.as_run(owner=owner, evaluation=asdict(evaluation) if evaluation.eval_steps else {})
    run.queue_anyway = queue_anyway
    # the config the worker will train with, checked by TRL on a checks worker (no GPU, no files yet)
    train = run_train_config(run, slot_base=0, write_files=False)
    run.total_steps = train.max_steps
    checked = check_rewards and any(s.get("source") for s in reward_specs(spec.rewards))
    if waiting:  # said now, where the form offers to queue it anyway
        raise RunRefused(waiting + ([WAITING_CHECK] if checked else []))
    with transaction.atomic():
        if checked:
            run.status = Run.Status.CHECKING
            run.save(force_insert=True)
            transaction.on_commit(lambda: _enqueue_check(run))
        else:
            run.queued_at = timezone.now()
            run.save(force_insert=True)
            transaction.on_commit(lambda: _enqueue(run))
    return run


WAITING_CHECK = (
    "rewards: each is called in the sandbox, and TRL's own checks of the config are made, once the run is started "
    "(queued anyway, or with a worker online)"
)


def run_checked(*, run: Run, problems: list[str]) -> Run:
    """The contract check's verdict on a "checking" run (``problems``: the sandbox's and TRL's refusals): queued, or
    failed with the refusal (and, unless it was queued anyway, why no online worker could take it now). A run
    cancelled or deleted meanwhile is left as it is."""
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run.pk).first()
        if run is None or run.status != Run.Status.CHECKING:
            return run
        waiting = [] if run.queue_anyway else placement_problems(RunSpec.of_run(run))
        refusal = list(problems) + waiting
        if refusal:
            run.status, run.finished_at, run.refusal = Run.Status.FAILED, timezone.now(), refusal
            run.error = "Refused before it was queued (nothing trained):\n" + "\n".join(f"- {p}" for p in refusal)
            run.save(update_fields=["status", "finished_at", "refusal", "error"])
        else:
            run.status, run.queued_at = Run.Status.QUEUED, timezone.now()
            run.save(update_fields=["status", "queued_at"])
            transaction.on_commit(lambda: _enqueue(run))
    publish(run.pk, status=run.status, step=run.step)
    return run


def spec_normalized(spec: RunSpec) -> RunSpec:
    """The spec as it is checked and stored: every config field its kind has (those left out at their default, TRL's
    but for the few grpo-web's own), each with where its value came from; ``max_steps`` -1 (TRL's default: by
    epochs) as the steps its num_train_epochs take; blank evaluation settings left to their defaults; and the
    environment's reward column (TRL's extra reward, weight 1, named after the class: the run's last reward) worked
    out from its code, never taken from the caller."""
    environment = {k: v for k, v in (spec.environment or {}).items() if k != "reward"}
    env_spec = environment_spec(environment) if environment else None
    signature = _env_signature(env_spec) if env_spec else None
    if signature is not None and signature.has_reward:
        environment["reward"] = signature.name
    evaluation = {k: v for k, v in (spec.evaluation or {}).items() if v is not None}
    fields = kind_fields(spec.kind)
    given = {
        k: FROM_TRAINER if v is None else (spec.config_sources or {}).get(k) or FROM_FILE
        for k, v in spec.config.items()
    }
    config = {name: f.default for name, f in fields.items()} | dict(spec.config)
    steps = config.get("max_steps")
    epochs = (spec.config_extra or {}).get("num_train_epochs", EPOCHS)
    if isinstance(steps, int) and steps <= 0 and isinstance(epochs, int | float) and epochs > 0:
        # transformers trains num_train_epochs when max_steps is not above 0: the steps that takes, so the run's
        # progress, checkpoints and evaluations count to a known end
        try:
            config["max_steps"], _ = epoch_steps(
                config, train_rows=spec.dataset_version.train_rows, gpus=spec.requested_gpus, epochs=float(epochs)
            )
        except (TypeError, ValueError, AttributeError):
            pass  # a batch size that is not a number: the config's own check names it
    return replace(
        spec,
        config=config,
        config_sources=config_sources(spec.kind, given),
        tools=list(spec.tools or []),
        environment=environment,
        config_extra=spec.config_extra or {},
        evaluation=evaluation,
    )


def spec_problems(spec: RunSpec, *, owner, queue_anyway: bool = False) -> list[str]:
    """Why ``owner``'s run of ``spec`` would fail, each message naming its field; [] when it would not. Every way of
    starting a run (the form, a YAML, the API, the CLI, a retry, a clone, a recipe's stage) is checked here, by
    run_create; the model must be one ``owner`` may read (runs.paths.model_problems).
    ``queue_anyway``: no refusal for want of an online worker with the GPUs, vLLM or Ray cluster asked for."""
    spec = spec_normalized(spec)
    version, trainer = spec.dataset_version, spec.trainer
    if version is None:  # only a run trained elsewhere has none (runs.attach)
        return ["dataset_version: a run trained here needs a dataset version"]
    try:
        train = run_train_config(spec.as_run(), slot_base=0, write_files=False)
    except TypeError as exc:  # a field the kind does not have
        return [f"config: {exc}"]
    tool_spec_list = tool_specs(spec.tools)
    env_spec = environment_spec(spec.environment) if spec.environment else None
    env_signature = _env_signature(env_spec) if env_spec else None
    errors = (
        train.validate()
        + model_problems(spec.model, user=owner)
        + engine_problems(spec.engine, spec.num_workers, queue_anyway=True)
        + tool_problems(tool_spec_list)
        + environment_problems(env_spec)
    )
    if trainer == Run.Trainer.VERL and spec.requested_gpus < 1:
        errors.append("trainer: verl generates with vLLM on GPUs; ask for at least one GPU (or train with trl)")
    errors += vllm_on_cpu_problems(spec)
    if spec.tools and trainer == Run.Trainer.VERL:
        errors.append("tools: a verl run calls no tools here; train with trl to attach tools")
    if spec.environment and trainer == Run.Trainer.VERL:
        errors.append("environment: a verl run has no environments here; train with trl to attach one")
    if env_spec and tool_spec_list:
        clash = {t["entrypoint"] for t in tool_spec_list} & {
            m.name for m in (env_signature.methods if env_signature else ())
        }
        errors += [
            f"tools: the tool {name!r} and the environment's method {name!r} share a name; the model could "
            f"not tell them apart"
            for name in sorted(clash)
        ]
    if spec.environment and not spec.tools and version.prompt_format != DatasetVersion.PromptFormat.CONVERSATIONAL:
        errors.append(
            f"environment: TRL calls an environment's tools only in chat conversations, and "
            f"{version}'s prompts are text; map the prompt as conversational on the dataset's "
            f"mapping page, or pick the arithmetic-tools demo"
        )
    if spec.tools and version.prompt_format != DatasetVersion.PromptFormat.CONVERSATIONAL:
        errors.append(
            f"tools: TRL calls tools only in chat conversations, and {version}'s prompts are text; "
            f"map the prompt as conversational on the dataset's mapping page, "
            f"or pick the arithmetic-tools demo"
        )
    if spec.kind == Run.Kind.SFT:
        errors += sft_dataset_problems(version)
    if not queue_anyway:
        errors += placement_problems(spec)
    for r in spec.rewards:
        if r.get("builtin") == "code_tests" and not {"tests", "verification_info"} & set(version.reward_columns or []):
            errors.append(
                f"code_tests: {version} has no `tests` column reaching the rewards (asserts or "
                f"stdin/stdout pairs per row), nor open-r1's `verification_info`; pick a dataset with one, such as "
                f"the python tasks demo"
            )
    if train.evaluation.eval_steps and not version.eval_rows:
        errors.append(
            f"eval_steps: {version} has no eval split; map one on the dataset's mapping page, or set eval_steps to 0"
        )
    return errors


def placement_problems(spec: RunSpec) -> list[str]:
    """Why no online worker could take ``spec``'s run now (the GPUs, vLLM or Ray cluster it asks for); what
    ``queue_anyway`` waives."""
    config = spec.config or {}
    use_vllm = bool(config.get("use_vllm"))
    server = use_vllm and config.get("vllm_mode") == "server" and spec.requested_gpus > 0
    # an online Ray worker, once the engine's fields are valid (spec_problems names them otherwise)
    valid = not engine_problems(spec.engine, spec.num_workers, queue_anyway=True)
    ray = engine_problems(spec.engine, spec.num_workers) if valid else []
    return ray + capacity_problems(
        gpus=spec.requested_gpus + server, use_vllm=use_vllm and spec.trainer != Run.Trainer.VERL
    )


def sft_dataset_problems(version: DatasetVersion) -> list[str]:
    """SFT trains on prompt-completion rows (a ``completion`` column beside the mapped prompt) or conversations (a
    ``messages`` column)."""
    if any(c in version.columns for c in SFT_COLUMNS):
        return []
    return [
        f"dataset_version: {version} has neither a 'completion' column (prompt-completion rows) nor a 'messages' "
        f"column (conversations) (columns: {', '.join(version.columns)}); SFT needs one of them"
    ]


def engine_problems(engine: str, num_workers: int, queue_anyway: bool = False) -> list[str]:
    """A run's engine: "local" trains in one worker's process (or one per GPU); "ray" on a Ray cluster, where a
    worker serving the "training-ray" queue submits it (refused while none is online, unless ``queue_anyway``)."""
    if engine not in ("local", "ray"):
        return [f"engine: {engine!r} is not one of local, ray"]
    if not isinstance(num_workers, int) or isinstance(num_workers, bool) or not 1 <= num_workers <= 256:
        return [f"num_workers: {num_workers!r} is not a whole number from 1 to 256"]
    if engine == "local":
        return (
            []
            if num_workers == 1
            else [
                "num_workers: only a Ray run has several workers (engine: ray); a local "
                "run uses one process per requested GPU"
            ]
        )
    queue = queues.training_queue(0, engine)
    if queue_anyway or any(queue in w.queues for w in Worker.objects.all() if w.online):
        return []
    return [
        "engine: no online worker serves a Ray cluster; start one with RAY_ADDRESS set (`manage.py run_worker`), "
        "or queue anyway for a worker that is not up yet"
    ]


def vllm_on_cpu_problems(spec) -> list[str]:
    """What vLLM's CPU build cannot do for a TRL run without a GPU, whatever the workers: TRL's server mode syncs the
    trained weights into the server over NCCL, a GPU-only transport; a Ray run's CPU workers have no vLLM here."""
    if not spec.config.get("use_vllm") or spec.requested_gpus > 0 or spec.trainer == Run.Trainer.VERL:
        return []
    if spec.config.get("vllm_mode") == "server":
        return [
            "vllm_mode: server mode needs a GPU: TRL sends the trained weights to its vLLM server through vLLM's "
            "NCCL weight-transfer engine, which needs a CUDA device (the server itself starts and generates on CPU); "
            "on CPU use vllm_mode colocate (vLLM inside the trainer), or ask for GPUs"
        ]
    if spec.engine == "ray":
        return ["use_vllm: a Ray run generates with vLLM on GPUs only; on CPU train on the local engine"]
    return []


def capacity_problems(*, gpus: int, use_vllm: bool) -> list[str]:
    """Why no online worker could take a run that asks for ``gpus`` GPUs (and vLLM); [] when one could. A CPU run
    is never refused here: any training worker takes it. A CPU run with vLLM needs a CPU worker that has vLLM's
    CPU build (``manage.py run_worker --vllm-cpu``)."""
    if gpus <= 0 and not use_vllm:
        return []
    online = [w for w in Worker.objects.all() if w.online]
    queue = queues.training_queue(gpus, vllm=use_vllm)
    fits = [w for w in online if queue in w.queues and len(w.gpus) >= gpus]
    if not fits and gpus <= 0:  # use_vllm: a CPU run with vLLM
        return [
            "use_vllm: no online CPU worker has vLLM's CPU build; start one with `manage.py run_worker "
            "--vllm-cpu` (it builds it once: bash scripts/vllm_cpu.sh), ask for GPUs, or queue anyway"
        ]
    if not fits:
        seen = ", ".join(f"{w.name} ({len(w.gpus)} GPU{'s' if len(w.gpus) != 1 else ''})" for w in online)
        return [
            f"requested_gpus: no online worker has {gpus} GPU{'s' if gpus != 1 else ''} "
            f"(online: {seen or 'none'}); start one with `manage.py run_worker`, or queue anyway for a worker "
            f"that is not up yet"
        ]
    if use_vllm and not any(w.vllm for w in fits):
        return [
            f"use_vllm: no online worker with {gpus} GPU{'s' if gpus != 1 else ''} has vLLM installed "
            f"(pip install '.[gpu]' there), or queue anyway"
        ]
    return []


def _enqueue_check(run: Run) -> None:
    queues.enqueue(queues.RUN_CHECK, args=[run.pk], queue=queues.CHECKS_QUEUE)


def _enqueue(run: Run) -> None:
    # a vLLM server takes a GPU of its own: the run goes to workers that have one more
    vllm = bool((run.config or {}).get("use_vllm")) and run.trainer != Run.Trainer.VERL
    queues.enqueue(queues.TRAIN_RUN, args=[run.pk], queue=queues.training_queue(run.gpus_needed, run.engine, vllm=vllm))


def run_redispatch(*, grace_seconds: float = 30) -> list[Run]:
    """The database is the source of truth for queued work: queue again every run it holds as queued (for longer
    than ``grace_seconds``) whose message the broker no longer has (a Redis restarted without its data, a message
    lost). The claim is idempotent, so a message sent twice never trains a run twice. Likewise a run held as
    "checking" whose check the broker lost is sent to the checks queue again (a check of a run no longer checking
    does nothing). Returns the runs sent again."""
    since = timezone.now() - timedelta(seconds=grace_seconds)
    checking = list(Run.objects.filter(status=Run.Status.CHECKING, created_at__lt=since))
    # a resumed run waits from when it was queued again
    lost_checks = queues.resend_lost(queues.RUN_CHECK, checking, _enqueue_check, queues.CHECKS_QUEUE)
    return lost_checks + jobs_redispatch(
        Run.objects.all(),
        task=queues.TRAIN_RUN,
        enqueue=_enqueue,
        grace_seconds=grace_seconds,
        queued_since=Coalesce("queued_at", "created_at"),
    )


def run_cancel(*, run: Run) -> Run:
    """Queued: cancelled at once. Running: flagged; the supervisor stops the training process within seconds and
    keeps everything already ingested. A run trained elsewhere cannot be stopped from here: it is marked cancelled
    (what its source sends later is still stored)."""
    if run.is_external:
        with transaction.atomic():
            run = Run.objects.select_for_update().get(pk=run.pk)
            if not run.is_finished:
                run.status, run.finished_at = Run.Status.CANCELLED, timezone.now()
                run.save(update_fields=["status", "finished_at"])
        return run
    return job_cancel(job=run, stop_running=_request_cancel)


def _request_cancel(run: Run) -> None:
    if run.cancel_requested_at is None:
        run.cancel_requested_at = timezone.now()
        run.save(update_fields=["cancel_requested_at"])


def run_resume(*, run: Run) -> Run:
    """A failed or cancelled run with a checkpoint continues from it: same run, same step numbering, attempt + 1."""
    if run.is_external:
        raise RunRefused(["a run trained elsewhere resumes where it was trained, from its own checkpoint"])
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status not in (Run.Status.FAILED, Run.Status.CANCELLED) or not run.resumable:
            raise RunRefused(["only a failed or cancelled run with a checkpoint can be resumed"])
        if run.checkpoint_step >= run.total_steps:
            # every step is trained and saved (the process died after its last checkpoint): nothing to resume
            run.status, run.error, run.resumable, run.step = Run.Status.COMPLETED, "", False, run.total_steps
            run.save(update_fields=["status", "error", "resumable", "step"])
            return run
        run.status, run.attempt, run.error, run.resumable = Run.Status.QUEUED, run.attempt + 1, "", False
        run.finished_at = run.cancel_requested_at = None
        run.queued_at = timezone.now()
        run.save(
            update_fields=["status", "attempt", "error", "resumable", "finished_at", "cancel_requested_at", "queued_at"]
        )
        transaction.on_commit(lambda: _enqueue(run))
    return run


def run_retry(*, run: Run) -> Run:
    """Run the same configuration again from scratch, as a new run that remembers where it came from."""
    if run.is_external:
        raise RunRefused(["a run trained elsewhere has no dataset version here to train on again"])
    return run_create(owner=run.owner, spec=replace(RunSpec.of_run(run), name=f"{run.name} (retry)", parent=run))


def run_reap_stale(*, now=None, timeout: float | None = None) -> list[Run]:
    """Running runs whose supervisor went silent (a worker killed, a machine lost): ingest what their event log holds,
    then mark them failed, resumable where a checkpoint exists. Called by every worker's heartbeat.

    A run whose supervisor is dead (its lock is free: runs.paths.supervisor_alive) and whose folder nothing holds is
    failed as soon as its heartbeat is Run.STALE_SECONDS old; one whose supervisor this machine cannot see is failed
    once nothing holds its folder and it has been silent for Run.SILENT_SECONDS. One whose folder lock is still held
    (a paused or stuck supervisor, its trainer still training) is never failed, since resuming it would train its
    steps twice: its page says what it is. A run whose folder this machine cannot check waits for
    GRPO_HEARTBEAT_TIMEOUT."""
    now = now or timezone.now()
    timeout = settings.GRPO_HEARTBEAT_TIMEOUT if timeout is None else timeout
    limit, silent = now - timedelta(seconds=timeout), now - timedelta(seconds=min(Run.SILENT_SECONDS, timeout))
    stale = now - timedelta(seconds=min(Run.STALE_SECONDS, timeout))
    reaped = []
    for run_id in Run.objects.filter(status=Run.Status.RUNNING, heartbeat_at__lt=stale).values_list("pk", flat=True):
        with transaction.atomic():
            run = (
                Run.objects.select_for_update(skip_locked=True)
                .filter(pk=run_id, status=Run.Status.RUNNING, heartbeat_at__lt=stale)
                .first()
            )
            if run is None:
                continue
            alive = trainer_alive(run)
            if alive:
                continue
            # the row is locked and still running, so a supervisor whose lock is free died before it said how it ended
            lost = supervisor_alive(run) is False
            if not lost and (run.heartbeat_at >= silent or (alive is None and run.heartbeat_at >= limit)):
                continue

            _, events = ingest_log(run, event_log_path(run))
            if any(e["type"] == "finished" for e in events):
                run.mark_completed()  # training finished; only its supervisor died before saying so
                reaped.append(run)
                continue
            seconds = int((now - run.heartbeat_at).total_seconds())
            run.mark_failed(f"the worker {run.worker_name or ''} stopped responding (no heartbeat for {seconds} s)")
            reaped.append(run)
    return reaped


# --- inspection: the reflection phrase list, rejection sampling ---------------------------------------------------


# --- the owner's labels on a run: tags, notes, the Overview's pinned curve -------------------------------------

MAX_TAGS = 8
TAG_LENGTH = 32
NOTES_LENGTH = 5000
METRIC_LENGTH = 200


def _control(text: str) -> bool:
    """Whether ``text`` holds a control or format character (a line break, a bidi override...)."""
    return any(unicodedata.category(c) in ("Cc", "Cf") for c in text)


def split_tags(text: str) -> list[str]:
    """The tags of a form's text field: separated by commas, blanks dropped."""
    return [t.strip() for t in text.split(",") if t.strip()]


def annotation_problems(*, tags: list[str] | None = None, notes: str | None = None, pinned_metric: str | None = None):
    """What is wrong with tags, notes or a pinned metric's name, each naming its field; [] when they may be saved."""
    problems = []
    if tags is not None:
        if len(tags) > MAX_TAGS:
            problems.append(f"tags: at most {MAX_TAGS} tags (got {len(tags)})")
        for tag in tags[: MAX_TAGS + 1]:
            shown = tag[:TAG_LENGTH] + ("…" if len(tag) > TAG_LENGTH else "")
            if not tag.strip():
                problems.append("tags: a tag may not be blank")
            elif len(tag) > TAG_LENGTH:
                problems.append(f"tags: {shown!r} is longer than {TAG_LENGTH} characters")
            elif "," in tag or _control(tag):
                problems.append(f"tags: {shown!r} holds a comma or a control character")
    if notes is not None:
        if len(notes) > NOTES_LENGTH:
            problems.append(f"notes: at most {NOTES_LENGTH} characters (got {len(notes)})")
        if "\x00" in notes:
            problems.append("notes: a NUL character is not allowed")
    if pinned_metric is not None and (len(pinned_metric) > METRIC_LENGTH or _control(pinned_metric)):
        problems.append(
            f"pinned_metric: a metric name of at most {METRIC_LENGTH} characters, without control characters"
        )
    return problems


def run_annotate(
    *, run: Run, tags: list[str] | None = None, notes: str | None = None, pinned_metric: str | None = None
) -> Run:
    """Set the run's tags, notes and the metric pinned to its Overview ("" unpins; a name, not checked against what
    the run logged: a running run may log it later). None leaves a field as it is. All or nothing: RunRefused names
    each bad field."""
    notes = None if notes is None else notes.replace("\r\n", "\n")  # a form's line breaks count one each
    problems = annotation_problems(tags=tags, notes=notes, pinned_metric=pinned_metric)
    if problems:
        raise RunRefused(problems)
    fields = []
    if tags is not None:
        kept: dict[str, str] = {}
        for tag in tags:
            kept.setdefault(tag.strip().casefold(), tag.strip())  # one of each, as first spelled
        run.tags = ", ".join(kept.values())
        fields.append("tags")
    if notes is not None:
        run.notes = notes
        fields.append("notes")
    if pinned_metric is not None:
        run.pinned_metric = pinned_metric
        fields.append("pinned_metric")
    if fields:
        run.save(update_fields=fields)
    return run
