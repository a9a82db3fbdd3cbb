"""verl's own rollout dumps (RayPPOTrainer._log_rollout_data) read back by the importer: verl's lines, groups from
verl's uid or the prompt, and advantages recomputed by verl's GRPO estimator, equal to verl's own function's."""

import json
import shutil

import numpy as np
import pytest
import torch
from grpo_web_protocol.verl_dump import grpo_advantages
from verl.trainer.ppo import core_algos

from runs.attach.importers import ImportFault
from runs.attach.importers.verl import convert
from tests.attach.conftest import VERL_COMPLETIONS, VERL_G, VERL_SCORES


@pytest.fixture(scope="module")
def converted(verl_dumps):
    return convert(verl_dumps)


def _verl_advantages(norm: bool) -> list[float]:
    rewards = torch.zeros(len(VERL_SCORES), 4)
    rewards[:, -1] = torch.tensor(VERL_SCORES)
    index = np.array([f"u{i // VERL_G}" for i in range(len(VERL_SCORES))], dtype=object)
    advantages, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=rewards,
        response_mask=torch.ones(len(VERL_SCORES), 4),
        index=index,
        norm_adv_by_std_in_grpo=norm,
    )
    return advantages[:, 0].tolist()


def test_rows_are_verls_lines_with_its_rewards(verl_dumps, converted):
    lines = [json.loads(line) for line in (verl_dumps / "1.jsonl").read_text().splitlines()]
    event = next(e for e in converted.events if e["type"] == "rollouts" and e["step"] == 1)
    assert [r["prompt"] for r in event["rows"]] == [line["input"] for line in lines]
    assert [r["completion"] for r in event["rows"]] == [line["output"] for line in lines]
    assert [r["completion"] for r in event["rows"]] == VERL_COMPLETIONS
    # the score, and each numeric reward-info key, as reward columns; the text ones and the ground truth as columns
    assert event["reward_names"] == ["acc"] and converted.reward_names == ["acc"]
    assert [r["reward"] for r in event["rows"]] == pytest.approx(VERL_SCORES)
    assert [r["rewards"][0] for r in event["rows"]] == [line["acc"] for line in lines]
    assert event["rows"][0]["columns"] == {"gts": "5", "pred": "5"}


def test_groups_come_from_the_uid_or_the_prompt(converted):
    by_step = {e["step"]: e for e in converted.events if e["type"] == "rollouts"}
    for step in (1, 2):  # step 1's lines have no uid (verl's plain dump): the prompt text groups them
        assert [r["group"] for r in by_step[step]["rows"]] == [i // VERL_G for i in range(len(VERL_SCORES))]
    assert by_step[1]["num_generations"] == VERL_G


def test_advantages_are_verls_grpo_estimator_on_the_scores(converted):
    assert converted.advantage_computed
    for event in (e for e in converted.events if e["type"] == "rollouts"):
        assert [r["advantage"] for r in event["rows"]] == pytest.approx(_verl_advantages(True), abs=1e-6)
    groups = [i // VERL_G for i in range(len(VERL_SCORES))]
    assert grpo_advantages(VERL_SCORES, groups, norm_by_std=False) == pytest.approx(_verl_advantages(False), abs=1e-6)
    assert grpo_advantages([2.0], [0]) == pytest.approx([2.0 / (1 + 1e-6)])  # a group of one: verl's mean 0, std 1


def test_the_record_is_every_step_verl_dumped(converted):
    assert converted.rollout_steps == [1, 2]
    means = {e["step"]: e["metrics"] for e in converted.events if e["type"] == "metrics"}
    assert means[1]["rewards/acc/mean"] == pytest.approx(np.mean([float(s == 1.0) for s in VERL_SCORES]))
    assert means[1]["reward"] == pytest.approx(np.mean(VERL_SCORES))


def test_verls_file_logger_beside_the_dumps_gives_the_metrics(verl_dumps, tmp_path, monkeypatch):
    from verl.utils.tracking import FileLogger

    folder = tmp_path / "dumps"
    shutil.copytree(verl_dumps, folder)
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(folder / "experiment.jsonl"))
    logger = FileLogger("project", "experiment")  # verl's own file logger (trainer.logger: [file])
    for step in (1, 2):
        logger.log({"actor/pg_loss": -0.1 * step, "critic/score/mean": np.float32(0.5), "actor/kl_loss": 0.01}, step)
    logger.finish()
    converted = convert(folder)
    metrics = {e["step"]: e["metrics"] for e in converted.log_metrics}
    assert metrics[2]["actor/pg_loss"] == pytest.approx(-0.2) and metrics[2]["loss"] == pytest.approx(-0.2)
    assert metrics[1]["kl"] == pytest.approx(0.01) and metrics[1]["reward"] == pytest.approx(0.5)
    assert converted.rollout_steps == [1, 2]

    with open(folder / "experiment.jsonl", "ab") as fh:
        fh.write(b'{"step": "two", "data": {}}\n')
    with pytest.raises(ImportFault, match="experiment.jsonl: line 3"):
        convert(folder)
