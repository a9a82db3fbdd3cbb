"""A reward function that logs new log_extra columns call after call stops at the run's cap as a fault of that
function, not a crash of training: it abstains for the batch, TRL is handed nothing of the refused call, the fault is
written to the event log naming the function, and ingest puts it on the run."""

from collections import defaultdict
from types import SimpleNamespace

import pytest
from grpo_web_protocol.config import RewardSpec
from grpo_web_protocol.events import EventWriter

from rewards.sandbox import sandbox_support
from rewards.sandbox.replies import MAX_RUN_LOG_NAMES
from runs.models import Run
from runs.rollouts.ingest import ingest_log
from workers.training.rewarding import SandboxedReward

SUPPORT = sandbox_support()
pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not SUPPORT["ok"], reason=f"this kernel cannot sandbox: {SUPPORT['missing']}"),
]

FLOOD = """
def flood(completions, log_extra, trainer_state, **kwargs):
    step = trainer_state.global_step
    for i in range(60):
        log_extra(f"step{step}_col{i}", [1] * len(completions))
    return [1.0] * len(completions)
"""


def test_a_function_flooding_columns_across_calls_is_stopped_at_the_runs_cap(owner, dataset_version, tmp_path):
    run = Run.objects.create(
        owner=owner,
        name="r",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": "mine", "source": FLOOD, "entrypoint": "flood", "weight": 1.0}],
        config={"max_steps": 6},
        total_steps=6,
    )
    log = tmp_path / "events.jsonl"
    events = EventWriter(str(log))
    trl_columns: dict[str, list] = defaultdict(list)  # TRL's _pending_extra_logs: every column it is handed
    reward = SandboxedReward(
        RewardSpec(name="mine", source=FLOOD, entrypoint="flood"),
        slot=12,
        events=events,
        max_faults=3,
        allow_weak=False,
    )
    try:
        scores = [
            reward(
                ["a", "b"],
                trainer_state=SimpleNamespace(global_step=step),  # TRL passes its TrainerState
                log_extra=lambda column, values: trl_columns[column].extend(values),
                log_metric=lambda name, value: None,
            )
            for step in range(6)
        ]
    finally:
        reward.close()
        events.close()
    assert scores == [[1.0, 1.0]] * 4 + [[None, None]] * 2  # 240 columns, then 300: refused, and again
    assert len(trl_columns) == 240 and all(not c.startswith(("step4", "step5")) for c in trl_columns)
    ingest_log(run, log)
    run.refresh_from_db()
    fault = run.reward_faults["mine"]
    assert fault["faults"] == 2 and not fault["disabled"]
    assert (
        "LogTooLarge" in fault["error"]
        and "flood has logged 300 distinct log_extra columns in this run" in fault["error"]
    )
    assert f"the limit is {MAX_RUN_LOG_NAMES}" in fault["error"]
