"""On a conversational dataset TRL passes reward functions message lists (``completions[i] ==
[{"role": "assistant", "content": ...}]``); the pre-queue check, the editor's Test and the replay pass the same, so
TRL's own quick-start reward for such a dataset (docs: "Using a custom reward function") runs in all three, async
as well. The run here is TRL's GRPOTrainer on the tiny model: it scores the completions first, and the replay of its
rollouts must give the rewards TRL gave."""

import dataclasses
import json

import pytest
from grpo_web_protocol.config import GRPOFields, RewardSpec, TrainConfig
from grpo_web_protocol.events import read_events

from rewards.services import reward_create
from runs.datasets.mapping import Mapping, write_training_jsonl
from runs.datasets.services import dataset_version_map
from runs.models import Replay, ReplayRow
from runs.rollouts.ingest import ingest_events
from runs.rollouts.selectors import reward_inputs
from runs.rollouts.services import replay_create, replay_execute
from runs.text import as_text
from tests.rollouts.inspect_data import make_run
from workers.replay import ReplayScorer
from workers.reward_checks import reward_contract_problems, reward_test_rows
from workers.training.train import run as train

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::FutureWarning")]

# TRL's documentation, "Using a custom reward function", the conversational example
REWARD_LEN = (
    'def reward_len(completions, **kwargs):\n    return [-abs(20 - len(c[0]["content"])) for c in completions]\n'
)
# TRL's documentation, async reward functions: awaited on TRL's event loop
ASYNC_LEN = (
    "import asyncio\n\n"
    "async def async_len(completions, **kwargs):\n"
    "    await asyncio.sleep(0.01)\n"
    '    return [float(len(c[0]["content"])) for c in completions]\n'
)


@pytest.fixture
def chat_version(dataset_version):
    return dataset_version_map(
        version=dataset_version,
        mapping=dataclasses.replace(Mapping.of(dataset_version), prompt_format="conversational"),
    )


def specs():
    return [
        {"name": "reward_len", "source": REWARD_LEN, "entrypoint": "reward_len"},
        {"name": "async_len", "source": ASYNC_LEN, "entrypoint": "async_len"},
    ]


def test_the_pre_queue_check_passes_messages_on_a_conversational_dataset(chat_version, dataset_version):
    assert reward_contract_problems(rewards=specs(), dataset_version_id=chat_version.pk) == []
    # on a standard dataset TRL passes strings, and the same function fails there as it would in training
    problems = reward_contract_problems(rewards=specs()[:1], dataset_version_id=dataset_version.pk)
    assert len(problems) == 1 and "reward 'reward_len'" in problems[0] and "string indices" in problems[0]


def test_the_editors_test_runs_the_conversational_reward(owner, chat_version):
    result = reward_test_rows(
        owner_id=owner.pk,
        function_id=1,
        source=REWARD_LEN,
        entrypoint="reward_len",
        dataset_version_id=chat_version.pk,
        rows=2,
        completions=["hello"],
    )
    assert result["error"] is None
    assert [(r["completion"], r["score"]) for r in result["rows"]] == [("hello", -15.0), ("hello", -15.0)]
    assert result["rows"][0]["prompt"].startswith("user: What is ")


def test_trl_trains_with_them_and_the_replay_gives_trls_rewards(
    tmp_path, tiny_model, owner, chat_version, django_capture_on_commit_callbacks
):
    data = write_training_jsonl(chat_version.path, Mapping.of(chat_version), tmp_path / "data.jsonl")
    assert json.loads(data.read_text().splitlines()[0])["prompt"][0]["role"] == "user"
    config = TrainConfig(
        model=str(tiny_model),
        dataset_path=str(data),
        output_dir=str(tmp_path / "out"),
        event_log=str(tmp_path / "events.jsonl"),
        rewards=[RewardSpec(s["name"], 1.0, source=s["source"], entrypoint=s["entrypoint"]) for s in specs()],
        grpo=GRPOFields(max_steps=1, num_generations=4, per_device_train_batch_size=8, save_steps=1000),
    )
    train(config)
    events = read_events(config.event_log)[0]
    assert not [e for e in events if e.get("type") == "reward_fault"]
    run = make_run(owner, chat_version, rewards=(), config={"num_generations": 4, "per_device_train_batch_size": 8})
    functions = [
        reward_create(owner=owner, name=s["name"], source_code=s["source"], entrypoint=s["entrypoint"]) for s in specs()
    ]
    run.rewards = [{"name": f.name, "weight": 1.0, "version_id": f.latest_version.pk, "version": 1} for f in functions]
    run.save(update_fields=["rewards"])
    ingest_events(run, events)
    stored = list(run.rollouts.order_by("index"))
    assert len(stored) == 8 and all(r.messages and r.rewards[0] is not None for r in stored)  # TRL scored them all
    # the prompts too, as TRL passed them: found again in the run's dataset version from their stored text
    prompts, _ = reward_inputs(
        run, [{"prompt": r.prompt, "completion": r.completion, "messages": r.messages} for r in stored]
    )
    assert [as_text(p) for p in prompts] == [r.prompt for r in stored] and all(p[0]["role"] == "user" for p in prompts)
    with django_capture_on_commit_callbacks(execute=False):
        replay = replay_create(run=run, owner=owner, rewards=run.rewards, filters={})
    scorer = ReplayScorer(run.rewards, slot_base=2000, allow_weak=True)
    try:
        replay_execute(replay_id=replay.pk, score=scorer)
    finally:
        scorer.close()
    replay.refresh_from_db()
    assert replay.status == Replay.Status.COMPLETED, replay.error
    rows = ReplayRow.objects.filter(replay=replay).order_by("index")
    assert [r.new_rewards for r in rows] == [r.rewards for r in stored]
    assert [r.new_rewards[1] for r in rows] == [float(len(r.messages[-1]["content"])) for r in stored]
