"""A run trains on its pinned version's train split, written as the JSON lines the training program reads."""

import json

import pytest

from runs.datasets.mapping import Mapping
from runs.datasets.services import dataset_version_map
from runs.lifecycle.training_config import run_train_config
from runs.models import Run

pytestmark = pytest.mark.django_db


def _run(owner, version):
    return Run.objects.create(
        owner=owner,
        name="r",
        model="tiny",
        dataset_version=version,
        rewards=[{"name": "accuracy", "builtin": "accuracy", "weight": 1.0}],
        config={"max_steps": 1},
        total_steps=1,
    )


def test_the_training_config_points_at_the_train_split_in_the_run_folder(owner, dataset_version):
    run = _run(owner, dataset_version)
    config = run_train_config(run, slot_base=100)
    assert config.dataset_path == str(run.run_dir / "train.jsonl")
    rows = [json.loads(line) for line in open(config.dataset_path)]
    assert len(rows) == 64 and set(rows[0]) == {"prompt", "answer"}


def test_the_training_file_follows_the_runs_version_not_a_later_one(owner, dataset_version):
    run = _run(owner, dataset_version)
    dataset_version_map(
        version=dataset_version, mapping=Mapping(prompt_template="Q: {prompt}", reward_columns=("answer",))
    )
    rows = [json.loads(line) for line in open(run_train_config(run, slot_base=100).dataset_path)]
    assert not rows[0]["prompt"].startswith("Q: ")


def test_held_out_rows_never_reach_training(owner, dataset_version):
    version = dataset_version_map(
        version=dataset_version,
        mapping=Mapping(reward_columns=("answer",), split="fraction", eval_fraction=0.5, split_seed=1),
    )
    rows = [json.loads(line) for line in open(run_train_config(_run(owner, version), slot_base=100).dataset_path)]
    assert len(rows) == version.train_rows < 64
