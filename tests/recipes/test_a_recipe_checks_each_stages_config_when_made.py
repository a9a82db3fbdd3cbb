"""A recipe's training stages are checked when the recipe is made, by the check a run gets before it is queued, not
when the stage starts hours later (issue 27: an SFT stage with a config TRL refuses failed only at its start)."""

import pytest

from runs.models import Recipe
from runs.recipes.services import RecipeRefused, recipe_create, recipe_problems

pytestmark = pytest.mark.django_db


def test_a_stage_config_the_run_check_refuses_is_named_with_its_stage(owner, dataset_version, sft_version, tiny_model):
    stages = [
        {"kind": "sft", "model": "tiny", "dataset": sft_version.pk, "config": {"max_steps": 2, "learning_rate": -1}},
        {"kind": "grpo", "model": "stage:1", "dataset": dataset_version.pk, "rewards": ["digit_ratio"],
         "config": {"num_generations": 3, "per_device_train_batch_size": 8, "max_steps": 2}},
    ]  # fmt: skip
    errors = recipe_problems(stages, owner)
    assert any(e.startswith("stage 1: learning_rate") for e in errors), errors
    assert any(e.startswith("stage 2: ") and "num_generations" in e for e in errors), errors
    with pytest.raises(RecipeRefused):
        recipe_create(owner=owner, name="bad", stages=stages)
    assert not Recipe.objects.exists()


def test_a_field_the_stage_kind_lacks_and_an_unknown_reward_are_named(owner, dataset_version, tiny_model):
    errors = recipe_problems(
        [{"kind": "grpo", "model": "tiny", "dataset": dataset_version.pk, "rewards": ["digit_ratio"],
          "config": {"max_steps": 2, "max_seq_length": 128}},
         {"kind": "grpo", "model": "stage:1", "dataset": dataset_version.pk, "rewards": ["no_such_reward"],
          "config": {"max_steps": 2}}],
        owner,
    )  # fmt: skip
    assert any(e.startswith("stage 1: ") and "max_seq_length" in e for e in errors), errors
    assert "stage 2: rewards: you have no reward function 'no_such_reward'" in errors


def test_a_valid_recipe_with_stage_inputs_passes(owner, dataset_version, sft_version, tiny_model):
    stages = [
        {"kind": "sft", "model": "tiny", "dataset": sft_version.pk, "config": {"max_steps": 2}},
        {"kind": "grpo", "model": "stage:1", "dataset": dataset_version.pk, "rewards": ["digit_ratio"],
         "config": {"num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 2}},
        {"kind": "rejection_sample", "model": "stage:2", "dataset": dataset_version.pk, "rewards": ["digit_ratio"]},
        {"kind": "sft", "model": "stage:2", "dataset": "stage:3", "config": {"max_steps": 2}},
    ]  # fmt: skip
    assert recipe_problems(stages, owner) == []
