"""The Django side of a run: start the training program as its own process, ingest its event log, keep the run's
status true (heartbeat, cancel, checkpoints, crashes). The training process never imports Django; this module never
imports torch.

The event log decouples the two: training goes on while the database or Redis is briefly away, and whatever the log
holds is ingested when they are back, when the run is resumed, or when a reaper finds the run abandoned.
"""

from __future__ import annotations

import ctypes
import fcntl
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, InterfaceError, OperationalError, close_old_connections, transaction
from django.utils import timezone

from rewards.sandbox.host import MAX_SLOT
from rewards.selectors import environment_spec, reward_specs, tool_specs
from runs.datasets.services import version_training_file
from runs.evaluations.services import eval_source, store_eval_event
from runs.live import publish
from runs.models import Evaluation, Rollout, Run, StepMetric
from runs.paths import checkpoint_path, event_log_path, log_tail, resolve_model
from runs.protocol.config import SFT_COLUMNS, EvalFields, GRPOFields, RewardSpec, SFTFields, ToolSpec, TrainConfig
from runs.rollouts.ingest import Fenced, ingest_log
from runs.telemetry.sampler import RaySampler, ResourceSampler

log = logging.getLogger(__name__)

# What the training process may see of our environment: nothing secret (no DATABASE_URL, SECRET_KEY, REDIS_URL).
PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
              "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "VIRTUAL_ENV", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
POLL_SECONDS = 0.25
CONTROL_SECONDS = 1.0  # how often the cancel flag is read and the heartbeat written
FOLDER_LOCK_WAIT = 60.0  # seconds a new attempt waits for an old trainer to let go of the run folder
DB_ERRORS = (OperationalError, InterfaceError)


def train_config(run: Run, vllm_server_port: int | None = None) -> TrainConfig:
    from runs.evaluations.services import eval_settings, eval_source

    checkpoint = checkpoint_path(run)
    evaluation = eval_settings(run)
    evaluate = evaluation.eval_steps > 0 and run.dataset_version.eval_rows > 0
    if run.is_sft:
        # an SFT run's evaluations sample with GRPO's generation defaults, seeded like the run
        fields = dict(sft=SFTFields(**run.config), grpo=GRPOFields(seed=run.config.get("seed", 42)))
    else:
        fields = dict(grpo=GRPOFields(**run.config))
    return TrainConfig(
        model=resolve_model(run.model),
        dataset_path=version_training_file(version=run.dataset_version, out=run.run_dir / "train.jsonl",
                                           extra_columns=SFT_COLUMNS if run.is_sft else ()),
        output_dir=str(run.run_dir / "output"),
        event_log=str(event_log_path(run)),
        rewards=[RewardSpec(**r) for r in reward_specs(run.rewards)],
        tools=[ToolSpec(**t) for t in tool_specs(run.tools)],
        environment=ToolSpec(**environment_spec(run.environment)) if run.environment else None,
        kind=run.kind,
        trainer=run.trainer,
        **fields,
        extra=run.config_extra,
        max_reward_faults=settings.GRPO_REWARD_MAX_FAULTS,
        allow_weak_sandbox=settings.GRPO_SANDBOX_ALLOW_WEAK,
        sandbox_slot_base=run.ray_slot_base if run.engine == "ray" else _slot_base(),
        resume_from_checkpoint=str(checkpoint) if checkpoint else None,
        vllm_server_port=vllm_server_port,
        evaluation=evaluation,
        eval_dataset_path=version_training_file(version=run.dataset_version, out=run.run_dir / "eval.jsonl",
                                                split="eval")
        if evaluate else None,
        eval_source=eval_source(run.dataset_version),
        tokens_dir=None if run.is_sft else str(run.run_dir / "tokens"),
        token_sample_groups=run.token_sample_groups,
    )


SLOTS_PER_PROCESS = 128


def _slot_base() -> int:
    """Sandbox slots of this worker process's runs: 100 + 128 per Celery pool process, clear of the sandbox queue's;
    a run's ranks and reward functions share the 128 (workers.rewarding.rank_slot)."""
    from billiard.process import current_process

    return 100 + SLOTS_PER_PROCESS * (getattr(current_process(), "index", 0) or 0)


