"""A run's attempt as a Ray job (engine "ray"): submitted through the Ray Jobs API to the worker's cluster
(RAY_ADDRESS), followed (status, logs), stopped on cancel. The supervisor watches a RayJob as it watches a local
training process (``poll``, ``returncode``); the event log is ingested from the shared data directory as for a local
run. No torch here; ``ray`` is imported only by the workers that submit Ray runs.
"""

from __future__ import annotations

import logging
import secrets
import sys
import time
from pathlib import Path

from grpo_web_protocol.resources import rank_folder

from runs.models import Run
from workers.training.ray_train import ERROR_PREFIX

log = logging.getLogger(__name__)

STATUS_SECONDS = 1.0  # how often the job's status is read
# how often its log is read: the Jobs API answers with the whole log each time (JobSubmissionClient.get_job_logs has
# no offset), so it is read every few seconds, and only what is past the last length goes to train.log
LOG_SECONDS = 5.0
ENDED = {"SUCCEEDED": 0, "FAILED": 1, "STOPPED": -15}  # the job's end, as a process's exit code
JOB_ENV = ("PYTHONPATH", "PYTHONUNBUFFERED", "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "OPENBLAS_CORETYPE")


def submission_id(run: Run) -> str:
    """One Ray job per attempt: a retried task (a redelivery, a second submit) finds it instead of starting another."""
    return f"grpo-web-run-{run.uid}-attempt-{run.attempt}"


def client(address: str):
    from ray.job_submission import JobSubmissionClient

    try:
        return JobSubmissionClient(address)
    except Exception as exc:  # ConnectionError, RuntimeError: the dashboard is not there
        raise RuntimeError(f"the Ray cluster at {address} (RAY_ADDRESS) did not answer: {exc}") from None


def write_marker(run: Run) -> tuple[Path, str]:
    """A file in the run folder whose token every node of the cluster must read back (workers.training.ray_train)."""
    marker, token = run.run_dir / f"shared-check-{run.attempt}", secrets.token_hex(16)
    marker.write_text(token)
    return marker, token


class RayJob:
    """One attempt's Ray job, with the slice of ``subprocess.Popen`` the supervisor uses."""

    pid = None  # nothing local to sample: each rank samples itself into telemetry_dir (runs.telemetry.sampler)

    def __init__(
        self,
        address: str,
        run: Run,
        config_path: Path,
        env: dict[str, str],
        log_path: Path,
        *,
        telemetry_seconds: float,
    ):
        self.address, self.run, self.log_path = address, run, log_path
        self.client = client(address)
        self.id = submission_id(run)
        self.telemetry_dir = rank_folder(config_path.parent, self.id)  # where workers.training.ray_train's ranks write
        self.returncode: int | None = None
        self.error = ""
        self.logged = 0  # characters of the job's log already copied to train.log
        self.next_status = self.next_log = 0.0
        self.last_error = ""  # the last error line (workers.training.ray_train's ERROR_PREFIX) seen in the log
        self.submitted_at = time.time()
        self.stop_earlier_attempts()
        if self.info() is not None:
            log.info("run %s: attaching to Ray job %s", run.pk, self.id)
            return
        marker, token = write_marker(run)
        entrypoint = " ".join(
            [
                sys.executable,
                "-m",
                "workers.training.ray_train",
                str(config_path),
                "--num-workers",
                str(run.num_workers),
                "--marker",
                str(marker),
                "--token",
                token,
                "--name",
                self.id,
                "--telemetry-seconds",
                str(telemetry_seconds),
                *(["--use-gpu"] if run.requested_gpus > 0 else []),
                *(["--trainer", "verl"] if run.trainer == Run.Trainer.VERL else []),
            ]
        )
        try:
            self.client.submit_job(
                entrypoint=entrypoint,
                submission_id=self.id,
                runtime_env={"env_vars": {k: env[k] for k in JOB_ENV if k in env}},
                metadata={"grpo_web_run": str(run.pk), "attempt": str(run.attempt)},
            )
        except RuntimeError as exc:
            if self.info() is None:  # not a lost race with another submit of this attempt
                raise RuntimeError(f"the Ray cluster at {address} refused the job: {exc}") from None

    def info(self):
        try:
            return self.client.get_job_info(self.id)
        except RuntimeError:  # the Jobs API's "does not exist" (and other HTTP errors)
            return None

    def stop_earlier_attempts(self) -> None:
        """A resumed run's earlier attempt may still train on the cluster (its supervisor died, the job did not):
        stop it before the new attempt trains in the same folder."""
        for attempt in range(1, self.run.attempt):
            job = f"grpo-web-run-{self.run.uid}-attempt-{attempt}"
            try:
                if self.client.get_job_status(job).value not in ENDED:
                    self.client.stop_job(job)
            except RuntimeError:  # no such job (that attempt never reached the cluster)
                continue

    def poll(self) -> int | None:
        """The job's end as an exit code (0 succeeded, 1 failed, -15 stopped); None while it is pending or running."""
        if self.returncode is not None or time.monotonic() < self.next_status:
            return self.returncode
        self.next_status = time.monotonic() + STATUS_SECONDS
        info = self.client.get_job_info(self.id)
        status = info.status.value
        if status in ENDED or time.monotonic() >= self.next_log:
            self.copy_logs()  # the last call, once the job has ended, copies the whole rest
        if status in ENDED:
            self.returncode = ENDED[status]
            self.error = self.last_error or f"the Ray job {self.id} ended: {info.message or info.status}"
        return self.returncode

    def copy_logs(self) -> None:
        """Append what the job printed since the last call to the run's train.log (its Log tab), and remember the
        job's own error line (workers.training.ray_train prints it)."""
        self.next_log = time.monotonic() + LOG_SECONDS
        try:
            text = self.client.get_job_logs(self.id)
        except RuntimeError:
            return
        if len(text) <= self.logged:
            return
        # from the start of the line the last call ended in: an error line cut in two is read whole
        start = text.rfind("\n", 0, self.logged) + 1
        for line in text[start:].splitlines():
            if ERROR_PREFIX in line:
                self.last_error = line.split(ERROR_PREFIX, 1)[1]
        with open(self.log_path, "a", encoding="utf-8", errors="replace") as fh:
            fh.write(text[self.logged :])
        self.logged = len(text)

    def stop(self, wait: float = 30.0) -> None:
        """Stop the job (Ray sends its driver SIGTERM, then SIGKILL) and wait for it to end."""
        if self.returncode is not None:
            return
        try:
            self.client.stop_job(self.id)
        except RuntimeError as exc:
            log.warning("run %s: stopping Ray job %s: %s", self.run.pk, self.id, exc)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            self.next_status = 0.0
            if self.poll() is not None:
                return
            time.sleep(0.5)

    def wait(self, timeout: float | None = None) -> int | None:
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        return self.returncode
