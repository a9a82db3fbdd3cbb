"""Celery tasks: thin adapters that take an id (or a payload) and call the supervisor or a service.

Each task's name is the one ``grpo_web.queues`` enqueues by: the web side never imports this module.
"""

from celery import shared_task

from grpo_web import queues
from grpo_web.env import envint


@shared_task(
    name=queues.TRAIN_RUN,
    bind=True,
    acks_late=True,
    ignore_result=True,
    time_limit=envint("GRPO_RUN_TIME_LIMIT", str(7 * 24 * 3600)),
)
def train_run(self, run_id: int) -> None:
    from workers.supervisor import supervise

    supervise(run_id, worker_name=self.request.hostname or "")


@shared_task(
    name=queues.EVALUATE, acks_late=True, ignore_result=True, time_limit=envint("GRPO_EVAL_TIME_LIMIT", str(24 * 3600))
)
def evaluate(evaluation_id: int) -> None:
    """A standalone evaluation (runs.evaluations): on the training queues, where the GPUs are."""
    from workers.jobs import run_evaluation

    run_evaluation(evaluation_id)


@shared_task(name=queues.RETAG_REFLECTIONS, time_limit=6 * 3600, acks_late=True)  # the default queue
def retag_reflections(run_id: int) -> int:
    """Re-tag a large run's stored completions after its reflection phrase list was edited."""
    from runs.rollouts.services import rollout_reflections_retag

    return rollout_reflections_retag(run_id=run_id)


@shared_task(name=queues.REWARD_TEST, time_limit=180, soft_time_limit=170)
def reward_test(**kwargs) -> dict:
    """The reward editor's Test button (rewards.views): score the editor's code in the sandbox."""
    from workers.reward_checks import reward_test_rows

    return reward_test_rows(**kwargs)


@shared_task(name=queues.REWARD_LABEL_SUITE, time_limit=300, soft_time_limit=290)
def reward_label_suite(**kwargs) -> dict:
    """The reward editor's "Test against labels" (rewards.views): the editor's code on the label suite's rollouts."""
    from workers.reward_checks import reward_label_suite as check

    return check(**kwargs)


@shared_task(name=queues.CODE_TESTS_BENCH, time_limit=180, soft_time_limit=170)
def code_tests_bench(**kwargs) -> dict:
    """The code_tests bench's Run button (rewards.views): a solution against a row's tests, in the sandbox."""
    from workers.code_bench import code_tests_bench

    return code_tests_bench(**kwargs)


@shared_task(name=queues.RUN_CHECK, ignore_result=True, acks_late=True, time_limit=120, soft_time_limit=110)
def run_check(run_id: int) -> None:
    """A "checking" run (runs.lifecycle.services.run_create): call each reward the way TRL will, on a few rows, and
    build TRL's GRPOConfig; then the run is queued or refused."""
    from workers.reward_checks import run_contract_check

    run_contract_check(run_id)


@shared_task(
    name=queues.DATASET_IMPORT,
    acks_late=True,
    ignore_result=True,
    time_limit=envint("GRPO_IMPORT_WALL_SECONDS", "3600") + 300,
)
def dataset_import(job_id: int) -> None:
    """A Hugging Face import started from the upload page (runs.datasets.services.dataset_import_hf_start)."""
    from runs.datasets.services import dataset_import_job_run

    dataset_import_job_run(job_id=job_id)


@shared_task(name=queues.REWARD_REPLAY, ignore_result=True, time_limit=envint("GRPO_REPLAY_TIME_LIMIT", "7200"))
def reward_replay(replay_id: int) -> None:
    """A reward replay (runs.rollouts.services.replay_create): re-score a run's stored completions in the sandbox."""
    from workers.replay import replay_run

    replay_run(replay_id)


@shared_task(
    name=queues.REJECTION_SAMPLE,
    acks_late=True,
    ignore_result=True,
    time_limit=envint("GRPO_EVAL_TIME_LIMIT", str(24 * 3600)),
)
def rejection_sample(job_id: int) -> None:
    """A rejection-sampling job (runs.sampling): on the training queues, where the GPUs are."""
    from workers.jobs import run_rejection_job

    run_rejection_job(job_id)


@shared_task(name=queues.IMPORT_POLL, ignore_result=True, time_limit=1800)  # the default queue
def import_poll(run_id: int) -> None:
    """One read of a watched import folder (runs.attach.importing): store what it gained, then schedule the next."""
    from runs.attach.importing import enqueue_poll, run_import_poll

    if run_import_poll(run_id=run_id):
        enqueue_poll(run_id)