# Ray runs' sandbox slots: from 2200 (clear of the reward tests' 1.., the Celery pool processes' runs at 100 + 128 x
# index and the replays' at 2000 + 16 x index) to the sandbox's last slot, in ranges of 128: 14 live Ray runs at once
RAY_SLOT_FIRST = 2200
RAY_SLOT_RANGES = range(RAY_SLOT_FIRST, MAX_SLOT + 2 - SLOTS_PER_PROCESS, SLOTS_PER_PROCESS)


class NoSlots(RuntimeError):
    pass


def ray_slot_base(run: Run) -> int:
    """The first sandbox slot (uid 61000 + slot) of a Ray run's attempt. Its sandboxes start on the cluster's nodes,
    beside other Ray runs' submitted by any worker, so the range is allocated in the database: the lowest range no
    other live attempt holds, kept unique among live attempts (lease set) by a constraint, so two supervisors that
    pick the same range at once cannot both keep it. Raises NoSlots when every range is held."""
    held = set(Run.objects.filter(lease__isnull=False, ray_slot_base__isnull=False).exclude(pk=run.pk)
               .values_list("ray_slot_base", flat=True))
    for base in RAY_SLOT_RANGES:
        if base in held:
            continue
        try:
            with transaction.atomic():
                kept = Run.objects.filter(pk=run.pk, lease=run.lease).update(ray_slot_base=base)
        except IntegrityError:  # another attempt took it since the read above
            continue
        if not kept:
            raise Fenced(f"run {run.pk}: the attempt was taken from this supervisor")
        run.ray_slot_base = base
        return base
    raise NoSlots(f"every sandbox slot range for Ray runs is held: {len(RAY_SLOT_RANGES)} Ray runs are running; "
                  f"resume this one when one ends")


def training_env() -> dict[str, str]:
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    env["PYTHONPATH"] = str(settings.BASE_DIR)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def claim(run_id: int, worker_name: str) -> Run | None:
    """Move a queued run to running under a new lease (this supervisor's token); None if it is gone or no longer
    queued (cancelled, or a redelivery).

    A resumed run (attempt > 1) drops what the abandoned attempt stored after its checkpoint: the resumed attempt
    trains those steps again, so keeping both would duplicate them.
    """
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.status != Run.Status.QUEUED:
            return None
        if run.attempt > 1:
            Rollout.objects.filter(run=run, step__gt=run.checkpoint_step).delete()
            StepMetric.objects.filter(run=run, step__gt=run.checkpoint_step).delete()
            Evaluation.objects.filter(run=run, kind=Evaluation.Kind.PERIODIC, step__gt=run.checkpoint_step).delete()
            run.step = run.checkpoint_step
        run.worker_name, run.heartbeat_at, run.event_offset, run.lease = worker_name, timezone.now(), 0, uuid.uuid4()
        run.ray_slot_base = None  # an earlier attempt's range: a Ray attempt takes one when it starts
        run.save(update_fields=["worker_name", "heartbeat_at", "event_offset", "step", "lease", "ray_slot_base"])
        run.mark_running()
        return run


def push(run: Run, **extra) -> None:
    """Tell open pages; live updates are best effort, so a Redis outage never stops a run."""
    try:
        publish(run.pk, status=run.status, step=run.step, **extra)
    except Exception as exc:  # redis.ConnectionError and friends
        log.warning("run %s: live update not sent: %s", run.pk, exc)


