"""The Django side of a run: start the training program as its own process, ingest its event log, keep the run's
status true (heartbeat, cancel, checkpoints, crashes). The training process never imports Django; this module never
imports torch.

The event log decouples the two: training goes on while the database or Redis is briefly away, and whatever the log
holds is ingested when they are back, when the run is resumed, or when a reaper finds the run abandoned.
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, transaction
from django.utils import timezone

from runs.lifecycle.training_config import run_train_config
from runs.live import publish
from runs.models import Evaluation, Rollout, Run, StepMetric
from runs.paths import event_log_path, log_tail, model_access_at_start, supervisor_lock_path
from runs.recipes.services import recipes_advance
from runs.rollouts.ingest import Fenced, ingest_log
from runs.telemetry.sampler import RaySampler, ResourceSampler
from workers.placement import gpu_plan, ray_slot_base, slot_base, start_vllm_server, visible_gpus
from workers.processes import die_with_parent, program_python, stop, training_env
from workers.rayjobs import RayJob

log = logging.getLogger(__name__)

POLL_SECONDS = 0.25
CONTROL_SECONDS = 1.0  # how often the cancel flag is read and the heartbeat written
FOLDER_LOCK_WAIT = 60.0  # seconds a new attempt waits for an old trainer to let go of the run folder
DB_ERRORS = (OperationalError, InterfaceError)


def claim(run_id: int, worker_name: str) -> tuple[Run, int] | None:
    """Move a queued run to running under a new lease (this supervisor's token), holding the attempt's supervisor
    lock (lock_supervisor): the run and the lock's descriptor, to close once the outcome is recorded. None if it is
    gone or no longer queued (cancelled, or a redelivery).

    A resumed run (attempt > 1) drops what the abandoned attempt stored after its checkpoint: the resumed attempt
    trains those steps again, so keeping both would duplicate them.
    """
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.status != Run.Status.QUEUED:
            return None
        # taken before the run is seen running: a reader who finds it running and the lock free knows the
        # supervisor died without recording an outcome (runs.paths.supervisor_alive)
        supervisor_lock = lock_supervisor(run)
        if supervisor_lock is None:
            return None
        if run.attempt > 1:
            Rollout.objects.filter(run=run, step__gt=run.checkpoint_step).delete()
            StepMetric.objects.filter(run=run, step__gt=run.checkpoint_step).delete()
            Evaluation.objects.filter(run=run, kind=Evaluation.Kind.PERIODIC, step__gt=run.checkpoint_step).delete()
            run.step = run.checkpoint_step
        run.worker_name, run.heartbeat_at, run.event_offset, run.lease = worker_name, timezone.now(), 0, uuid.uuid4()
        run.ray_slot_base = None  # an earlier attempt's range: a Ray attempt takes one when it starts
        try:
            run.save(update_fields=["worker_name", "heartbeat_at", "event_offset", "step", "lease", "ray_slot_base"])
            run.mark_running()
        except BaseException:
            os.close(supervisor_lock)
            raise
        return run, supervisor_lock


def lock_supervisor(run: Run) -> int | None:
    """This process's exclusive lock on the attempt's supervisor lock file, as a descriptor no child inherits; None
    when another process holds it. The kernel lets go of it when this process dies, however it dies, so a page
    can tell at once a killed worker from a paused or busy one (runs.paths.supervisor_alive)."""
    path = supervisor_lock_path(run)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


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


def training_command(run: Run, config_path: Path, python: str = sys.executable) -> list[str]:
    if run.trainer == Run.Trainer.VERL:
        # verl places its own workers on the run's GPUs (through Ray): one program, whatever their number
        return [python, "-m", "workers.training.verl_run", str(config_path)]
    if run.requested_gpus > 1:
        # several GPUs: one process per GPU through accelerate, as TRL documents
        return [
            python,
            "-m",
            "accelerate.commands.launch",
            "--num_processes",
            str(run.requested_gpus),
            "-m",
            "workers.training.train",
            str(config_path),
        ]
    return [python, "-m", "workers.training.train", str(config_path)]


def vllm_on_cpu(run: Run) -> bool:
    """The run generates with vLLM on no GPU: colocated, in vLLM's CPU build (the run's checks let nothing else by)."""
    return bool((run.config or {}).get("use_vllm")) and run.requested_gpus <= 0 and run.trainer != Run.Trainer.VERL


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
                raise RuntimeError(
                    "another trainer still holds this run's folder (a supervisor that lost the run is "
                    "stopping it); resume again in a minute"
                ) from None
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
        if refused := model_access_at_start(run.model, user=run.owner):
            raise RuntimeError(refused)
        self.folder_lock = lock_folder(run.run_dir, FOLDER_LOCK_WAIT)
        if run.engine == "ray":
            return self.start_ray()
        with open(self.log_path, "ab") as log_file:
            port = None
            self.vllm = None
            python, in_vllm_cpu = program_python(vllm_on_cpu=vllm_on_cpu(run))
            env = training_env(vllm_cpu=in_vllm_cpu)
            train_gpus, server_gpu = gpu_plan(run, visible_gpus()) if run.requested_gpus > 0 else ([], None)
            if train_gpus:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(train_gpus)  # training (and its telemetry) sees only these
            self.gpus = ",".join(train_gpus + ([server_gpu] if server_gpu else [])) or None
            if run.vllm_server:
                self.vllm, port = start_vllm_server(run, log_file, server_gpu)
            config_path = run.run_dir / f"train_config-{run.attempt}.json"
            config = run_train_config(run, slot_base=slot_base(), vllm_server_port=port)
            config_path.write_text(config.to_json())
            proc = subprocess.Popen(
                training_command(run, config_path, python),
                cwd=settings.BASE_DIR,
                env=env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=die_with_parent,
                pass_fds=(self.folder_lock,),
            )
        # from now on the trainer alone holds the folder: a held lock means a trainer trains (runs.paths.trainer_alive)
        self.close()
        return proc

    def start_ray(self):
        """Submit the attempt to the worker's Ray cluster (workers.rayjobs); the cluster places its GPUs."""
        run, self.vllm = self.run, None
        if not settings.GRPO_RAY_ADDRESS:
            raise RuntimeError("this worker has no Ray cluster (RAY_ADDRESS is not set)")
        if run.vllm_server:
            raise RuntimeError("vLLM server mode is not available on Ray runs; use colocate mode")
        config_path = run.run_dir / f"train_config-{run.attempt}.json"
        config_path.write_text(run_train_config(run, slot_base=ray_slot_base(run)).to_json())
        return RayJob(
            settings.GRPO_RAY_ADDRESS,
            run,
            config_path,
            training_env(),
            self.log_path,
            telemetry_seconds=settings.GRPO_TELEMETRY_SECONDS,
        )

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
        self.sampler = (
            ResourceSampler(self.run, proc.pid, gpus=self.gpus)
            if proc.pid
            else RaySampler(self.run, proc.telemetry_dir)
        )
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
                log.warning(
                    "run %s: the attempt was taken from this supervisor; its outcome is not recorded", self.run.pk
                )
                return
            if self.cancelled:
                run.mark_cancelled()
            elif proc.returncode == 0 and self.outcome.get("type") == "finished":
                run.mark_completed()
            else:
                error = (
                    self.outcome.get("error")
                    or getattr(proc, "error", "")
                    or f"the training process exited with code {proc.returncode}"
                )
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
    claimed = claim(run_id, worker_name)
    if claimed is None:
        log.info("run %s is not queued; nothing to do", run_id)
        return
    run, supervisor_lock = claimed
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
        os.close(supervisor_lock)  # after the outcome is recorded: a run still running without it has lost its worker
        advance_recipes()


def advance_recipes() -> None:
    """A run, job or evaluation has ended: a recipe waiting on it starts its next stage now (the heartbeat would
    within a beat)."""
    try:
        recipes_advance()
    except Exception:  # never let a recipe's trouble fail the work that just ended; the next beat tries again
        log.exception("advancing recipes failed")
