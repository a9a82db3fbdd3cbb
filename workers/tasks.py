"""Celery tasks: thin adapters that take an id and call the supervisor."""

from celery import shared_task

from grpo_web.env import envint


def training_queue(gpus: int) -> str:
    """Runs are routed by the GPUs they need: "training" for CPU runs, "training-gpuN" for N GPUs. A worker with N
    GPUs serves training-gpu1 .. training-gpuN (see `manage.py run_worker`), one run at a time."""
    return "training" if gpus <= 0 else f"training-gpu{gpus}"


@shared_task(bind=True, acks_late=True, ignore_result=True,
             time_limit=envint("GRPO_RUN_TIME_LIMIT", str(7 * 24 * 3600)))
def train_run(self, run_id: int) -> None:
    from workers.supervisor import supervise

    supervise(run_id, worker_name=self.request.hostname or "")


@shared_task(acks_late=True, ignore_result=True, time_limit=envint("GRPO_EVAL_TIME_LIMIT", str(24 * 3600)))
def evaluate(evaluation_id: int) -> None:
    """A standalone evaluation (runs.evaluations): on the training queues, where the GPUs are."""
    from runs.evaluations import run_evaluation

    run_evaluation(evaluation_id)