def ingest_and_push(run: Run, lease=None) -> list[dict]:
    changed, events = ingest_log(run, event_log_path(run), lease=lease)
    if events:
        push(run, steps=changed["steps"], rollouts=changed["rollouts"], evaluations=changed["evaluated"])
    return events


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """In a child, before exec: ``sig`` when its parent dies (a parent killed with -9 included). The training
    process gets SIGKILL when its supervisor dies; the demo's servers get SIGTERM when the demo does."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, sig)  # PR_SET_PDEATHSIG


def training_command(run: Run, config_path: Path) -> list[str]:
    if run.trainer == Run.Trainer.VERL:
        # verl places its own workers on the run's GPUs (through Ray): one program, whatever their number
        return [sys.executable, "-m", "workers.verl_run", str(config_path)]
    if run.requested_gpus > 1:
        # several GPUs: one process per GPU through accelerate, as TRL documents
        return [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(run.requested_gpus),
                "-m", "workers.train", str(config_path)]
    return [sys.executable, "-m", "workers.train", str(config_path)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def visible_gpus() -> list[str]:
    """The GPUs this worker may use: CUDA_VISIBLE_DEVICES when set, else every GPU nvidia-smi lists."""
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        return [g for g in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if g.strip()]
    from workers.registry import detect_gpus

    return [str(g["index"]) for g in detect_gpus()]


def gpu_plan(run: Run, visible: list[str]) -> tuple[list[str], str | None]:
    """(the training processes' GPUs, the vLLM server's GPU or None): the first ``requested_gpus`` visible GPUs
    train; in server mode the next one serves, so the server never shares a GPU with training rank 0."""
    if run.requested_gpus <= 0 or not visible:
        return [], None  # a CPU worker that took a GPU run's queue (a test, a routing by hand) trains on its CPU
    if len(visible) < run.gpus_needed:
        raise RuntimeError(f"this worker sees {len(visible)} GPU(s) ({','.join(visible) or 'none'}) but the run "
                           f"needs {run.gpus_needed}" + (" (one of them for the vLLM server)" if run.vllm_server
                                                         else ""))
    train = visible[:run.requested_gpus]
    return train, visible[run.requested_gpus] if run.vllm_server else None


def start_vllm_server(run: Run, log_file, device: str | None) -> tuple[subprocess.Popen, int]:
    """vllm_mode="server": TRL's vLLM server on ``device``, a GPU training does not see (gpu_plan)."""
    port = _free_port()
    env = training_env()
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = device
    proc = subprocess.Popen([sys.executable, "-m", "trl.scripts.vllm_serve", "--model", resolve_model(run.model),
                             "--port", str(port)], cwd=settings.BASE_DIR, env=env, stdout=log_file,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
    deadline = time.monotonic() + settings.GRPO_VLLM_START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the vLLM server exited with code {proc.returncode}")
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/health/", timeout=2).status == 200:
                return proc, port
        except OSError:
            time.sleep(2)
    proc.kill()
    raise RuntimeError(f"the vLLM server did not answer within {settings.GRPO_VLLM_START_TIMEOUT} s")


def stop(proc: subprocess.Popen, grace: float = 3.0) -> None:
    """SIGTERM the process group, then SIGKILL what is left after ``grace`` seconds. A Ray run's job: stop_job."""
    if proc.poll() is not None:
        return
    if proc.pid is None:  # a workers.rayjobs.RayJob
        proc.stop()
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def lock_folder(folder: Path, wait: float) -> int:
    """An exclusive lock on the run folder, as an open file descriptor; the training process inherits it, so the
    folder stays locked while either lives. RuntimeError when another trainer still holds it after ``wait`` s."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / "trainer.lock", os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise RuntimeError("another trainer still holds this run's folder (a supervisor that lost the run is "
                                   "stopping it); resume again in a minute") from None
            time.sleep(0.5)


def held(run: Run, lease) -> Run | None:
    """The run, locked for this transaction, when it is still held under ``lease``; else None (fenced)."""
    return Run.objects.select_for_update().filter(pk=run.pk, lease=lease).first()


class Supervisor:
    """Watches one attempt of one run: ingest, heartbeat, cancel, outcome. Every write is fenced by the lease it
    claimed the run under: once the attempt is taken from it (reaped), it writes nothing and stops its trainer."""

    def __init__(self, run: Run):
        self.run = run
        self.lease = run.lease
        self.log_path = run.run_dir / "train.log"
        self.outcome: dict = {}
        self.cancelled = False
        self.db_down_since: float | None = None
        self.next_control = 0.0
        self.gpus: str | None = None  # the run's GPUs, once start() has placed it

    def start(self) -> subprocess.Popen:
        run = self.run
        self.folder_lock = lock_folder(run.run_dir, FOLDER_LOCK_WAIT)
        if run.engine == "ray":
            return self.start_ray()
        with open(self.log_path, "ab") as log_file:
            port = None
            self.vllm = None
            env = training_env()
            train_gpus, server_gpu = gpu_plan(run, visible_gpus()) if run.requested_gpus > 0 else ([], None)
            if train_gpus:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(train_gpus)  # training (and its telemetry) sees only these
            self.gpus = ",".join(train_gpus + ([server_gpu] if server_gpu else [])) or None
            if run.vllm_server:
                self.vllm, port = start_vllm_server(run, log_file, server_gpu)
            config_path = run.run_dir / f"train_config-{run.attempt}.json"
            config_path.write_text(train_config(run, vllm_server_port=port).to_json())
            return subprocess.Popen(
                training_command(run, config_path), cwd=settings.BASE_DIR, env=env, stdout=log_file,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=die_with_parent, pass_fds=(self.folder_lock,),
            )

    def start_ray(self):
        """Submit the attempt to the worker's Ray cluster (workers.rayjobs); the cluster places its GPUs."""
        from workers.rayjobs import RayJob

        run, self.vllm = self.run, None
        if not settings.GRPO_RAY_ADDRESS:
            raise RuntimeError("this worker has no Ray cluster (RAY_ADDRESS is not set)")
        if run.vllm_server:
            raise RuntimeError("vLLM server mode is not available on Ray runs; use colocate mode")
        ray_slot_base(run)
        config_path = run.run_dir / f"train_config-{run.attempt}.json"
        config_path.write_text(train_config(run).to_json())
        return RayJob(settings.GRPO_RAY_ADDRESS, run, config_path, training_env(), self.log_path,
                      telemetry_seconds=settings.GRPO_TELEMETRY_SECONDS)

    def tick(self, proc: subprocess.Popen) -> None:
        """One pass: ingest what is new; sample resources when due; every CONTROL_SECONDS, heartbeat and read the
        cancel flag."""
        for event in ingest_and_push(self.run, lease=self.lease):
            if event["type"] in ("finished", "failed"):
                self.outcome = event
        self.sampler.tick()
        if time.monotonic() >= self.next_control:
            self.next_control = time.monotonic() + CONTROL_SECONDS
            if not Run.objects.filter(pk=self.run.pk, lease=self.lease).update(heartbeat_at=timezone.now()):
                raise Fenced(f"run {self.run.pk}: the attempt was taken from this supervisor")
            if not self.cancelled and Run.objects.filter(pk=self.run.pk, cancel_requested_at__isnull=False).exists():
                self.cancelled = True
                stop(proc)

    def watch(self, proc: subprocess.Popen) -> None:
        # a Ray job's processes are on the cluster's nodes: its ranks measure themselves and write rank files
        self.sampler = ResourceSampler(self.run, proc.pid, gpus=self.gpus) if proc.pid else \
            RaySampler(self.run, proc.telemetry_dir)
        while True:
            exited = proc.poll() is not None  # read the exit status first so the last ingest sees every event
            try:
                self.tick(proc)
                self.db_down_since = None
            except DB_ERRORS as exc:
                # The database is away: training goes on, the event log keeps everything for the next tick.
                close_old_connections()
                self.db_down_since = self.db_down_since or time.monotonic()
                log.warning("run %s: database unavailable (%s); will ingest when it is back", self.run.pk, exc)
                if time.monotonic() - self.db_down_since > settings.GRPO_DB_OUTAGE_GRACE:
                    stop(proc)
                    raise
                time.sleep(1.0)
                continue
            if exited:
                return
            time.sleep(POLL_SECONDS)

    def finish(self, proc: subprocess.Popen) -> None:
        if self.vllm is not None:
            stop(self.vllm)
        with transaction.atomic():
            run = held(self.run, self.lease)
            if run is None:
                log.warning("run %s: the attempt was taken from this supervisor; its outcome is not recorded",
                            self.run.pk)
                return
            if self.cancelled:
                run.mark_cancelled()
            elif proc.returncode == 0 and self.outcome.get("type") == "finished":
                run.mark_completed()
            else:
                error = self.outcome.get("error") or getattr(proc, "error", "") or \
                    f"the training process exited with code {proc.returncode}"
                run.mark_failed(error, log_tail(self.log_path))
        push(run, steps=[], rollouts=0)

    def fail(self, error: str) -> None:
        """Fail the run, if this supervisor still holds it."""
        close_old_connections()
        with transaction.atomic():
            run = held(self.run, self.lease)
            if run is not None:
                run.mark_failed(error, log_tail(self.log_path))
        if run is not None:
            push(run, steps=[], rollouts=0)

    def close(self) -> None:
        if getattr(self, "folder_lock", None) is not None:
            os.close(self.folder_lock)
            self.folder_lock = None


def supervise(run_id: int, worker_name: str = "") -> None:
    run = claim(run_id, worker_name)
    if run is None:
        log.info("run %s is not queued; nothing to do", run_id)
        return
    push(run, steps=[], rollouts=0)
    supervisor = Supervisor(run)
    try:
        try:
            proc = supervisor.start()
        except Exception as exc:
            log.exception("run %s: could not start", run.pk)
            supervisor.fail(f"could not start training: {exc}")
            return
        try:
            supervisor.watch(proc)
        except Fenced:
            # Reaped while this supervisor was away (paused, cut off): the run is someone else's now. Stop the trainer,
            # change nothing.
            log.warning("run %s: the attempt was taken from this supervisor; stopping its trainer", run.pk)
            stop(proc)
            return
        except Exception as exc:
            # Ingest failed for good (a bad event, a long database outage): stop rather than train unobserved.
            log.exception("run %s: supervision failed", run.pk)
            stop(proc)
            supervisor.fail(f"supervision failed: {type(exc).__name__}: {exc}")
            return
        supervisor.finish(proc)
    finally:
        supervisor.close()
        advance_recipes()


def advance_recipes() -> None:
    """A run, job or evaluation has ended: a recipe waiting on it starts its next stage now (the heartbeat would
    within a beat)."""
    from runs.recipes.services import recipes_advance

    try:
        recipes_advance()
    except Exception:  # never let a recipe's trouble fail the work that just ended; the next beat tries again
        log.exception("advancing recipes failed")


def _claim(evaluation_id: int) -> Evaluation | None:
    with transaction.atomic():
        evaluation = (Evaluation.objects.select_for_update().select_related("run", "dataset_version__dataset")
                      .filter(pk=evaluation_id).first())
        if evaluation is None or evaluation.status != Evaluation.Status.QUEUED:
            return None
        evaluation.status = Evaluation.Status.RUNNING
        evaluation.save(update_fields=["status"])
        return evaluation


class Cancelled(Exception):
    """The row a program works for was cancelled; its process was stopped."""


def run_eval_program(job, config_path: Path, log_path: Path, *, what: str, cancelled=lambda: False) -> dict:
    """Run ``python -m workers.evaluate`` on ``job`` (an EvalJob) in its own process; return its ``"eval"`` event, or
    raise RuntimeError with the program's own error. Every CONTROL_SECONDS ``cancelled()`` is asked; True stops the
    process (and the sandboxes it started: its own session) and raises Cancelled."""
    from runs.protocol.events import read_events

    config_path.write_text(job.to_json())
    with open(log_path, "ab") as log_file:
        proc = subprocess.Popen([sys.executable, "-m", "workers.evaluate", str(config_path)],
                                cwd=settings.BASE_DIR, env=training_env(), stdout=log_file,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=die_with_parent)
        try:
            while True:
                try:
                    code = proc.wait(timeout=CONTROL_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    try:
                        stop_now = cancelled()
                    except DB_ERRORS:  # the database is briefly away: the program goes on, ask again next time
                        close_old_connections()
                        stop_now = False
                    if stop_now:
                        stop(proc)
                        raise Cancelled(f"the {what} was cancelled") from None
        except BaseException:
            stop(proc)  # a Celery time limit or a worker shutdown: never leave the program running unwatched
            raise
    events, _ = read_events(job.event_log)
    result = next((e for e in events if e["type"] == "eval"), None)
    if code != 0 or result is None:
        failure = next((e for e in events if e["type"] == "failed"), {})
        raise RuntimeError(failure.get("error") or f"the {what} process exited with code {code}")
    return result


def run_evaluation(evaluation_id: int) -> None:
    """The worker's side of a standalone evaluation: write the eval prompts, run ``python -m workers.evaluate`` in
    its own process, store its ``"eval"`` event."""
    from workers.evaluate import EvalJob  # the evaluation program's job file; no torch at import

    evaluation = _claim(evaluation_id)
    if evaluation is None:
        return
    run = evaluation.run
    folder = evaluation.eval_dir
    folder.mkdir(parents=True, exist_ok=True)
    log_path, event_log = folder / "eval.log", folder / "events.jsonl"
    event_log.unlink(missing_ok=True)
    push(run, evaluations=[evaluation.pk])
    try:
        job = EvalJob(
            model=evaluation.model,
            dataset_path=version_training_file(version=evaluation.dataset_version, out=folder / "prompts.jsonl",
                                               split=evaluation.split),
            event_log=str(event_log), rewards=[RewardSpec(**r) for r in reward_specs(run.rewards)],
            evaluation=EvalFields(**evaluation.settings), label=evaluation.label,
            source=eval_source(evaluation.dataset_version),
            max_new_tokens=run.config.get("max_completion_length") or 16, top_p=run.config.get("top_p") or 1.0,
            seed=run.config.get("seed") or 0, max_reward_faults=settings.GRPO_REWARD_MAX_FAULTS,
            allow_weak_sandbox=settings.GRPO_SANDBOX_ALLOW_WEAK, sandbox_slot_base=_slot_base())
        result = run_eval_program(job, folder / "eval_config.json", log_path, what="evaluation",
                                  cancelled=lambda: _evaluation_cancelled(evaluation.pk))
        with transaction.atomic():
            if not _evaluation_cancelled(evaluation.pk, lock=True):
                store_eval_event(evaluation, result)
    except Cancelled:
        log.info("evaluation %s was cancelled; its process is stopped", evaluation.pk)
    except Exception as exc:
        log.exception("evaluation %s failed", evaluation.pk)
        with transaction.atomic():
            if not _evaluation_cancelled(evaluation.pk, lock=True):
                evaluation.status, evaluation.error = Evaluation.Status.FAILED, str(exc)[:2000]
                evaluation.log_tail, evaluation.finished_at = log_tail(log_path), timezone.now()
                evaluation.save(update_fields=["status", "error", "log_tail", "finished_at"])
    run.refresh_from_db()
    push(run, evaluations=[evaluation.pk])
    advance_recipes()


def _evaluation_cancelled(pk: int, lock: bool = False) -> bool:
    rows = Evaluation.objects.select_for_update() if lock else Evaluation.objects
    return rows.filter(pk=pk, status=Evaluation.Status.CANCELLED).exists()


def _job_cancelled(pk: int) -> bool:
    from runs.models import RejectionJob

    return RejectionJob.objects.filter(pk=pk, status=RejectionJob.Status.CANCELLED).exists()


def run_rejection_job(job_id: int) -> None:
    """The worker's side of a rejection-sampling job (runs.sampling): the sampling program is the evaluation program
    (``python -m workers.evaluate``: k samples per prompt, scored by the job's rewards in the sandbox); the kept
    samples become a dataset (runs.sampling.services.rejection_job_store)."""
    from runs.models import RejectionJob
    from runs.sampling.services import RejectionSettings, prompts_file, rejection_job_claim, rejection_job_store
    from workers.evaluate import EvalJob

    job = rejection_job_claim(job_id)
    if job is None:
        return
    folder = job.job_dir
    folder.mkdir(parents=True, exist_ok=True)
    log_path, event_log = folder / "sample.log", folder / "events.jsonl"
    event_log.unlink(missing_ok=True)
    settings_ = RejectionSettings(**job.settings)
    try:
        sampler = EvalJob(
            model=resolve_model(job.model), dataset_path=prompts_file(job), event_log=str(event_log),
            rewards=[RewardSpec(**r) for r in reward_specs(job.rewards)],
            evaluation=EvalFields(eval_num_samples=settings_.k, eval_max_prompts=settings_.max_prompts,
                                  eval_temperature=settings_.temperature, eval_solved_by=settings_.solved_by,
                                  eval_threshold=settings_.threshold),
            label=f"rejection sampling {job.pk}", source="rejection", max_new_tokens=settings_.max_new_tokens,
            seed=settings_.seed, max_reward_faults=settings.GRPO_REWARD_MAX_FAULTS,
            allow_weak_sandbox=settings.GRPO_SANDBOX_ALLOW_WEAK, sandbox_slot_base=_slot_base(),
            generator="auto")  # vLLM where it can run (workers.evaluate.vllm_usable), else transformers' generate
        result = run_eval_program(sampler, folder / "sample_config.json", log_path, what="sampling",
                                  cancelled=lambda: _job_cancelled(job.pk))
        if _job_cancelled(job.pk):
            raise Cancelled("the sampling was cancelled")
        rejection_job_store(job=job, event=result)
    except Cancelled:
        log.info("rejection-sampling job %s was cancelled; its process is stopped", job.pk)
    except Exception as exc:
        log.exception("rejection-sampling job %s failed", job.pk)
        errors = getattr(exc, "errors", None)
        RejectionJob.objects.get(pk=job.pk).mark_failed("; ".join(errors) if errors else str(exc)[:2000],
                                                        log_tail(log_path))
    advance_recipes()
