"""Celery tasks: thin adapters that take an id and call the supervisor."""

from celery import shared_task

from grpo_web.env import envint


@shared_task(acks_late=True, ignore_result=True, time_limit=envint("GRPO_RUN_TIME_LIMIT", str(7 * 24 * 3600)))
def train_run(run_id: int) -> None:
    from workers.supervisor import supervise

    supervise(run_id)
