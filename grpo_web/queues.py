"""The work the web side hands to workers, by task name.

``runs`` and ``rewards`` enqueue through here and never import ``workers``, where the tasks live
(``workers/tasks.py`` declares each task under the name given here). A missing broker is a loud error: nothing runs
inline.
"""

from __future__ import annotations

import ast
import json

from celery import current_app
from celery.result import AsyncResult

from grpo_web.embedded import ensure_configured_redis
from grpo_web.env import envstr

TRAIN_RUN = "workers.tasks.train_run"  # a training queue (training_queue)
EVALUATE = "workers.tasks.evaluate"  # a training queue: it loads a model
RETAG_REFLECTIONS = "workers.tasks.retag_reflections"  # the default queue
REWARD_TEST = "workers.tasks.reward_test"  # the sandbox queue
RUN_CHECK = "workers.tasks.run_check"  # the checks queue: a "checking" run's rewards, then queued or refused
DATASET_IMPORT = "workers.tasks.dataset_import"  # the default queue
REWARD_REPLAY = "workers.tasks.reward_replay"  # the sandbox queue
REJECTION_SAMPLE = "workers.tasks.rejection_sample"  # a training queue: it loads a model
IMPORT_POLL = "workers.tasks.import_poll"  # the default queue: one read of a watched import folder
CODE_TESTS_BENCH = "workers.tasks.code_tests_bench"  # the sandbox queue
REWARD_LABEL_SUITE = "workers.tasks.reward_label_suite"  # the sandbox queue
TASKS = (
    TRAIN_RUN,
    EVALUATE,
    RETAG_REFLECTIONS,
    REWARD_TEST,
    RUN_CHECK,
    DATASET_IMPORT,
    REWARD_REPLAY,
    REJECTION_SAMPLE,
    IMPORT_POLL,
    CODE_TESTS_BENCH,
    REWARD_LABEL_SUITE,
)

# The queues, named once: settings route by them, `manage.py run_worker` and docker-compose's workers serve them.
DEFAULT_QUEUE = "default"  # short jobs of the web side: imports, re-tagging
SANDBOX_QUEUE = "sandbox"  # users' code on demand: the editor's Test, the label suites, the code bench, replays
# a "checking" run's contract check, on a worker of its own: never behind an editor's Test, an import or a replay
# (GRPO_CHECKS_QUEUE names it otherwise: an app and its checks workers that share a broker with another app)
CHECKS_QUEUE = envstr("GRPO_CHECKS_QUEUE") or "checks"
TRAINING_QUEUE = "training"  # CPU runs; "training-gpuN" for runs of N GPUs (training_queue)
RAY_QUEUE = "training-ray"  # runs for a Ray cluster, served by the workers that have one
VLLM_CPU_QUEUE = "training-vllm-cpu"  # CPU runs that generate with vLLM: workers with its CPU build (--vllm-cpu)
ROUTES = {
    TRAIN_RUN: {"queue": TRAINING_QUEUE},
    REWARD_TEST: {"queue": SANDBOX_QUEUE},
    RUN_CHECK: {"queue": CHECKS_QUEUE},
    REWARD_REPLAY: {"queue": SANDBOX_QUEUE},
    CODE_TESTS_BENCH: {"queue": SANDBOX_QUEUE},
    REWARD_LABEL_SUITE: {"queue": SANDBOX_QUEUE},
}


def training_queue(gpus: int, engine: str = "local", *, vllm: bool = False) -> str:
    """Runs are routed by the GPUs they need: "training" for CPU runs, "training-gpuN" for N GPUs. A worker with N
    GPUs serves training-gpu1 .. training-gpuN (see `manage.py run_worker`), one run at a time. A Ray run goes to
    "training-ray", served by the workers that have a Ray cluster (RAY_ADDRESS): the cluster places its GPUs. A CPU
    run that generates with vLLM (``vllm``) goes to "training-vllm-cpu", served by workers with vLLM's CPU build."""
    if engine == "ray":
        return RAY_QUEUE
    if gpus <= 0:
        return VLLM_CPU_QUEUE if vllm else TRAINING_QUEUE
    return f"{TRAINING_QUEUE}-gpu{gpus}"


def enqueue(
    name: str,
    *,
    args: list | None = None,
    kwargs: dict | None = None,
    queue: str | None = None,
    countdown: float | None = None,
) -> AsyncResult:
    """Send task ``name`` (one of TASKS) to the broker; the queue is the task's route unless given; ``countdown``:
    seconds before a worker may start it."""
    if name not in TASKS:
        raise ValueError(f"no task named {name!r}")
    ensure_configured_redis()
    return current_app.send_task(name, args=args or [], kwargs=kwargs or {}, queue=queue, countdown=countdown)


def result(task_id: str) -> AsyncResult:
    """A task's result; the embedded Redis that holds it is started first if it is not running, as for enqueue."""
    ensure_configured_redis()
    return AsyncResult(task_id, app=current_app)


def pending(name: str, queue: str | None = None) -> set:
    """The first argument of every ``name`` task the broker holds: waiting in a queue (``queue`` only, when given), or
    delivered to a worker and not yet acknowledged. Reads Redis as kombu lays it out (a list per queue, the
    ``unacked`` hash)."""
    ensure_configured_redis()
    found = set()
    with current_app.connection_for_read() as connection:
        client = connection.default_channel.client
        messages = list(client.hvals("unacked"))
        if queue is not None:
            messages = [raw for raw in messages if _routed_to(raw, queue)] + client.lrange(queue, 0, -1)
        else:
            # the queues are Redis lists: SCAN's type filter skips the result backend's keys without a TYPE each
            for key in client.scan_iter(count=1000, _type="list"):
                if not key.startswith(b"_kombu"):
                    messages += client.lrange(key, 0, -1)
    for raw in messages:
        try:
            message = json.loads(raw)
            message = message[0] if isinstance(message, list) else message  # unacked: [message, exchange, key]
            headers = message.get("headers") or {}
            if headers.get("task") == name:
                args = ast.literal_eval(headers.get("argsrepr") or "()")
                if args:
                    found.add(args[0])
        except (ValueError, SyntaxError, AttributeError, TypeError):
            continue  # not a Celery message of ours
    return found


def _routed_to(raw: bytes, queue: str) -> bool:
    """Whether an ``unacked`` entry ([message, exchange, routing key]) was delivered from ``queue``."""
    try:
        entry = json.loads(raw)
        return isinstance(entry, list) and len(entry) == 3 and entry[2] == queue
    except ValueError:
        return False


def resend_lost(name: str, queued: list, send, queue: str | None = None) -> list:
    """Of ``queued`` (rows the database holds as queued, each sent as task ``name`` with its pk as first argument),
    send again with ``send(row)`` those whose message the broker no longer holds (in ``queue``, when given); return
    them."""
    if not queued:
        return []
    held = pending(name, queue)
    lost = [row for row in queued if row.pk not in held]
    for row in lost:
        send(row)
    return lost


def claim_turn(key: str, seconds: int) -> bool:
    """True for the one caller in ``seconds`` that asks first (a Redis SET NX with expiry): the dispatcher runs on
    every worker's beat, but one pass per period is enough."""
    ensure_configured_redis()
    with current_app.connection_for_write() as connection:
        return bool(connection.default_channel.client.set(f"grpo:{key}", "1", nx=True, ex=seconds))
